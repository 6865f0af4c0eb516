"""`gpufleet export dstack`: a deployed stack's outputs -> files dstack reads.

Per fleet, an SSH fleet file (`type: fleet` with `ssh_config`: the nodes' private addresses,
the bastion as `proxy_jump`, the main subnet as `network`) that `dstack apply -f` takes, and
one dstack server config snippet (`projects: [{name, backends: [...]}]`) naming the networks
gpufleet created (`vpc_name`/`vpc_ids`/`subnet_ids`, `extra_vpcs`, `roce_vpcs`, `public_ips`,
`regions`), so a dstack server can provision its own instances into them. Field names follow
dstack's backend config models (yaml-reference.md section 8). Pure except :func:`write_files`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import yaml

from gpufleet.backends import is_backend, role_of, traits_of
from gpufleet.backends.plugin import RoleKey
from gpufleet.fileio import write_many
from gpufleet.handoff.exportcheck import add_file, mark_placeholders
from gpufleet.handoff.fabric import fabric_task
from gpufleet.handoff.gateways import gateway_file, gateway_notes, gateway_projects
from gpufleet.handoff.hosts import reachable_hosts
from gpufleet.handoff.outputs import (
    _SAFE_MOUNT,
    _SAFE_NAME,
    MARKER,
    ExportError,
    _secret,
    check_shape,
    fleets_in,
    gateways_in,
    volumes_in,
)
from gpufleet.input import schema_validator as validator
from gpufleet.input import validate_texts

CONFIG_FILE = "dstack-server-config.yml"


@runtime_checkable
class HandoffRole(Protocol):
    """A cloud's ``handoff`` role: dstack's backend settings for one fleet's networks."""

    def backend_entry(self, out: Mapping[str, Any], main: Mapping[str, Any],
                      plain: Callable[[Any], Any]) -> dict[str, Any]:
        """From the fleet's stack outputs and its main network's (``plain`` unwraps a
        secret output); a ValueError says what the backends file lacks."""
        ...


HANDOFF: RoleKey[HandoffRole] = RoleKey("handoff", HandoffRole)  # type: ignore[type-abstract]


@dataclass
class Exported:
    files: dict[str, str] = field(default_factory=dict)  # file name -> text
    notes: list[str] = field(default_factory=list)


# what `export dstack` adds to the reason a fleet gets no SSH fleet file, by kind
_DSTACK_TAIL = {"way": "; it gets no SSH fleet file (use the server config)",
                "empty": ": see the server config", "missing": "; no SSH fleet file"}


def ssh_fleet(name: str, out: Mapping[str, Any], identity_file: str,
              listed: Sequence[str] | None = None) -> tuple[str | None, str]:
    """The SSH fleet file of one fleet, or None with the reason it cannot have one.
    ``listed``: a scale set's instance addresses, read from Azure (`scale_set_hosts`)."""
    hosts, why, kind = reachable_hosts(name, out, listed)
    if hosts is None:
        return None, why + _DSTACK_TAIL.get(kind, "")
    access = out.get("access") or {}
    public = bool(out.get("public_ips"))
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
              "# Apply with `dstack apply -f` on a machine that holds the identity file.\n"
              + instance_volume_lines(out))
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False), ""


def storage_task(name: str, out: Mapping[str, Any]) -> str | None:
    """A dstack task that mounts the fleet's shared filesystems as instance volumes on every
    node and proves each is there and writable from the job: the hand-off a run copies its
    `volumes:` from. None for a fleet without filesystems."""
    mounts = _mounts(out)
    if not mounts:
        return None
    nodes = len(out.get("nodes") or []) or 1
    checks = [f'mountpoint -q {m} || {{ echo "gpufleet storage: node $DSTACK_NODE_RANK: '
              f'{m} ({fs}) is not mounted"; exit 1; }}' for fs, m in mounts]
    checks += [f"df -h {m} && f={m}/.gpufleet-$(hostname) && date > \"$f\" && cat \"$f\" "
               f"&& rm -f \"$f\"" for _, m in mounts]
    doc = {"type": "task", "name": f"{name[:24]}-storage", "fleets": [name], "nodes": nodes,
           "image": "ubuntu:22.04", "privileged": True,
           "volumes": [{"instance_path": m, "path": m} for _, m in mounts],
           "commands": checks}
    header = (f"{MARKER} from the stack outputs of fleet {name}.\n"
              "# Every node mounts the fleet's shared filesystems at boot; this task reaches "
              "them as\n# instance volumes on every node and writes a file to each. Copy its "
              "`volumes:` into your runs.\n")
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=4096)


def _mounts(out: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, mount path) of the fleet's filesystems in the stack outputs. The outputs are
    data from a file and both go into shell commands: only the names and paths gpufleet's
    own checks allow are taken."""
    filesystems = out.get("filesystems") or {}
    if not isinstance(filesystems, dict):
        return []
    found = []
    for fs_name, fs in sorted(filesystems.items()):
        mount = str(fs.get("mount") or "") if isinstance(fs, dict) else ""
        if _SAFE_MOUNT.fullmatch(mount) and _SAFE_NAME.fullmatch(str(fs_name)):
            found.append((str(fs_name), mount))
    return found


def instance_volume_lines(out: Mapping[str, Any]) -> str:
    """The fleet's shared filesystems and buckets as the instance volumes a dstack run mounts
    (an SSH fleet file has no place for them: they go into each task or service)."""
    mounts = _mounts(out)
    buckets = bucket_mounts(out)
    if not mounts and not buckets:
        return ""
    lines = ["# Shared filesystems, mounted on every host at boot by gpufleet. A run reaches",
             "# them as instance volumes; put these lines into its configuration (the",
             "# fleet's -storage.dstack.yml task checks them):", "#   volumes:"] if not buckets \
        else ["# Shared filesystems and buckets, mounted on every host at boot by gpufleet. A",
              "# run reaches them as instance volumes; put these lines into its configuration",
              "# (the fleet's -storage.dstack.yml task checks them):", "#   volumes:"]
    for fs_name, mount in mounts:
        lines += [f"#     - instance_path: {mount}   # filesystem {fs_name}",
                  f"#       path: {mount}"]
    for name, cloud, mount, read_only in buckets:
        lines += [f"#     - instance_path: {mount}   # bucket {name} ({cloud}"
                  f"{', read-only' if read_only else ''})", f"#       path: {mount}"]
    return "\n".join(lines) + "\n"


_SAFE_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]")


def bucket_mounts(out: Mapping[str, Any]) -> list[tuple[str, str, str, bool]]:
    """(bucket, cloud, mount path, read-only) of the buckets the fleet's nodes mount, from
    the stack outputs: only names and paths gpufleet's own checks allow are taken."""
    buckets = out.get("buckets") or {}
    if not isinstance(buckets, dict):
        return []
    found = []
    for name, b in sorted(buckets.items()):
        if not isinstance(b, dict):
            continue
        mount, cloud = str(b.get("mount") or ""), str(b.get("cloud") or "")
        if _SAFE_MOUNT.fullmatch(mount) and _SAFE_BUCKET.fullmatch(str(name)) and \
                cloud.isalnum():
            found.append((str(name), cloud, mount, b.get("read_only") is not False))
    return found


def volume_file(name: str, out: Mapping[str, Any]) -> tuple[str | None, str]:
    """dstack's volume file for a volume of the stack: an external volume (`volume_id`), so
    dstack attaches the disk the stack created (or was given) instead of making one."""
    volume_id = _secret(out.get("volume_id"))
    backend = out.get("backend")
    if not volume_id or not is_backend(backend) or \
            not traits_of(str(backend)).volume_disk_type:
        return None, f"volume {name}: the stack outputs carry no volume id; no volume file"
    doc: dict[str, Any] = {"type": "volume", "name": name, "backend": out["backend"],
                           "region": out["region"]}
    if out.get("zone"):
        doc["availability_zone"] = out["zone"]
    doc["volume_id"] = str(volume_id)
    header = (f"{MARKER} from the stack outputs of volume {name}.\n"
              "# An external volume: `dstack apply -f` registers the disk the stack holds "
              "(dstack\n# neither creates nor deletes it); mount it in a run with "
              f"`volumes: [{{name: {name}, path: /data}}]`.\n")
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False), ""


def backend_entry(name: str, out: Mapping[str, Any]) -> dict[str, Any]:
    """dstack's backend config for the networks of fleet ``name``."""
    backend = out["backend"]
    region = out["region"]
    nets = out.get("networks") or {}
    main = nets.get("main") or {}
    entry: dict[str, Any] = {"type": backend, "regions": [region]}
    try:
        entry |= role_of(backend, HANDOFF).backend_entry(out, main, _secret)
    except ValueError as e:
        raise ExportError(f"fleet '{name}': {e}") from None
    entry["public_ips"] = bool(out.get("public_ips"))
    entry["creds"] = creds_entry(out)
    return entry


def creds_entry(out: Mapping[str, Any]) -> dict[str, Any]:
    """The backends file's dstack credentials, by reference (a key file's path), or the
    server's default credentials when the file declares none or holds them inline (gpufleet
    writes no secret into a file: ``creds_note`` says what to add)."""
    ref = out.get("dstack_creds")
    if not isinstance(ref, dict) or ref.get("withheld") or not ref.get("type"):
        return {"type": "default"}
    return {k: v for k, v in ref.items() if k != "withheld"}


def creds_note(name: str, out: Mapping[str, Any]) -> str | None:
    """What the exported server config leaves out of the declared credentials, and why."""
    ref = out.get("dstack_creds")
    if not isinstance(ref, dict) or not ref.get("withheld"):
        return None
    return (f"fleet {name}: the backends file gives dstack {out.get('backend')} credentials "
            f"of type {ref.get('type')} inline ({ref['withheld']}); gpufleet writes no secret "
            "into the files it exports, so its project uses the server's default credentials: "
            "add the `creds` block to the merged server config yourself")


def _volumes_and_gateways(outputs: Mapping[str, Any], result: Exported) -> None:
    """The external volume files and the gateway files, with their notes."""
    for vol_name, vol in volumes_in(outputs).items():
        text, note = volume_file(vol_name, vol)
        if text is not None:
            add_file(result.files, f"volume-{vol_name}.dstack.yml", text, f"volume-{vol_name}")
        if note:
            result.notes.append(note)
    for gw_name, gw in gateways_in(outputs).items():
        text, note = gateway_file(gw_name, gw)
        if text is not None:
            add_file(result.files, f"gateway-{gw_name}.dstack.yml", text, f"gateway-{gw_name}")
        result.notes.append(note or f"gateway {gw_name}: see the steps at the top of "
                                    f"gateway-{gw_name}.dstack.yml")


def export_dstack(outputs: Mapping[str, Any], identity_file: str,
                  scale_sets: Mapping[str, Sequence[str]] | None = None) -> Exported:
    """SSH fleet files, gateway files and the server config; ``scale_sets``: fleet name ->
    its scale set's instance addresses (read by the CLI from Azure or a file)."""
    fleets = fleets_in(outputs)
    for name, out in fleets.items():
        check_shape(name, out)
    if not fleets and not gateways_in(outputs) and not volumes_in(outputs):
        raise ExportError("the stack outputs hold no gpufleet fleets, gateways or volumes; "
                          "is this the right stack, and has `pulumi up` run?")
    result = Exported()
    projects = []
    servers = control_planes(outputs)
    for name, out in fleets.items():
        project = _fleet_files(name, out, identity_file, (scale_sets or {}).get(name), result)
        if project is not None:
            projects.append(project)
            if not project["backends"][0]["public_ips"]:
                result.notes.append(_private_note(name, out, servers))
    _volumes_and_gateways(outputs, result)
    try:
        projects += gateway_projects(outputs, backend_entry)
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise ExportError(f"a gateway's stack output does not look like gpufleet's "
                          f"({type(e).__name__}: {e}); was the stack deployed by gpufleet's "
                          "program?") from None
    result.notes += gateway_notes(outputs, {str(p["name"]) for p in projects})
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
        f"{MARKER}: one dstack project per fleet (and per gateway\n"
        "# with a network of its own), with the networks gpufleet created. Merge it into\n"
        "# ~/.dstack/server/config.yml and restart the server;\n"
        "# `creds` is the backends file's by reference (a key file's path), else\n"
        "# `{type: default}`: the server's ambient cloud credentials.\n"
        + yaml.safe_dump(config, sort_keys=False, default_flow_style=False))
    mark_placeholders(result.files, result.notes)
    return result


def _fleet_files(name: str, out: Mapping[str, Any], identity_file: str,
                 listed: Sequence[str] | None, result: Exported) -> dict[str, Any] | None:
    """One fleet's SSH fleet and storage task files into ``result``; its server-config
    project, None for a backend without networks (its fleets are SSH fleets only: a dstack
    `lambda` backend would launch instances of its own)."""
    try:
        text, note = ssh_fleet(name, out, identity_file, listed)
        entry = None if traits_of(out["backend"]).networkless else backend_entry(name, out)
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise ExportError(f"stack output '{name}' does not look like a gpufleet fleet "
                          f"output ({type(e).__name__}: {e}); was the stack deployed by "
                          "gpufleet's program?") from None
    if text is not None:
        add_file(result.files, f"{name}.dstack.yml", text, name)
    if note:
        result.notes.append(note)
    if entry is not None and (withheld := creds_note(name, out)):
        result.notes.append(withheld)
    task = storage_task(name, out)
    if task is not None:
        add_file(result.files, f"{name}-storage.dstack.yml", task, name)
    task = fabric_task(name, out)
    if task is not None:
        add_file(result.files, f"{name}-fabric.dstack.yml", task, name)
    if entry is None:
        result.notes.append(f"fleet {name}: {out['backend']} builds no network, so the server "
                            "config gets no project for it; apply the SSH fleet file")
        return None
    return {"name": name, "backends": [entry]}


def control_planes(outputs: Mapping[str, Any]) -> dict[str, str]:
    """Fleet -> the URL of the dstack server its bastion runs (`control_plane`)."""
    out: dict[str, str] = {}
    for name, v in fleets_in(outputs).items():
        server = (v.get("bastion") or {}).get("server") if isinstance(v.get("bastion"),
                                                                      dict) else None
        if isinstance(server, dict) and server.get("url"):
            tunnel = _secret(server.get("tunnel"))
            out[name] = str(_secret(server["url"])) + (
                f" (reached through `{tunnel} -i <identity file>`; the server listens on "
                "the bastion's loopback only)" if tunnel else "")
    return out


def _private_note(name: str, out: Mapping[str, Any], servers: Mapping[str, str]) -> str:
    """What a dstack server needs to provision into a fleet's private networks."""
    main = (out.get("networks") or {}).get("main") or {}
    net = _secret(main.get("name")) or _secret(main.get("id")) or "the fleet's network"
    if name in servers:
        return (f"fleet {name}: private nodes; the dstack server at {servers[name]} runs "
                f"inside {net} (control_plane): merge this project into its config "
                "(~/.dstack/server/config.yml on the bastion) and restart it")
    here = [f"{n} ({u})" for n, u in servers.items()]
    return (f"fleet {name}: private nodes (`public_ips: false` in its server config "
            f"project): a dstack server provisions and reaches them only from inside {net} "
            f"({out.get('backend')} {out.get('region')}) or a network peered with it. Run the "
            "server there (`control_plane: {fleet: " + name + "}` in the backends file builds "
            "one on the bastion" + (f"; the stack's control plane is on {', '.join(here)}"
                                    if here else "") + "), or keep to the SSH fleet file, "
            "which reaches the nodes through the bastion (proxy_jump).")


def write_files(exported: Exported, out_dir: str, force: bool) -> list[str]:
    """Write every file atomically; refuse (writing nothing) when a file exists that this
    command did not write, unless ``force``, or when a target is not a regular file
    (``WriteError``)."""
    return write_many(out_dir, exported.files.items(), MARKER, force)
