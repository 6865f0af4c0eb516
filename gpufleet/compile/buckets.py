"""The backends file's `buckets:` -> a BucketDesign each: built in its store (S3, Cloud
Storage, Blob Storage or R2) private, encrypted, public access blocked and protected; with the
fleets that mount it and the data they move. A fleet that reads a bucket in another cloud or
region pays for every GB that crosses: the plan warns (V028) and names the cheaper layout, a
regional copy (`cache_of`) where the fleet runs. Pure."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufleet.backends import is_backend, traits_of
from gpufleet.codes import V027, V028, V029
from gpufleet.compile import naming
from gpufleet.compile.design import OMIT_NONE, BucketMountDesign, FleetDesign, ProviderDesign
from gpufleet.diagnostics import Diagnostic, Severity
from gpufleet.input import BucketSpec, Inputs
from gpufleet.objectstores import R2_CLOUD, bucket_service, r2_secret_name


@dataclass(frozen=True, slots=True)
class BucketReader:
    """A fleet that mounts the bucket, and what it moves each month."""

    fleet: str
    backend: str
    region: str
    path: str
    read_only: bool
    read_gb_per_month: float | None = None
    write_gb_per_month: float | None = None
    mounted: bool = False  # its nodes mount it (else a reader the bill counts only)
    # the identity a grant names, where the backends file gives it (gcp: vm_service_account)
    identity: str | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class BucketDesign:
    name: str
    file: str
    cloud: str
    region: str
    klass: str
    provider: ProviderDesign | None  # None: R2 (the program's Cloudflare provider)
    readers: tuple[BucketReader, ...]
    labels: Mapping[str, str]
    zone: str | None = field(default=None, metadata=OMIT_NONE)
    versioning: bool = False
    expire_days: int | None = field(default=None, metadata=OMIT_NONE)
    noncurrent_days: int | None = field(default=None, metadata=OMIT_NONE)
    prefix: str = ""
    cache_of: str | None = field(default=None, metadata=OMIT_NONE)
    expected_gb: float | None = field(default=None, metadata=OMIT_NONE)
    account: str | None = field(default=None, metadata=OMIT_NONE)  # R2 account id


def design_buckets(inputs: Inputs, plans: Sequence[FleetDesign]
                   ) -> tuple[list[BucketDesign], list[Diagnostic]]:
    """Every bucket of the backends file, with its readers; what cannot be mounted, and the
    readers whose every GB crosses clouds or regions."""
    by_name = {p.name: p for p in plans}
    declared = {f.name for f in inputs.fleets}
    out: list[BucketDesign] = []
    diags: list[Diagnostic] = []
    taken: dict[tuple[str, str], str] = {}  # (fleet, path) -> the bucket mounted there
    for b in sorted(inputs.buckets, key=lambda x: (x.cloud, x.name)):
        readers, problems = _readers(b, by_name, declared, taken, inputs)
        diags += problems
        out.append(BucketDesign(
            b.name, b.file, b.cloud, b.region, b.klass, _provider(b, inputs), tuple(readers),
            _labels(b), b.zone, b.versioning, b.expire_days, b.noncurrent_days, b.prefix,
            b.cache_of, b.expected_gb, b.account))
    return out, diags


def _provider(b: BucketSpec, inputs: Inputs) -> ProviderDesign | None:
    if b.cloud == R2_CLOUD or not is_backend(b.cloud):
        return None
    t = traits_of(b.cloud)
    config = inputs.backend(b.cloud)
    scope = config.get(t.scope_key) if config is not None and t.scope_key else None
    return ProviderDesign(b.cloud, naming.provider(b.cloud, scope, b.region), b.region, scope)


def _labels(b: BucketSpec) -> Mapping[str, str]:
    tags = {"managed-by": "gpufleet", "gpufleet-bucket": b.name}
    return traits_of(b.cloud).labels(tags) if is_backend(b.cloud) else tags


def _readers(b: BucketSpec, fleets: Mapping[str, FleetDesign], declared: set[str],
             paths: dict[tuple[str, str], str], inputs: Inputs
             ) -> tuple[list[BucketReader], list[Diagnostic]]:
    out: list[BucketReader] = []
    diags: list[Diagnostic] = []
    for m in b.mounts:
        plan = fleets.get(m.fleet)
        if plan is None:
            if m.fleet not in declared:
                diags.append(b.at(V027, f"bucket '{b.name}' is mounted by fleet '{m.fleet}', "
                                        "which is not in these files",
                                  "name a fleet of these files, or give them all"))
            continue
        if (m.fleet, m.path) in paths:
            diags.append(b.at(V027, f"fleet '{m.fleet}' mounts two buckets at {m.path} "
                                    f"({paths[(m.fleet, m.path)]}, {b.name})",
                              "give each mount its own path"))
            continue
        paths[(m.fleet, m.path)] = b.name
        config = inputs.backend(plan.backend)
        key = traits_of(plan.backend).bucket_identity_key if is_backend(plan.backend) else ""
        identity = config.get(key) if key and config is not None else None
        out.append(BucketReader(m.fleet, plan.backend, plan.region, m.path, m.read_only,
                                m.read_gb_per_month, m.write_gb_per_month,
                                not _unmountable(b, plan, inputs),
                                str(identity) if identity else None))
        crossing = _crossing(b, plan)
        if crossing:
            diags.append(b.at(V028, f"fleet '{m.fleet}' ({plan.backend} {plan.region}) mounts "
                                    f"bucket '{b.name}' ({b.cloud} {b.region}): {crossing}",
                              f"keep a regional copy in {plan.backend} {plan.region} (a bucket "
                              f"with `cache_of: {b.name}`) and mount that, or keep the central "
                              "copy in a store without egress fees (R2)",
                              Severity.WARNING))
    return out, diags


def _crossing(b: BucketSpec, plan: FleetDesign) -> str:
    """What a fleet's reads cross to reach the bucket ("" when they stay in its region or
    come from a store without egress fees)."""
    if b.cloud == R2_CLOUD:
        return ""  # R2 charges no egress (developers.cloudflare.com/r2/pricing/)
    store = bucket_service(b.cloud)
    title = store.title if store is not None else b.cloud
    if b.cloud != plan.backend:
        return f"every GB read leaves {title} for the internet (its egress price)"
    if b.region != plan.region:
        return f"every GB read crosses regions ({title}'s inter-region transfer price)"
    return ""


def attach_bucket_mounts(plans: Sequence[FleetDesign], buckets: Sequence[BucketDesign],
                         inputs: Inputs) -> tuple[list[FleetDesign], list[Diagnostic]]:
    """Each fleet with the buckets its nodes mount: its own cloud's, reached with the nodes'
    identity, and R2's, with S3 credentials the nodes read from their own cloud's secret
    store. Another cloud's bucket is a reader the bill counts but no mount (V029); so is a
    bucket whose cloud needs an identity the nodes lack, or R2 on nodes with no secret
    store."""
    mounts: dict[str, list[BucketMountDesign]] = {}
    diags: list[Diagnostic] = []
    by_name = {p.name: p for p in plans}
    specs = {(s.cloud, s.name): s for s in inputs.buckets}
    for b in buckets:
        store = bucket_service(b.cloud)
        spec = specs[(b.cloud, b.name)]
        for r in b.readers:
            why = _unmountable(b, by_name[r.fleet], inputs)
            if why:
                diags.append(spec.at(V029, f"fleet '{r.fleet}' does not mount bucket "
                                           f"'{b.name}': {why}",
                                     "its reads stay on the bill; mount a bucket of the "
                                     "fleet's own cloud (a `cache_of` copy)", Severity.WARNING))
                continue
            assert store is not None
            mounts.setdefault(r.fleet, []).append(BucketMountDesign(
                b.name, b.cloud, store.client_key, r.path, r.read_only, b.region,
                zonal=b.zone is not None, account=_account(b),
                **_credentials(b, by_name[r.fleet], inputs)))
    return [dataclasses.replace(p, buckets=tuple(mounts[p.name])) if p.name in mounts
            else p for p in plans], diags


def _unmountable(b: BucketSpec | BucketDesign, plan: FleetDesign, inputs: Inputs) -> str:
    """Why a fleet's nodes cannot mount a bucket ("": they can)."""
    cloud, traits = b.cloud, traits_of(plan.backend)
    if cloud == R2_CLOUD and traits.secret_store is None:
        return (f"its nodes have no secret store to read R2's credentials from "
                f"({plan.backend})")
    if cloud == R2_CLOUD and not b.account:
        return "R2's S3 endpoint needs the Cloudflare account: set `account_id` on the bucket"
    if cloud not in (R2_CLOUD, plan.backend):
        return (f"its nodes have no {cloud} identity (only their own cloud's buckets mount "
                "with the nodes' identity)")
    config = inputs.backend(plan.backend)
    needs = traits.bucket_identity_key
    if needs and not (config is not None and config.get(needs)):
        return f"its nodes have no identity to grant: set `{needs}` for {plan.backend}"
    return ""


def _credentials(b: BucketDesign, plan: FleetDesign, inputs: Inputs) -> dict[str, str]:
    """An R2 mount's secret: its name and where the fleet's nodes read it."""
    store = traits_of(plan.backend).secret_store
    if b.cloud != R2_CLOUD or store is None:
        return {}
    config = inputs.backend(plan.backend)

    def get(key: str) -> Any:
        return config.get(key) if config is not None else None

    return {"secret": r2_secret_name(plan.name, b.name),
            "secret_where": store.locate(plan.name, plan.region, get)}


def _account(b: BucketDesign) -> str | None:
    """The Azure storage account of a bucket (the store names it per bucket), or R2's
    Cloudflare account."""
    if b.cloud == R2_CLOUD:
        return b.account
    store = bucket_service(b.cloud)
    return store.account_of(b.name) if store is not None and store.account_of else None
