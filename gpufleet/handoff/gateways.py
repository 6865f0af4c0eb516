"""Gateways handed to dstack: the gateway file dstack applies (its configuration as the
gateway file wrote it), the server config project whose backend names the network gpufleet
built for it, and the check that `*.<domain>` resolves to dstack's gateway. Pure but for the
resolver it is given.

dstack 0.22.5 creates the gateway itself (instances, addresses, load balancer) in the
network its project's backend config names for the gateway's region; `gpufleet gateway
sync` then reads where it runs and the next `pulumi up` points the record there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import yaml

from gpufleet.handoff.outputs import MARKER, _secret, gateways_in
from gpufleet.input import is_ipv4

PROJECT_PREFIX = "gateway-"  # an own-network gateway's project (gpufleet.compile.gateway)


def project_of(name: str, out: Mapping[str, Any]) -> str:
    """The dstack project the gateway is applied in (older outputs name none: its own)."""
    project = out.get("project")
    return str(project) if isinstance(project, str) and project else PROJECT_PREFIX + name


def owns_project(out: Mapping[str, Any]) -> bool:
    """The gateway has a network (and so a server config project) of its own; one that
    shares a fleet's lands in that fleet's project."""
    return not out.get("fleet") and isinstance((out.get("networks") or {}).get("main"), dict)


def gateway_file(name: str, out: Mapping[str, Any]) -> tuple[str | None, str]:
    """dstack's gateway file and, where there is no file, the reason."""
    conf = out.get("configuration")
    record = str(_secret(out.get("record")) or "")
    domain = record.removeprefix("*.").rstrip(".")
    if isinstance(conf, dict) and conf.get("type") == "gateway":
        doc = {k: v for k, v in conf.items()}
    elif domain:  # outputs of a gpufleet before dstack's own gateways: what they carry
        doc = {"type": "gateway", "name": name, "backend": out.get("backend"),
               "region": out.get("region"), "domain": domain}
    else:
        return None, f"gateway {name}: the stack outputs carry no configuration; no file"
    doc["name"] = name
    project = project_of(name, out)
    where = (f"fleet {out['fleet']}'s network" if out.get("fleet") else
             "the network gpufleet built for it")
    targets = [str(_secret(t)) for t in out.get("targets") or [] if t]
    now = (f"*.{domain} -> {', '.join(targets)} (synced)" if targets else
           f"*.{domain}: pending until steps 2 and 3") if domain else "no record (no domain)"
    header = (f"{MARKER} from the stack outputs of gateway {name}.\n"
              f"# dstack creates the gateway (instances, addresses, load balancer) in {where},\n"
              f"# which project {project} of dstack-server-config.yml names. In order:\n"
              f"#   1. dstack apply --project {project} -f gateway-{name}.dstack.yml\n"
              "#   2. gpufleet gateway sync --stack STACK  (reads its address from the server)\n"
              "#   3. pulumi up (or gpufleet up): the wildcard record follows dstack's gateway\n"
              f"# Now: {now}.\n")
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False), ""


def gateway_projects(outputs: Mapping[str, Any],
                     entry: Callable[[str, Mapping[str, Any]], dict[str, Any]]
                     ) -> list[dict[str, Any]]:
    """The server config projects of the gateways with a network of their own, each backend
    entry made by the backend's hand-off (``entry``) as a fleet's is."""
    projects = []
    for name, out in gateways_in(outputs).items():
        if owns_project(out):
            projects.append({"name": project_of(name, out),
                             "backends": [entry(f"gateway-{name}", out)]})
    return projects


def gateway_notes(outputs: Mapping[str, Any], projects: set[str]) -> list[str]:
    """A gateway sharing a fleet whose project the config does not hold cannot land."""
    notes = []
    for name, out in gateways_in(outputs).items():
        fleet = out.get("fleet")
        if fleet and str(fleet) not in projects:
            notes.append(f"gateway {name}: it shares fleet {fleet}'s network, which the stack "
                         "outputs do not hold; export the whole stack")
    return notes


Resolver = Callable[[str], list[str]]  # host name -> its addresses


def check_gateway_dns(outputs: Mapping[str, Any], resolve: Resolver
                      ) -> list[tuple[str, bool, str]]:
    """Per gateway: whether a name under its wildcard record resolves to where dstack's
    gateway runs (the synced addresses, or what its load balancer's host name resolves to).
    A name that does not resolve, or a gateway not synced yet, is a failure."""
    out: list[tuple[str, bool, str]] = []
    for name, gw in gateways_in(outputs).items():
        record = str(_secret(gw.get("record")) or "")
        domain = record.removeprefix("*.").rstrip(".")
        targets = sorted({str(_secret(a)) for a in gw.get("targets") or [] if a})
        if not domain or not targets:
            out.append((name, False, "the record is pending: run `gpufleet gateway sync`, then "
                                     "`pulumi up`" if domain else "the gateway has no record"))
            continue
        probe = f"gpufleet-dns-check.{domain}"
        try:
            want = targets if all(is_ipv4(t) for t in targets) else \
                sorted(set(resolve(targets[0])))
            got = sorted(set(resolve(probe)))
        except OSError as e:
            out.append((name, False, f"{probe} does not resolve ({e}); the record *.{domain} "
                                     f"should point at {', '.join(targets)}"))
            continue
        ok = bool(got) and set(got) <= set(want)
        out.append((name, ok, f"{probe} -> {', '.join(got) or 'nothing'}; dstack's gateway: "
                              f"{', '.join(targets)}"))
    return out
