"""lambda: the names Lambda Cloud's API accepts for what gpufleet creates. Pure data.

Limits from Lambda Cloud's OpenAPI document, version 1.10.0 (docs-api.lambda.ai/api/cloud;
the copy the tests validate against is tests/lambda/openapi-1.10.0.json): an instance's
`name` up to 64 characters, an SSH key's 1-64, a firewall ruleset's up to 64, a filesystem's
1-60 matching ``^[a-zA-Z]+[0-9a-zA-Z-]*$``. Lambda has no auto-naming: the components name
each resource ``<logical name>-<7 hex characters of the project and stack>`` so that two
stacks of one account never collide (SSH keys and filesystems are named per account)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from gpufleet.traits import NameBudget, NameRule

_API = "docs-api.lambda.ai/api/cloud (OpenAPI 1.10.0)"
_PREFIX = "pulumi-python:dynamic/lambda"
INSTANCE = f"{_PREFIX}:Instance"
READY = f"{_PREFIX}:InstanceReady"  # a node's wait for `active`: no name at Lambda
SSH_KEY = f"{_PREFIX}:SshKey"
FIREWALL = f"{_PREFIX}:FirewallRuleset"
FILESYSTEM = f"{_PREFIX}:Filesystem"

NAME_RULES = MappingProxyType({
    INSTANCE: NameRule(64, _API, None, "name"),
    SSH_KEY: NameRule(64, _API, None, "name"),
    FIREWALL: NameRule(64, _API, None, "name"),
    FILESYSTEM: NameRule(60, _API, re.compile(r"[a-zA-Z]+[0-9a-zA-Z-]*"), "name"),
})

NAME_BUDGETS = MappingProxyType({
    # 64 - 8 (the stack's suffix) - len("-node-99999"): a node's instance name
    "fleet": NameBudget(45, "-node-99999", INSTANCE),
})

# Lambda's tags: keys `^[a-z][a-z0-9-:]+$` of at most 55 characters, values of at most 128
TAG_KEY = re.compile(r"[^a-z0-9:-]")
MAX_TAG_KEY, MAX_TAG_VALUE = 55, 128


def tag_problems(labels: Mapping[str, str]) -> list[str]:
    """What Lambda would refuse or merge of these tags once rewritten as :func:`tags` does:
    a key shorter than two characters (the key pattern `^[a-z][a-z0-9-:]+$`), two keys that
    become one."""
    out: list[str] = []
    seen: dict[str, str] = {}
    for key in sorted(labels):
        k = _key(key)
        if len(k) < 2:
            out.append(f"tag key '{key}' is one character; Lambda's keys have two or more "
                       "(`^[a-z][a-z0-9-:]+$`, OpenAPI 1.10.0 RequestedTagEntry)")
        if k in seen:
            out.append(f"tag keys '{seen[k]}' and '{key}' both become '{k}' on Lambda "
                       "(keys are lower-case): one would be lost")
        seen.setdefault(k, key)
    return out


def _key(key: str) -> str:
    k = TAG_KEY.sub("-", key.lower())
    return k if k[:1].isalpha() else "t" + k


def tags(labels: Mapping[str, str]) -> dict[str, str]:
    """gpufleet's tags as Lambda takes them: keys lower-cased, other characters as `-`, a
    letter first; too long keys and values cut."""
    out: dict[str, str] = {}
    for key, value in labels.items():
        out[_key(key)[:MAX_TAG_KEY]] = str(value)[:MAX_TAG_VALUE]
    return out
