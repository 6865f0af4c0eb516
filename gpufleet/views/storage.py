"""The plan's storage lines: shared filesystems (under their fleet) and dstack volumes."""

from __future__ import annotations

from gpufleet.backends import traits_of
from gpufleet.compile import FilesystemDesign, VolumeDesign, filesystem_services
from gpufleet.offers import HOURS_PER_MONTH
from gpufleet.review import Bill
from gpufleet.views.bill import cost_line


def filesystem_text(fs: FilesystemDesign, bill: Bill | None) -> str:
    """A shared filesystem: service, capacity, throughput, where, who reaches it, its cost."""
    size = f"{fs.capacity_gib:,} GiB" if fs.capacity_gib else "elastic size"
    speed = f" x {fs.throughput} MB/s/TiB = {fs.throughput_mbps:,} MB/s" \
        if fs.throughput_mbps is not None else ""
    where = (f"{fs.region} zone {fs.zone}" if fs.zone.isdigit() else fs.zone) if fs.zone \
        else "the node subnet's zone" if traits_of(fs.backend).shared_filesystem_subnet \
        else fs.region
    item = next((i for i in (bill.items if bill else ()) if i.kind == "filesystem"
                 and f"(filesystem {fs.name})" in i.what), None)
    cost = f"${item.per_hour * HOURS_PER_MONTH:,.2f}/month" if item is not None \
        else "NOT PRICED (set `price` on the filesystem to price it)"
    if item is not None and fs.price is not None:
        cost += f" at ${fs.price[0]:g}/GB-month from {fs.price[1]}"
    service = filesystem_services()[fs.service].title
    if fs.held_by:  # held in another fleet's network
        if fs.subnet is None:  # Azure Files
            way = ("through its storage account, which admits this fleet's node subnet "
                   "(their service endpoint)")
        else:
            way = traits_of(fs.backend).shared_filesystem_way.format(subnet=fs.subnet)
        return (f"{fs.name}: {fs.kind} on {service}, {size}{speed}, held by fleet {fs.held_by}, "
                f"reached {way}; mounted at {fs.mount} by every node at boot; on fleet "
                f"{fs.held_by}'s bill")
    shared = ""
    if fs.peers:
        shared = f"; shared with fleets {', '.join(fs.peers)}" + (
            f" (peered, to its own subnet {fs.subnet})" if fs.subnet else
            " (their node subnets admitted)")
    reach = (f"mounted at {fs.mount} by every node at boot; port {fs.port} from "
             f"{', '.join(fs.admit)} only") if fs.admit else \
        f"mounted at {fs.mount} by the cloud when each node launches"
    return (f"{fs.name}: {fs.kind} on {service}, {size}{speed}, in {where}{shared}; "
            f"{reach}; protected from deletion; {cost}")


def volume_lines(v: VolumeDesign, bill: Bill | None) -> list[str]:
    """A dstack volume: the disk the stack creates, or the existing one it hands over."""
    where = f"{v.backend} {v.zone or v.region}"
    if not v.created:
        return [f"volume {v.name} ({v.file})",
                f"  existing: {v.volume_id} in {where}; nothing is created, `export dstack` "
                "hands it to dstack as an external volume"]
    cost = cost_line(bill) if bill is not None else "not priced"
    return [f"volume {v.name} ({v.file})",
            f"  disk:     {v.size_gib} GiB {v.disk_type} in {where}, encrypted, protected from "
            "deletion (single-attach: one node at a time)",
            *([f"  zone:     {v.zone_note}"] if v.zone_note else []),
            f"  cost:     {cost}"]
