"""`gpufleet export skypilot`: a deployed stack's outputs -> SkyPilot's SSH Node Pools.

SkyPilot (0.14.1) takes existing machines through `~/.sky/ssh_node_pools.yaml`: a mapping of
pool name to `hosts` (an address, or an alias of the user's OpenSSH configuration) with the
pool's `user` and `identity_file` (sky/ssh_node_pools/utils.py, prepare_hosts_info). `sky ssh
up` installs k3s on them over SSH; jobs then run with `infra: ssh/<pool>`. One pool per fleet,
named after it. Public nodes are listed by address; private ones by their node name, an alias
that the `ssh_config` written beside the pools file resolves through the fleet's bastion, or
through the cloud's own tunnel (GCP's Identity-Aware Proxy, as the OS Login user the command
is given; AWS Session Manager nodes take no SSH key, so no pool) - SkyPilot asks `ssh -G`
whether a host is an alias, so that file must be included from ~/.ssh/config. A host
SkyPilot could not take - an IPv6 address (k3s names its node after
the host), a name with characters OpenSSH or Kubernetes refuse - is refused here with the
reason, before SkyPilot ever sees it. Pure: the CLI writes the files.

The launch task (`--task`): the fleet's locked offer first, then the offers `gpufleet up
--fallback` would move to, in its order, as SkyPilot's `resources.ordered` (docs.skypilot.co,
"Resources: ordered"), so SkyPilot launching on its own tries the same offers.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from gpufleet.backends import access_way
from gpufleet.compile import SKY_MARKER, takes
from gpufleet.handoff.export import bucket_mounts
from gpufleet.handoff.exportcheck import PLACEHOLDER, add_file, mark_placeholders
from gpufleet.handoff.hosts import reachable_hosts
from gpufleet.handoff.outputs import ExportError, _secret, check_shape, fleets_in
from gpufleet.traits import AccessWay

MARKER = SKY_MARKER
POOLS_FILE = "ssh_node_pools.yaml"
SSH_CONFIG = "ssh_config"
# a Kubernetes node name (DNS-1123 label) that OpenSSH also takes as a Host alias
_ALIAS = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
# an identity file path that goes into YAML and an ssh_config line unquoted-safe
_KEY_PATH = re.compile(r"[A-Za-z0-9._/~+@-]+")


def _host(fleet: str, value: Any, what: str) -> str:
    """An IPv4 address (or the offline plan's placeholder), else the reason it is refused."""
    text = str(value)
    if PLACEHOLDER.fullmatch(text):
        return text
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ExportError(f"fleet {fleet}: {what} {text!r} is not an IP address; SkyPilot's "
                          "SSH Node Pools take IPv4 addresses (or ssh-config aliases gpufleet "
                          "writes); nothing was written") from None
    if address.version != 4:
        raise ExportError(f"fleet {fleet}: {what} {text} is IPv6; `sky ssh up` names each "
                          "k3s node after its host and joins the agents at https://<head>:6443,"
                          " which takes IPv4 addresses only; nothing was written")
    return text


def _alias(fleet: str, value: Any) -> str:
    text = str(value)
    if not _ALIAS.fullmatch(text):
        raise ExportError(f"fleet {fleet}: node name {text!r} cannot be a host alias (lower-case "
                          "letters, digits and dashes: SkyPilot names the k3s node after it); "
                          "nothing was written")
    return text


def check_identity_file(path: str) -> str:
    if not _KEY_PATH.fullmatch(path):
        raise ExportError(f"--identity-file {path!r}: use a path of letters, digits and "
                          "._/~+@- only (it goes into ssh_config and the pools file as is)")
    return path


# an OS Login POSIX user name (`gcloud compute os-login describe-profile`); a project or zone
_LOGIN = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")
_PLACE = re.compile(r"[a-z][a-z0-9-]{0,62}")


def _proxied(name: str, out: Mapping[str, Any], way: AccessWay, identity_file: str,
             login: str | None, config: list[str]) -> tuple[dict[str, Any] | None, str]:
    """A pool reached through the cloud's own way in (Identity-Aware Proxy): each node an
    alias whose ProxyCommand opens the tunnel, as the node's OS Login user."""
    if not way.ssh_proxy:
        return None, (f"fleet {name}: reached through {way.shown}, which takes no SSH key: "
                      "SkyPilot's SSH Node Pools need SSH with a key; it gets no pool")
    if not login:
        return None, (f"fleet {name}: reached through {way.shown}: pass --os-login-user "
                      "(your POSIX name, `gcloud compute os-login describe-profile`) after "
                      "`gcloud compute os-login ssh-keys add --key-file KEY.pub`; it gets no "
                      "pool")
    if not _LOGIN.fullmatch(login):
        raise ExportError(f"--os-login-user {login!r} is not a POSIX user name")
    nodes = out.get("nodes") or []
    if not nodes:
        return None, f"fleet {name}: no nodes (a networks-only fleet); it gets no pool"
    scope = str(out.get("scope") or "")
    names = []
    for node in nodes:
        alias = _alias(name, node.get("name"))
        zone = str(node.get("zone") or out.get("zone") or "")
        if not (_PLACE.fullmatch(scope) and _PLACE.fullmatch(zone)):
            raise ExportError(f"fleet {name}: node {alias}'s project {scope!r} or zone "
                              f"{zone!r} is not one gpufleet's program writes; nothing was "
                              "written")
        config += [f"Host {alias}", f"  HostName {alias}", f"  User {login}",
                   f"  IdentityFile {identity_file}", "  IdentitiesOnly yes",
                   f"  ProxyCommand {way.ssh_proxy.format(scope=scope, zone=zone)}", ""]
        names.append(alias)
    return {"hosts": names}, ""


def _pool(name: str, out: Mapping[str, Any], identity_file: str, listed: Sequence[str] | None,
          config: list[str], login: str | None = None) -> tuple[dict[str, Any] | None, str]:
    """One fleet's pool (and its ssh_config lines into ``config``), or None and why not."""
    way = access_way(str((out.get("access") or {}).get("method") or ""))
    if way is not None:
        return _proxied(name, out, way, identity_file, login, config)
    hosts, why, _ = reachable_hosts(name, out, listed, "SkyPilot's SSH Node Pools")
    if hosts is None:
        return None, f"{why}; it gets no pool"
    public = bool(out.get("public_ips"))
    what = "public address" if public else "private address"
    addresses = [_host(name, h, what) for h in hosts]
    user = str((out.get("access") or {}).get("user") or "ubuntu")
    if not _ALIAS.fullmatch(user.replace("_", "-")):
        raise ExportError(f"fleet {name}: login user {user!r} is not a user name gpufleet "
                          "writes; nothing was written")
    bastion = out.get("bastion") if isinstance(out.get("bastion"), dict) else None
    if public or not bastion:
        return {"user": user, "identity_file": identity_file, "hosts": addresses}, ""
    jump = _alias(name, f"{name}-bastion")
    jump_user = str(bastion.get("user") or user)
    if not _ALIAS.fullmatch(jump_user.replace("_", "-")):
        raise ExportError(f"fleet {name}: bastion user {jump_user!r} is not a user name "
                          "gpufleet writes; nothing was written")
    address = _host(name, _secret(bastion.get("address")), "bastion address")
    config += [f"Host {jump}", f"  HostName {address}", f"  User {jump_user}",
               f"  IdentityFile {identity_file}", "  IdentitiesOnly yes", ""]
    names = [_alias(name, n.get("name")) for n in out.get("nodes") or []]
    if len(names) != len(addresses):  # a scale set read from Azure: its own order
        names = [_alias(name, f"{name}-node-{i}") for i in range(len(addresses))]
    for alias, address in zip(names, addresses, strict=True):
        config += [f"Host {alias}", f"  HostName {address}", f"  User {user}",
                   f"  IdentityFile {identity_file}", "  IdentitiesOnly yes",
                   f"  ProxyJump {jump}", ""]
    return {"hosts": names}, ""


def export_skypilot(outputs: Mapping[str, Any], identity_file: str,
                    scale_sets: Mapping[str, Sequence[str]] | None = None,
                    os_login_user: str | None = None) -> tuple[dict[str, str], list[str]]:
    """The pools file and, when a pool is behind a bastion, the ssh_config it needs (file
    name -> text), and the notes: each fleet that gets no pool, with the reason."""
    check_identity_file(identity_file)
    fleets = fleets_in(outputs)
    if not fleets:
        raise ExportError("the stack outputs hold no gpufleet fleets; is this the right stack, "
                          "and has `pulumi up` run?")
    pools: dict[str, Any] = {}
    config: list[str] = []
    notes: list[str] = []
    for name, out in fleets.items():
        check_shape(name, out)
        _alias(name, name)
        try:
            pool, why = _pool(name, out, identity_file, (scale_sets or {}).get(name), config,
                              os_login_user)
        except (KeyError, TypeError, AttributeError) as e:
            raise ExportError(f"stack output '{name}' does not look like a gpufleet fleet "
                              f"output ({type(e).__name__}: {e})") from None
        if pool is None:
            notes.append(why)
            continue
        pools[name] = pool
        held = bucket_mounts(out)
        if held:
            notes.append(f"fleet {name}: its hosts mount bucket(s) " + ", ".join(
                f"{b} at {m}" for b, _, m, _ in held) + "; SkyPilot's k3s pods reach a host "
                "path through the task's `config: {kubernetes: {pod_config: ...}}` "
                "(a hostPath volume)")
        if not takes(out.get("handoff"), "skypilot"):
            notes.append(f"fleet {name}: handed to dstack only (the backends file's `fleets: "
                         f"{{{name}: {{handoff: skypilot}}}}` or `both`, then `pulumi up`, "
                         "opens k3s's ports among its nodes and has the host setup check what "
                         "SkyPilot needs); its pool is written, untested by either")
    if not pools:
        raise ExportError("no fleet of the stack can be a SkyPilot pool: " + "; ".join(notes))
    files: dict[str, str] = {}
    add_file(files, POOLS_FILE, f"{MARKER} from the stack outputs: one SSH Node Pool per "
             "fleet.\n# Copy to ~/.sky/ssh_node_pools.yaml, then `sky ssh up` and "
             "`sky launch --infra ssh/<pool>`.\n" + yaml.safe_dump(pools, sort_keys=False),
             "pools")
    if config:
        add_file(files, SSH_CONFIG, f"{MARKER}: the host aliases the pools of private "
                 "fleets use,\n# each reached through its fleet's bastion. Put `Include "
                 "<this file's absolute path>` at the top\n# of ~/.ssh/config: SkyPilot asks "
                 "`ssh -G` whether a host is an alias.\n\n" + "\n".join(config), "pools")
        notes.append(f"private fleets' pools list host aliases: include {SSH_CONFIG} from "
                     "~/.ssh/config before `sky ssh up` (a remote API server's `sky ssh up "
                     "-f` takes addresses only)")
    mark_placeholders(files, notes)
    return files, notes


def infra(backend: str, region: str, zone: str | None) -> str:
    """SkyPilot's `infra` string of an offer: cloud/region[/zone] (sky/utils/infra_utils)."""
    return "/".join(p for p in (backend, region, zone) if p)


def launch_task(name: str, nodes: int, offers: Sequence[Mapping[str, Any]]) -> str:
    """A SkyPilot task that launches the fleet's nodes on the offers gpufleet would use, in
    the order it would try them (``offers``: backend, region, zone, instance_type, spot)."""
    ordered = [{"infra": infra(o["backend"], o["region"], o.get("zone")),
                "instance_type": o["instance_type"], "use_spot": bool(o["spot"])}
               for o in offers]
    doc = {"name": name, "num_nodes": max(nodes, 1), "resources": {"ordered": ordered},
           "run": "nvidia-smi -L"}
    return (f"{MARKER} from the lock of fleet {name}: the locked offer first, then the\n"
            "# offers `gpufleet up --fallback` moves to, in its order. Replace `run` with "
            "your job;\n# `sky launch` tries each entry of `ordered` in turn.\n"
            + yaml.safe_dump(doc, sort_keys=False))
