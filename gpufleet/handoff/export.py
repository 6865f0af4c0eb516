"""`gpufleet export dstack`: a deployed stack's outputs -> files dstack reads.

Per fleet, an SSH fleet file (`type: fleet` with `ssh_config`: the nodes' private addresses,
the bastion as `proxy_jump`, the main subnet as `network`) that `dstack apply -f` takes, and
one dstack server config snippet (`projects: [{name, backends: [...]}]`) naming the networks
gpufleet created (`vpc_name`/`vpc_ids`/`subnet_ids`, `extra_vpcs`, `roce_vpcs`, `public_ips`,
`regions`), so a dstack server can provision its own instances into them. Field names follow
dstack's backend config models (yaml-reference.md section 8). Pure except :func:`write_files`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpufleet.fileio import write_many
from gpufleet.input import JsonInputError, parse_json, validate_texts
from gpufleet.input import schema_validator as validator
from gpufleet.review import STACK_TYPE, StateError, is_secret, parse_export

MARKER = "# Written by `gpufleet export dstack`"
CONFIG_FILE = "dstack-server-config.yml"


class ExportError(Exception):
    """The outputs cannot be exported; the message says why and what to do."""


@dataclass
class Exported:
    files: dict[str, str] = field(default_factory=dict)  # file name -> text
    notes: list[str] = field(default_factory=list)


def outputs_from_stack_output(raw: bytes | str, source: str) -> dict[str, Any]:
    """`pulumi stack output --json` -> the stack's outputs."""
    data = raw.encode("utf-8") if isinstance(raw, str) else raw
    try:
        outputs = parse_json(data, source, "stack outputs")
    except JsonInputError as e:
        raise ExportError(f"not stack outputs: {e}; write them with `pulumi stack output "
                          "--json --show-secrets > FILE`") from None
    if not isinstance(outputs, dict):
        raise ExportError(f"{source}: not stack outputs: expected a JSON object")
    return outputs


def outputs_from_state(raw: bytes | str, source: str) -> dict[str, Any]:
    """A `pulumi stack export` -> the outputs of its root Stack resource."""
    try:
        state = parse_export(raw, source)
    except StateError as e:
        raise ExportError(str(e)) from None
    root = next((r for r in state.resources if r.type == STACK_TYPE), None)
    if root is None or not root.outputs:
        raise ExportError(f"{source}: the export has no stack outputs; run `pulumi up` first")
    return dict(root.outputs)


def fleets_in(outputs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The fleet outputs gpufleet's program exports (gateways and others are skipped)."""
    return {name: v for name, v in sorted(outputs.items())
            if isinstance(v, dict) and {"backend", "nodes", "networks"} <= set(v)
            and not name.startswith("gateway-")}


def _secret(value: Any) -> Any:
    if is_secret(value):
        return value.get("plaintext", value.get("value"))
    return value


def ssh_fleet(name: str, out: Mapping[str, Any], identity_file: str) -> tuple[str | None, str]:
    """The SSH fleet file of one fleet, or None with the reason it cannot have one."""
    access = out.get("access") or {}
    method = access.get("method")
    if method in ("iap", "ssm"):
        return None, (f"fleet {name}: reached through {method.upper()}, which dstack's SSH "
                      "fleets cannot use; it gets no SSH fleet file (use the server config)")
    if method == "none":
        return None, f"fleet {name}: `bastion: none` and no public IPs: dstack cannot reach it"
    nodes = out.get("nodes") or []
    if not nodes:
        return None, f"fleet {name}: no nodes (a networks-only fleet): see the server config"
    public = bool(out.get("public_ips"))
    key = "public_ip" if public else "private_ip"
    hosts = [_secret(n.get(key)) for n in nodes]
    if any(not h for h in hosts):
        return None, (f"fleet {name}: the stack outputs have no {key.replace('_', ' ')} for "
                      "every node (an Azure scale set lists its instances itself: `az vmss "
                      "nic list`); no SSH fleet file")
    user = access.get("user") or "ubuntu"
    cfg: dict[str, Any] = {"user": user, "identity_file": identity_file}
    bastion = out.get("bastion")
    if bastion and not public:
        cfg["proxy_jump"] = {"hostname": _secret(bastion["address"]),
                             "user": bastion.get("user") or user,
                             "identity_file": identity_file}
    main = (out.get("networks") or {}).get("main") or {}
    subnets = main.get("subnets") or []
    if subnets and subnets[0]:
        cfg["network"] = subnets[0]
    cfg["hosts"] = hosts
    doc: dict[str, Any] = {"type": "fleet", "name": name}
    if out.get("placement") == "cluster":
        doc["placement"] = "cluster"
    doc["ssh_config"] = cfg
    header = (f"{MARKER} from the stack outputs of fleet {name}.\n"
              "# Apply with `dstack apply -f` on a machine that holds the identity file.\n")
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False), ""


def backend_entry(out: Mapping[str, Any]) -> dict[str, Any]:
    """dstack's backend config for the networks of one fleet."""
    backend = out["backend"]
    region = out["region"]
    nets = out.get("networks") or {}
    main = nets.get("main") or {}
    entry: dict[str, Any] = {"type": backend, "regions": [region]}
    if backend == "gcp":
        if not out.get("scope"):
            raise ExportError("a GCP fleet's backends entry sets no `project_id`, which dstack's "
                              "gcp backend requires: set it in the backends file and re-run "
                              "`pulumi up`")
        entry["project_id"] = out["scope"]
        entry["vpc_name"] = _secret(main.get("name"))
        if main.get("project"):  # a Shared VPC of this host project
            entry["vpc_project_id"] = main["project"]
        if out.get("extra_vpcs"):
            entry["extra_vpcs"] = [_secret(v) for v in out["extra_vpcs"]]
        if out.get("roce_vpcs"):
            entry["roce_vpcs"] = [_secret(v) for v in out["roce_vpcs"]]
    elif backend == "aws":
        entry["vpc_ids"] = {region: _secret(main.get("id"))}
        entry["default_vpcs"] = False
    elif backend == "azure":
        for key, value in (("tenant_id", out.get("tenant_id")),
                           ("subscription_id", out.get("scope"))):
            if not value:
                raise ExportError(f"an Azure fleet's backends entry sets no `{key}`, which "
                                  "dstack's azure backend requires: set it in the backends "
                                  "file and re-run `pulumi up`")
            entry[key] = value
        rg = _secret(out.get("resource_group"))
        subnet_ids = out.get("subnets") or {}
        subnet = next(iter(subnet_ids.values()), None) if subnet_ids else None
        sub_name = str(_secret(subnet) or "").rsplit("/", 1)[-1]
        entry["subnet_ids"] = {region: f"{rg}/{_secret(main.get('name'))}/{sub_name}"}
    entry["public_ips"] = bool(out.get("public_ips"))
    entry["creds"] = {"type": "default"}
    return entry


_SHAPE: dict[str, tuple[type, ...]] = {
    "backend": (str,), "region": (str,), "nodes": (list,), "networks": (dict,),
    "access": (dict, type(None)), "bastion": (dict, type(None)), "extra_vpcs": (list,),
    "roce_vpcs": (list,), "subnets": (dict,), "public_ips": (bool,),
}


def check_shape(name: str, out: Mapping[str, Any]) -> None:
    """Stack outputs are data from a file: refuse what gpufleet's program did not write."""
    wrong = [k for k, types in _SHAPE.items() if k in out and not isinstance(out[k], types)]
    raw_nodes, raw_networks = out.get("nodes"), out.get("networks")
    nodes: list[Any] = raw_nodes if isinstance(raw_nodes, list) else []
    networks: dict[str, Any] = raw_networks if isinstance(raw_networks, dict) else {}
    wrong += [f"nodes[{i}]" for i, n in enumerate(nodes) if not isinstance(n, dict)]
    wrong += [f"networks.{k}" for k, v in networks.items() if not isinstance(v, dict)]
    if out.get("backend") not in ("aws", "gcp", "azure") or "region" not in out:
        wrong.append("backend/region")
    if wrong:
        raise ExportError(f"stack output '{name}' does not look like a gpufleet fleet output "
                          f"({', '.join(wrong[:5])}); was the stack deployed by gpufleet's "
                          "program?")


def export_dstack(outputs: Mapping[str, Any], identity_file: str) -> Exported:
    fleets = fleets_in(outputs)
    for name, out in fleets.items():
        check_shape(name, out)
    if not fleets:
        raise ExportError("the stack outputs hold no gpufleet fleets; is this the right "
                          "stack, and has `pulumi up` run?")
    result = Exported()
    projects = []
    for name, out in fleets.items():
        try:
            text, note = ssh_fleet(name, out, identity_file)
            entry = backend_entry(out)
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            raise ExportError(f"stack output '{name}' does not look like a gpufleet fleet "
                              f"output ({type(e).__name__}: {e}); was the stack deployed by "
                              "gpufleet's program?") from None
        if text is not None:
            result.files[f"{name}.dstack.yml"] = text
        if note:
            result.notes.append(note)
        projects.append({"name": name, "backends": [entry]})
    fleet_files = {n: text for n, text in result.files.items() if n.endswith(".dstack.yml")}
    check = validate_texts(fleet_files)
    if not check.ok:
        first = next(d for d in check.diagnostics if d.is_error)
        raise ExportError(f"the SSH fleet file {first.file} would not validate: {first.message} "
                          "(the stack outputs hold values gpufleet's program does not write)")
    config = {"projects": projects}
    errors = sorted(e.message for e in validator("dstack-server-config").iter_errors(config))
    if errors:
        raise ExportError("the server config would not match dstack's backend models: "
                          + "; ".join(errors[:5]))
    result.files[CONFIG_FILE] = (
        f"{MARKER}: one dstack project per fleet, with the networks\n"
        "# gpufleet created. Merge it into ~/.dstack/server/config.yml and restart the server;\n"
        "# `creds: {type: default}` uses the server's ambient cloud credentials.\n"
        + yaml.safe_dump(config, sort_keys=False, default_flow_style=False))
    return result


def write_files(exported: Exported, out_dir: str, force: bool) -> list[str]:
    """Write every file atomically; refuse (writing nothing) when a file exists that this
    command did not write, unless ``force``, or when a target is not a regular file
    (``WriteError``)."""
    return write_many(out_dir, exported.files.items(), MARKER, force)
