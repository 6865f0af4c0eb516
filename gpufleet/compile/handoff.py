"""A fleet handed to SkyPilot (the backends file's `handoff: skypilot` or `both`): its main
network admits k3s's ports from the fleet's own nodes, and nothing else of them.

`sky ssh up` (SkyPilot 0.14.1, sky/ssh_node_pools/deploy/deploy.py) installs k3s on the
pool's hosts over SSH: the agents join the head's API server at its primary address on
TCP 6443 (`K3S_URL`), and from 3 nodes on the first 3 run embedded etcd (high availability).
k3s's inbound rules (docs.k3s.io, "Requirements", "Inbound Rules for K3s Nodes"): TCP 6443
(the API server), TCP 10250 (kubelet metrics), TCP 2379-2380 (embedded etcd among servers)
and UDP 8472 (flannel's VXLAN, the default backend) between the nodes. SkyPilot reaches the
API server through an SSH tunnel ("we assume only port 22 is accessible"), so no port opens
to anything outside the fleet. Pure."""

from __future__ import annotations

import dataclasses

from gpufleet.compile import naming
from gpufleet.compile.design import FirewallRule, FleetDesign

# the first line of every file `gpufleet export skypilot` writes (it replaces only those)
SKY_MARKER = "# Written by `gpufleet export skypilot`"
K3S_SOURCE = ("docs.k3s.io, 'Inbound Rules for K3s Nodes'; SkyPilot 0.14.1 sky/ssh_node_pools/"
              "deploy/deploy.py (K3S_URL on 6443, embedded etcd from 3 nodes)")
K3S_TCP = ("6443", "10250", "2379-2380")
K3S_UDP = ("8472",)


def takes(handoff: str | None, tool: str) -> bool:
    """Whether ``tool`` ("dstack" or "skypilot") takes a fleet of this hand-off."""
    return (handoff or "dstack") in (tool, "both")


def k3s_rules(fleet: str, own: tuple[str, ...]) -> tuple[FirewallRule, FirewallRule]:
    """The two rules: k3s's TCP ports and flannel's VXLAN, from the fleet's own nodes (its
    group or tag where the cloud has one, its subnets ``own`` where it has not)."""
    return (FirewallRule(naming.child(fleet, "k3s"), "k3s among the fleet's nodes: API server "
                         "6443, kubelet 10250, embedded etcd 2379-2380 (SkyPilot)", "tcp",
                         K3S_TCP, sources=own, from_self=True),
            FirewallRule(naming.child(fleet, "k3s-vxlan"), "k3s's flannel VXLAN among the "
                         "fleet's nodes (SkyPilot)", "udp", K3S_UDP, sources=own,
                         from_self=True))


def with_handoff(plan: FleetDesign, handoff: str) -> FleetDesign:
    """The fleet as the hand-off wants it: for SkyPilot, the k3s rules on its main network
    (a network the fleet only joins, or a cloud without networks, gets none: the plan says
    what carries the traffic there)."""
    if not takes(handoff, "skypilot"):
        return plan
    plan = dataclasses.replace(plan, handoff=handoff)
    if not plan.networks:
        return plan
    main = plan.networks[0]
    if main.existing or main.joins or not main.firewall:
        return plan
    # the nodes' subnets (a public subnet holds the bastion and the NAT, not nodes)
    own = tuple(s.cidr for s in main.subnets if s.cidr and not s.public) or \
        ((main.cidr,) if main.cidr else ())
    rules = main.firewall + k3s_rules(plan.name, own)
    nets = (dataclasses.replace(main, firewall=rules), *plan.networks[1:])
    return dataclasses.replace(plan, networks=nets)


def handoff_text(plan: FleetDesign) -> str:
    """The plan's `handoff:` line: who takes the nodes, and what carries k3s's traffic."""
    who = "SkyPilot and dstack" if plan.handoff == "both" else "SkyPilot"
    head = f"{who} (`gpufleet export skypilot` writes its SSH Node Pool)"
    ports = f"tcp {', '.join(K3S_TCP)}; udp {', '.join(K3S_UDP)}"
    names = {naming.child(plan.name, "k3s"), naming.child(plan.name, "k3s-vxlan")}
    main = plan.networks[0] if plan.networks else None
    if main is not None and names <= {r.name for r in main.firewall}:
        return (f"{head}; k3s ports among the fleet's own nodes only ({ports}): rules "
                f"{', '.join(sorted(names))}")
    if main is None:
        return (f"{head}; no network of the fleet's: k3s ({ports}) runs between the nodes' "
                "private addresses, and gpufleet opens nothing to any other source")
    return (f"{head}; the network is not the fleet's own ({main.existing or main.joins}): "
            f"its owner must admit k3s ({ports}) among the fleet's nodes")
