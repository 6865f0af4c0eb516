"""The policy pack `pulumi preview --policy-pack policy/` runs: gpufleet's rules, each at its
own enforcement level unless the pack's config overrides it
(`pulumi preview --policy-pack policy/ --policy-pack-config levels.json`)."""

from pulumi_policy import PolicyPack

from gpufleet.policy.rules import resource_policies

PolicyPack(name="gpufleet", policies=resource_policies(),
           description="Guardrails for GPU clusters built by gpufleet")
