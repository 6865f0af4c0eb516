"""How a fleet's nodes are reached, set up and fed from a reservation, in the words the plan
prints."""

from __future__ import annotations

from gpufleet.backends import access_way, traits_of
from gpufleet.compile import (
    FleetDesign,
    fabric_software,
    host_families,
)


def access_text(f: FleetDesign) -> str | None:
    a = f.access
    if a is None:
        return None
    own = access_way(a.method)
    if own is not None:
        key = own.key_text
    elif a.os_login:
        key = "OS Login (IAM)"
    elif a.key_name:
        key = f"existing key pair {a.key_name}"
    else:
        key = "key from the backends file" if a.public_key else \
            "key from the stack config gpufleet:sshPublicKey"
    way = own.shown if own is not None else {
        "public": "public IPs, SSH from ssh_cidrs",
        "none": "none (private nodes, bastion: none)"}.get(a.method, "")
    if a.bastion is not None:
        b = a.bastion
        sources = ", ".join(b.firewall.sources) or "nowhere (ssh_cidrs is empty)"
        way = (f"bastion {b.name} ({b.instance_type}, static address {b.address_name}, SSH "
               f"from {sources}); nodes take SSH only from it")
        if b.server is not None:
            way += (f"; control plane: dstack {b.server.dstack_version} server on the "
                    f"bastion's 127.0.0.1:{b.server.port}, reached through an SSH tunnel "
                    f"from {', '.join(b.server.firewall.sources)}")
    return f"{way}; user {a.user}, {key}"


def host_setup_text(f: FleetDesign) -> str:
    """The boot script that readies the nodes for dstack's SSH fleets, or its absence."""
    h = f.host_setup
    if h is None:
        return "no host setup (`host_setup: none`: the image must carry Docker, the NVIDIA " \
               "Container Toolkit and passwordless sudo for dstack)"
    software = fabric_software(h.fabric)
    return (f"host setup {h.family} ({h.digest}): checks/installs Docker"
            + (", the NVIDIA Container Toolkit, NVIDIA DCGM (its host engine answering)"
               if host_families()[h.family].gpu else "")
            + f", passwordless sudo for {h.user}"
            + (f"; {h.fabric}: {software.what}, {software.how}" if software else ""))


def reservation_text(f: FleetDesign) -> str:
    """What the nodes of a fleet with `reservation` are built to consume."""
    market = getattr(f.options, "market", None)
    use = traits_of(f.backend).reservation_use
    how = use.get(market) or use.get(None, "")
    price = "" if f.price_known else "; the price paid for it is not declared"
    what = f"declared: {f.reservation_declared}" if f.reservation_declared else \
        "not declared in the backends file: zone and type are the offer's"
    return f"{f.reservation} ({how}){price}; {what}"
