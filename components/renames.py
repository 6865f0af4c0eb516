"""Fleet and gateway renames (`previous_names`) as Pulumi aliases on every descendant.

The engine only derives a child's alias from its parent's when the child's name starts with
the parent's name; gpufleet's nested children (`a4-subnet` under `a4-net`) do not, so each
descendant gets an explicit alias to its old name instead. Legacy `transformations` are used
because they run in the SDK (and therefore also under the mock monitor).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi


def aliases_for(new: str, previous: Sequence[str], name: str) -> list[pulumi.Alias]:
    if not name.startswith(new):
        return []
    return [pulumi.Alias(name=old + name[len(new):]) for old in previous]


def rename_options(new: str, previous: Sequence[str]) -> pulumi.ResourceOptions:
    """Options for the top-level component: its own aliases plus a transformation that gives
    every descendant the alias to its old name."""
    if not previous:
        return pulumi.ResourceOptions()

    def transform(args: pulumi.ResourceTransformationArgs
                  ) -> pulumi.ResourceTransformationResult | None:
        aliases = aliases_for(new, previous, args.name)
        if not aliases:
            return None
        return pulumi.ResourceTransformationResult(
            args.props, pulumi.ResourceOptions.merge(args.opts,
                                                     pulumi.ResourceOptions(aliases=aliases)))

    return pulumi.ResourceOptions(aliases=aliases_for(new, previous, new),
                                  transformations=[transform])
