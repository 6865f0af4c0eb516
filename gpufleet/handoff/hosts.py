"""Where a deployed fleet's nodes are reached: their addresses from the stack outputs (or,
for an Azure scale set, from `az vmss nic list`), or the reason a tool cannot reach them.
Shared by `export dstack` and `export skypilot`. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpufleet.backends import access_way
from gpufleet.handoff.outputs import ExportError, _secret


def reachable_hosts(name: str, out: Mapping[str, Any], listed: Sequence[str] | None,
                    tool: str = "dstack's SSH fleets") -> tuple[list[str] | None, str, str]:
    """The addresses ``tool`` reaches a fleet's nodes at (public, or private behind the
    bastion), or None with the reason it cannot reach them and its kind (way, none, empty,
    scale, missing). ``listed``: a scale set's instance addresses, read from Azure
    (`scale_set_hosts`)."""
    access = out.get("access") or {}
    method = str(access.get("method") or "")
    if access_way(method) is not None:
        return None, (f"fleet {name}: reached through {method.upper()}, which {tool} cannot "
                      "use"), "way"
    if method == "none":
        return None, (f"fleet {name}: `bastion: none` and no public IPs: {tool} cannot reach "
                      "it"), "none"
    nodes = out.get("nodes") or []
    if not nodes:
        return None, f"fleet {name}: no nodes (a networks-only fleet)", "empty"
    public = bool(out.get("public_ips"))
    key = "public_ip" if public else "private_ip"
    hosts = [_secret(n.get(key)) for n in nodes]
    vmss = out.get("scale_set") or {}
    if vmss and any(not h for h in hosts):
        if listed is None:
            return None, (f"fleet {name}: an Azure scale set ({_secret(vmss.get('name'))}), "
                          "whose instances' addresses are not stack outputs: pass "
                          f"--azure-nics {name}=FILE with the output of `az vmss nic list "
                          f"--resource-group {_secret(out.get('resource_group'))} --vmss-name "
                          f"{_secret(vmss.get('name'))} -o json`, or --resolve-scale-sets "
                          "(reads them with your Azure credentials)"), "scale"
        if len(listed) != len(nodes):
            return None, (f"fleet {name}: the scale set lists {len(listed)} instance(s), the "
                          f"stack deployed {len(nodes)}; run `gpufleet drift` and `pulumi up`, "
                          "then export again"), "scale"
        hosts = list(listed)
    if any(not h for h in hosts):
        return None, (f"fleet {name}: the stack outputs have no {key.replace('_', ' ')} for "
                      "every node"), "missing"
    return [str(h) for h in hosts], "", ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def scale_set_hosts(data: Any, public: bool, source: str) -> list[str]:
    """The instances' addresses, by instance id, from `az vmss nic list -o json` or the
    ARM answer it prints (`{"value": [...]}`): each NIC's primary IP configuration."""
    nics = data.get("value") if isinstance(data, dict) else data
    if not isinstance(nics, list):
        raise ExportError(f"{source}: not a list of scale set NICs (`az vmss nic list -o json`)")
    found: list[tuple[int, str]] = []
    for i, nic in enumerate(nics):  # any shape: what is not the expected type is absent
        props = _dict(_dict(nic).get("properties", nic))
        configs = props.get("ipConfigurations")
        vm = _dict(props.get("virtualMachine")).get("id")
        vm = vm if isinstance(vm, str) else ""
        primary = [_dict(_dict(c).get("properties", c))
                   for c in (configs if isinstance(configs, list) else [])]
        primary = [c for c in primary if c.get("primary", True) is not False] or primary
        key = "publicIPAddress" if public else "privateIPAddress"
        address = primary[0].get(key) if primary else None
        if public and isinstance(address, dict):  # a reference only: no address in a list
            address = None
        index = vm.rsplit("/virtualMachines/", 1)[-1] if "/virtualMachines/" in vm else ""
        if not isinstance(address, str) or not index.isdigit():
            raise ExportError(f"{source}: NIC {i} has no {key} and instance id (is this "
                              "`az vmss nic list -o json` of the fleet's scale set?)")
        found.append((int(index), address))
    return [address for _, address in sorted(found)]
