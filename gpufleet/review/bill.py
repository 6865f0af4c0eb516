"""The whole bill of a plan: every resource that bills by the hour or the month, priced.

Per fleet the nodes (the offer), the network (bastion VM and its address, NAT gateways and
their addresses, node addresses) and the storage (node and bastion disks); per bucket its
storage and the data its fleets move (each GB priced by its path: within one region nothing,
across regions of one cloud its inter-region price, out of a cloud its internet egress price
- a read pays the bucket's cloud, a write the fleet's - R2 nothing); per gateway what
dstack creates for it (instances, disks, addresses, load balancer) and what the stack builds
(NAT, DNS zone, kept addresses). Instances of every role are priced from the
catalog (the bundled one when the catalog in use lacks a small type); the rest from the
price table (``gpufleet.offers.prices``). What has no price is named, never counted as $0.
Pure.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpufleet.backends import all_backends, traits_of
from gpufleet.compile import (
    PLANNERS,
    BucketDesign,
    BucketReader,
    FleetDesign,
    GatewayDesign,
    VolumeDesign,
)
from gpufleet.objectstores import bucket_service
from gpufleet.offers import Catalog, PriceTable, load_bundled, on_demand_price
from gpufleet.traits import Machine

PARTS = ("nodes", "network", "storage")


def billed_as(resource_type: str) -> str | None:
    """What the bill lists a resource type as (instance, address, nat, load_balancer,
    dns_zone, volume, filesystem), from the backend's traits; None: free. A test runs the
    programs and checks that every billable resource has its line in its owner's bill."""
    return _billed().get(resource_type)


@functools.cache
def _billed() -> dict[str, str]:
    out: dict[str, str] = {}
    for t in all_backends():
        out.update(t.billed)
        out.update({typ: k.billed_as for typ, k in t.resources.items() if k.billed_as})
    return out


@dataclass(frozen=True, slots=True)
class Item:
    part: str  # "nodes", "network" or "storage"
    # what the line is, for the cross-check against the resources the program creates:
    # instance, address, nat, load_balancer, dns_zone, disk, filesystem, or implicit_address
    # (a billed public address that is no resource of its own: auto-assigned, or Cloud NAT's)
    kind: str
    what: str  # "4 x p5.48xlarge on-demand", "NAT gateway h100-train-vpc"
    count: int
    per_hour: float  # the line's total
    source: str
    # made by dstack at `dstack apply` (a gateway's instances, addresses, load balancer),
    # billed to the same account but no resource of the stack
    by_dstack: bool = False


@dataclass(frozen=True, slots=True)
class Bill:
    owner: str
    kind: str  # "fleet", "gateway", "volume" or "bucket"
    items: tuple[Item, ...]
    unpriced: tuple[str, ...] = ()  # what exists but has no price here

    def part(self, part: str) -> float:
        return sum(i.per_hour for i in self.items if i.part == part)

    @property
    def total(self) -> float:
        return sum(i.per_hour for i in self.items)

    @property
    def overhead(self) -> float:
        """Everything beside the node instances, per hour."""
        return self.total - self.part("nodes")


class _Biller:
    def __init__(self, prices: PriceTable, catalog: Catalog | None) -> None:
        self.prices = prices
        self.catalog = catalog
        self.items: list[Item] = []
        self.unpriced: list[str] = []
        self.by_dstack = False  # the lines added now are what dstack creates

    def add(self, part: str, kind: str, what: str, count: int, unit: float | None,
            source: str) -> None:
        if count <= 0:
            return
        if unit is None:
            self.unpriced.append(f"{what} (no price: {source})")
            return
        self.items.append(Item(part, kind, what, count, unit * count, source,
                               self.by_dstack))

    def instance(self, part: str, backend: str, region: str, itype: str, count: int,
                 role: str) -> None:
        # the catalog in use first; the bundled one (read only when needed) has the small
        # types a downloaded catalog may lack
        cat = self.catalog
        price = on_demand_price(cat, backend, region, itype)
        if price is None:
            cat = load_bundled()
            price = on_demand_price(cat, backend, region, itype)
        source = cat.describe() if price is not None and cat is not None else \
            f"{itype} in {region} is not in the catalog"
        self.add(part, "instance", f"{count} x {itype} ({role}, on-demand)", count, price,
                 source)

    def fixed(self, part: str, kind: str, backend: str, key: str, what: str,
              count: int = 1) -> None:
        p = self.prices.item(backend, key)
        self.add(part, kind, what, count, None if p is None else p.per_hour,
                 f"{self.prices.describe()}: no {key} price for {backend}" if p is None
                 else p.source)

    def disk(self, part: str, backend: str, dtype: str, gib: int, count: int,
             role: str) -> None:
        p = self.prices.disk(backend, dtype, gib)
        self.add(part, "disk", f"{count} x {gib} GiB {dtype} ({role})", count,
                 None if p is None else p.per_hour,
                 f"{self.prices.describe()}: no {dtype} price" if p is None else p.source)

    def nat(self, part: str, backend: str, name: str, vms: int) -> None:
        """One NAT gateway and the public address it sends from."""
        if traits_of(backend).nat_priced_per_vm:
            raw = self.prices.raw(backend, "nat_gateway")
            if raw:
                cap = int(raw["max_vms"])
                hour = float(raw["above_max_per_hour"]) if vms > cap else \
                    float(raw["per_vm_hour"]) * vms
                self.add(part, "nat", f"Cloud NAT {name} ({vms} VM(s))", 1, hour,
                         str(raw["source"]))
            else:
                self.add(part, "nat", f"Cloud NAT {name}", 1, None, "no price")
            self.fixed(part, "implicit_address", backend, "nat_address",
                       f"NAT address of {name} (allocated by Cloud NAT)")
            return
        self.fixed(part, "nat", backend, "nat_gateway", f"NAT gateway {name}")
        self.fixed(part, "address", backend, "public_ipv4", f"NAT address of {name}")

    def bill(self, owner: str, kind: str) -> Bill:
        return Bill(owner, kind, tuple(self.items), tuple(self.unpriced))


def fleet_bill(f: FleetDesign, prices: PriceTable, catalog: Catalog | None = None) -> Bill:
    b = _Biller(prices, catalog)
    spot = "spot" if f.spot else "on-demand"
    if f.nodes and not f.price_known:
        b.add("nodes", "instance", f"{f.nodes} x {f.instance_type} (reservation "
              f"{f.reservation})", f.nodes, None, "reserved, price not declared")
    elif f.nodes:
        b.items.append(Item("nodes", "instance", f"{f.nodes} x {f.instance_type} ({spot})",
                            f.nodes, f.nodes * f.price_per_hour, "the fleet's offer"))
    b.disk("storage", f.backend, f.disk_type, f.disk_gib, f.nodes, "node boot disk")
    per_node_ips = sum(1 for n in f.nics if n.public_ip) or (1 if f.public_ip else 0)
    # AWS multi-NIC nodes get an Elastic IP each, Azure VMs (no scale set) a public IP
    # resource; the others' addresses are assigned with the instance
    kind = "address" if PLANNERS[f.backend].billed_addresses(f) else "implicit_address"
    if traits_of(f.backend).spot_addresses_priced and f.spot:
        raw = prices.raw(f.backend, "public_ipv4")
        b.add("network", kind, f"{f.nodes * per_node_ips} node address(es)",
              f.nodes * per_node_ips, raw.get("spot_per_hour"), str(raw.get("source", "")))
    else:
        b.fixed("network", kind, f.backend, "public_ipv4",
                f"{f.nodes * per_node_ips} node address(es)", f.nodes * per_node_ips)
    if f.access is not None and f.access.bastion is not None:
        bastion = f.access.bastion
        b.instance("network", f.backend, f.region, bastion.instance_type, 1, "bastion")
        disk = _machine(f.backend, "bastion")
        b.disk("storage", f.backend, disk.disk_type, disk.disk_gib, 1, "bastion boot disk")
        b.fixed("network", "address", f.backend, "public_ipv4",
                f"bastion address {bastion.address_name}")
    for net in f.networks:
        if net.nat:
            b.nat("network", f.backend, net.name, f.nodes)
    for fs in f.filesystems:
        if fs.held_by:  # another fleet's: on that fleet's bill
            continue
        key = f"{fs.service}-{fs.throughput}" if fs.throughput else fs.service
        p = prices.filesystem(f.backend, key, fs.capacity_gib or 0, fs.price)
        why = (f"{prices.describe()} has no {key} price; the filesystem's `price` gives one"
               if p is None else
               "elastic size: set capacity_gib to price it" if not fs.capacity_gib else "")
        b.add("storage", "filesystem", f"{fs.capacity_gib or '?'} GiB {fs.service} "
              f"(filesystem {fs.name})", 1, None if why or p is None else p.per_hour,
              why or (p.source if p else ""))
    return b.bill(f.name, "fleet")



def _machine(backend: str, role: str) -> Machine:
    """The bastion or gateway machine a backend declares (its boot disk is billed)."""
    machine: Machine | None = getattr(traits_of(backend), role)
    assert machine is not None, f"{backend} plans a {role} but declares no {role} machine"
    return machine


def gateway_bill(g: GatewayDesign, prices: PriceTable, catalog: Catalog | None = None) -> Bill:
    """What the gateway costs once dstack runs it: dstack's instances, their disks and
    addresses and its load balancer (created at `dstack apply`, billed to the same account),
    and what the stack builds for it (a NAT, a zone, addresses kept from gpufleet's own
    gateway VMs)."""
    b = _Biller(prices, catalog)
    b.by_dstack = True
    b.instance("nodes", g.backend, g.region, g.instance_type, g.replicas,
               "dstack's gateway instance")
    disk = _machine(g.backend, "gateway")
    b.disk("storage", g.backend, disk.disk_type, disk.disk_gib, g.replicas,
           "dstack's gateway boot disk")
    if g.public:
        b.fixed("network", "address", g.backend, "public_ipv4",
                "dstack's gateway address(es)", g.replicas)
    if g.load_balancer:
        b.fixed("network", "load_balancer", g.backend, "load_balancer",
                "dstack's load balancer")
    b.by_dstack = False
    if g.old_addresses:
        b.fixed("network", "address", g.backend, "public_ipv4",
                f"kept address(es) {', '.join(g.old_addresses)}", len(g.old_addresses))
    if g.network.nat and not g.network.existing:
        b.nat("network", g.backend, g.network.name, g.replicas)
    if g.record is not None and g.record.create_zone:
        b.fixed("network", "dns_zone", g.backend, "dns_zone", f"DNS zone {g.record.zone}")
    return b.bill(g.name, "gateway")


def volume_bill(v: VolumeDesign, prices: PriceTable) -> Bill:
    """A volume the stack creates: its disk (an existing one is not the stack's to bill)."""
    b = _Biller(prices, None)
    if v.created and v.size_gib is not None:
        p = prices.disk(v.backend, v.disk_type, v.size_gib)
        b.add("storage", "volume", f"{v.size_gib} GiB {v.disk_type} (volume {v.name})", 1,
              None if p is None else p.per_hour,
              f"{prices.describe()}: no {v.disk_type} price" if p is None else p.source)
    return b.bill(v.name, "volume")


def overhead_rates(plan: FleetDesign | GatewayDesign, prices: PriceTable,
                   catalog: Catalog | None = None) -> tuple[float, float]:
    """(fixed, per node) USD/h beside the instances: what a fleet runs whatever its node count
    (bastion, NAT, addresses), and what each node adds (its disk, its address, its NAT
    share). A gateway's whole bill is fixed."""
    if isinstance(plan, GatewayDesign):
        return gateway_bill(plan, prices, catalog).total, 0.0
    none = fleet_bill(dataclasses.replace(plan, nodes=0), prices, catalog).overhead
    one = fleet_bill(dataclasses.replace(plan, nodes=1), prices, catalog).overhead
    return none, max(0.0, one - none)


def bills(fleets: Sequence[FleetDesign], gateways: Sequence[GatewayDesign], prices: PriceTable,
          catalog: Catalog | None = None, volumes: Sequence[VolumeDesign] = (),
          buckets: Sequence[BucketDesign] = ()) -> dict[str, Bill]:
    """Every bill by owner: fleets and gateways by name, volumes as `volume:NAME` and buckets
    as `bucket:NAME` (their names are namespaces of their own)."""
    out = {f.name: fleet_bill(f, prices, catalog) for f in fleets}
    out.update({g.name: gateway_bill(g, prices, catalog) for g in gateways})
    out.update({f"volume:{v.name}": volume_bill(v, prices) for v in volumes if v.created})
    out.update({f"bucket:{b.name}": bucket_bill(b, prices) for b in buckets})
    return out


def transfer_price(prices: PriceTable, payer: str, same_cloud: bool, same_region: bool
                   ) -> tuple[float | None, str]:
    """USD per GB that ``payer`` charges for a GB on this path, and the source."""
    t = prices.raw(payer, "transfer")
    if not t:
        return None, f"{prices.describe()}: no transfer prices for {payer}"
    key = "same_region_per_gb" if same_cloud and same_region else \
        "inter_region_per_gb" if same_cloud else "internet_per_gb"
    return float(t[key]), str(t["source"])


def _path(b: BucketDesign, r: BucketReader) -> str:
    if r.backend == b.cloud:
        return "in one region" if r.region == b.region else \
            f"{b.region} -> {r.region}"
    return f"{b.cloud} {b.region} <-> {r.backend} {r.region}"


def bucket_bill(b: BucketDesign, prices: PriceTable) -> Bill:
    items: list[Item] = []
    unpriced: list[str] = []
    hours = prices.hours_per_month
    klass = (prices.raw(b.cloud, "buckets") or {}).get(b.klass)
    if b.expected_gb is None:
        unpriced.append(f"storage of bucket {b.name} (declare `expected_gb`)")
    elif not klass:
        unpriced.append(f"storage of bucket {b.name} (no {b.klass} price for {b.cloud})")
    else:
        items.append(Item("storage", "bucket", f"{b.expected_gb:,.0f} GB {b.klass} (bucket "
                          f"{b.name})", 1, b.expected_gb * float(klass["per_gb_month"]) / hours,
                          str(klass["source"])))
    for r in b.readers:
        same_cloud, same_region = r.backend == b.cloud, r.region == b.region
        for gb, payer, verb in ((r.read_gb_per_month, b.cloud, "read by"),
                                (r.write_gb_per_month, r.backend, "written from")):
            if not gb:
                continue
            price, source = transfer_price(prices, payer, same_cloud, same_region)
            what = f"{gb:,.0f} GB/month {verb} {r.fleet} ({_path(b, r)})"
            if price is None:
                unpriced.append(f"{what} ({source})")
                continue
            items.append(Item("network", "transfer", what, 1, gb * price / hours, source))
            item, why = _requests(b, r, gb, verb == "written from", prices)
            items += [item] if item is not None else []
            unpriced += [why] if why is not None else []
    return Bill(b.name, "bucket", tuple(items), tuple(unpriced))


def _requests(b: BucketDesign, r: BucketReader, gb: float, write: bool, prices: PriceTable
              ) -> tuple[Item | None, str | None]:
    """The requests a mount makes moving ``gb`` a month: one per part of its client's
    request size (a floor: a small file is one request or more of its own), at the store's
    price per 1,000; or why they are not priced."""
    store = bucket_service(b.cloud)
    verb = "written" if write else "read"
    mib = store.request_mib[1 if write else 0] if store is not None and r.mounted else None
    if store is None or mib is None:
        how = "not through a mount gpufleet builds" if store is None or not r.mounted else \
            f"{store.client} makes no request per fixed part"
        return None, f"requests of the {gb:,.0f} GB/month {verb} by {r.fleet} ({how})"
    count = gb * 1024 / mib
    price = (prices.raw(b.cloud, "bucket_requests") or {}).get(b.klass)
    what = (f"~{count:,.0f} {'PUT' if write else 'GET'} requests/month: the GB {verb} by "
            f"{r.fleet}, {mib} MiB a request (a floor: a small file is one or more)")
    if not price:
        return None, f"{what} (no {b.klass} request price for {b.cloud} in the table)"
    per = float(price["write_per_1000" if write else "read_per_1000"])
    return Item("storage", "requests", what, 1, count / 1000 * per / prices.hours_per_month,
                f"{price['source']}; {store.request_source}"), None


def total(all_bills: Mapping[str, Bill]) -> float:
    return sum(b.total for b in all_bills.values())
