"""gcp: what the backend can do and the tables gpufleet keeps for it. Pure data."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from gpufleet.backends.gcp import buckets as _buckets
from gpufleet.backends.gcp import names as _names
from gpufleet.backends.gcp import quotas as _quotas
from gpufleet.codes import B012, B019, C012, C015, C026, G005, G015, G016, V006, V020
from gpufleet.traits import ALL_FEATURES as _ALL
from gpufleet.traits import (
    AccessWay,
    BackendTraits,
    CapacityCode,
    FabricUnlock,
    Feature,
    FilesystemService,
    ImageFamily,
    LustreTier,
    Machine,
    NfsSizes,
    OwnFeature,
    ResourceKind,
    ZoneModel,
)
from gpufleet.traits import kinds as _kinds

_UBUNTU = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"
_POOL_DOCS = "cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-availability"
_LABEL_BAD = re.compile(r"[^a-z0-9_-]")


def labels(tags: Mapping[str, str]) -> dict[str, str]:
    """GCP labels: lower case, [a-z0-9_-], keys start with a letter, at most 63 chars, 64 labels
    (cloud.google.com/compute/docs/labeling-resources#requirements)."""
    out: dict[str, str] = {}
    for k, v in tags.items():
        key = _LABEL_BAD.sub("_", k.lower())[:63]
        if not key or not key[0].isalpha():
            key = ("t" + key)[:63]
        out[key] = _LABEL_BAD.sub("_", str(v).lower())[:63]
    return dict(sorted(out.items())[:64])


def filestore_step(gib: int) -> int:
    """Filestore zonal's scaling unit: 256 GiB from 1 to 9.75 TiB, 2.5 TiB from 10 TiB
    (cloud.google.com/filestore/docs/service-tiers-zonal)."""
    return 256 if gib < 10 * 1024 else 2560


def _family(instance_type: str) -> str:
    """e2-standard-4 -> e2-standard; a name without a size is its own family."""
    head, _, size = instance_type.rpartition("-")
    return head if head and size.isdigit() else instance_type


BASTION = Machine("e2-micro", _UBUNTU, 10, "pd-balanced")
# dstack's gateway instance (dstack 0.22.5: core/backends/gcp/compute.py,
# create_gateway_replica: e2-medium, a 10 GB boot disk)
GATEWAY = Machine("e2-medium", _UBUNTU, 10, "pd-balanced")

# Google's IAP TCP forwarding range (cloud.google.com/iap/docs/using-tcp-forwarding)
IAP_RANGE = "35.235.240.0/20"

# What only Google Cloud's own services give: Certificate Manager certificates on a gateway's
# load balancer (dstack's text refusing them elsewhere), and Identity-Aware Proxy TCP
# forwarding with OS Login into private nodes.
OWN_FEATURES = (
    OwnFeature("gcp-cm", "certificate", "Certificate Manager certificates (gcp-cm)",
               "gcp-cm certificate type is supported for gcp backend only"),
    OwnFeature("iap", "access", "Identity-Aware Proxy access",
               "Identity-Aware Proxy is a Google Cloud service",
               AccessWay(f"Identity-Aware Proxy (SSH from {IAP_RANGE} only)",
                         "through Identity-Aware Proxy with OS Login (`gcloud compute ssh "
                         "--tunnel-through-iap`)", "OS Login (IAM)", (IAP_RANGE,),
                         ("ssh-iap", f"SSH through Identity-Aware Proxy ({IAP_RANGE})"),
                         os_login=True,
                         # cloud.google.com/iap/docs/using-tcp-forwarding ("Tunneling SSH
                         # connections": gcloud compute start-iap-tunnel --listen-on-stdin)
                         ssh_proxy="gcloud compute start-iap-tunnel %h 22 --listen-on-stdin "
                                   "--project={scope} --zone={zone}")),
)

TRAITS = BackendTraits(
    "gcp", _ALL - {Feature.CAPACITY_BLOCKS, Feature.SHARED_FILESYSTEMS},
    MappingProxyType({
        Feature.SHARED_FILESYSTEMS: "Filestore and Managed Lustre are reached through a "
                                    "peering of one fleet's network, which a second network "
                                    "cannot use (Google: only through Network Connectivity "
                                    "Center, which gpufleet does not build)",
        Feature.CAPACITY_BLOCKS: "Capacity Blocks for ML are an EC2 purchase option"}),
    re.compile(r"[a-z]+-[a-z]+[0-9]{1,2}"), "us-central1", "ubuntu", zones=ZoneModel.PER_ZONE,
    zone_pattern=re.compile(r"^([a-z]+-[a-z]+\d+)-[a-z]$"),
    own_features=OWN_FEATURES,
    code_notes=MappingProxyType({
        G005: "gcp-cm (Certificate Manager)",
        G015: "a Certificate Manager certificate's resource name",
        G016: "an ALB with gcp-cm or no certificate; gcp-cm needs the ALB",
        C012: "Identity-Aware Proxy (`access: {iap: true}`)",
        C026: "a fleet holding a filesystem (reached through its network's peering)",
        V006: "no shared filesystems (a peering serves one network)",
        V020: "Managed Lustre (one private services access connection per network)",
        B012: "specific or calendar", B019: "`project_id`",
        C015: "A3 High (GPUDirect-TCPX) without `tcpx_image`, and A3 Edge"}),
    node_types=("gcp:compute/instance:Instance",),
    billed=MappingProxyType({
        "gcp:compute/instance:Instance": "instance",
        "gcp:compute/address:Address": "address",  # EXTERNAL ones; internal ones are free
        "gcp:compute/routerNat:RouterNat": "nat",
        "gcp:compute/forwardingRule:ForwardingRule": "load_balancer",
        "gcp:dns/managedZone:ManagedZone": "dns_zone",
        "gcp:compute/disk:Disk": "volume",  # dstack volumes
        "gcp:lustre/instance:Instance": "filesystem",
        "gcp:filestore/instance:Instance": "filesystem"}),
    resources=MappingProxyType({
        "gcp:compute/network:Network": ResourceKind(
            frozenset({"autoCreateSubnetworks", "networkProfile", "name", "project"}),
            "network"),
        "gcp:compute/subnetwork:Subnetwork": ResourceKind(
            frozenset({"ipCidrRange", "network", "region", "name", "project"}), "network"),
        "gcp:compute/instance:Instance": ResourceKind(
            frozenset({"zone", "bootDisk", "networkInterfaces", "reservationAffinity", "name",
                       "project"}), "instance"),
        "gcp:compute/firewall:Firewall": ResourceKind(
            frozenset({"network", "direction", "name", "project"})),
        "gcp:compute/resourcePolicy:ResourcePolicy": ResourceKind(
            frozenset({"groupPlacementPolicy", "region", "name", "project"})),
        "gcp:compute/address:Address": ResourceKind(
            frozenset({"addressType", "region", "subnetwork", "name"}), "address"),
        "gcp:dns/recordSet:RecordSet": ResourceKind(
            frozenset({"name", "type", "managedZone", "project"}), "dns"),
        "gcp:compute/router:Router": ResourceKind(frozenset({"network", "region", "name"})),
        "gcp:compute/routerNat:RouterNat": ResourceKind(frozenset({"router", "region", "name"})),
        "gcp:lustre/instance:Instance": ResourceKind(
            frozenset({"instanceId", "location", "network", "filesystem",
                       "perUnitStorageThroughput", "project"}), "storage"),
        "gcp:filestore/instance:Instance": ResourceKind(
            frozenset({"name", "location", "tier", "networks", "project"}), "storage"),
        "gcp:compute/disk:Disk": ResourceKind(
            frozenset({"zone", "name", "image", "snapshot", "project"}), "storage"),
        **_kinds(dns=("gcp:dns/managedZone:ManagedZone",)),
    }),
    bastion=BASTION,
    gateway=GATEWAY,
    server_size="e2-medium", address_pool="10.0.0.0/8", scope_key="project_id",
    gpu_image=ImageFamily(
        "gcp-ubuntu-accelerator", True, "NVIDIA driver 570 (Ubuntu accelerator image); no "
        "Docker, no Container Toolkit"), volume_disk_type="pd-balanced",
    # Managed Lustre's tier table (cloud.google.com/managed-lustre/docs/create-instance)
    lustre_tiers=MappingProxyType({
        125: LustreTier(72000, 12_240_000),
        250: LustreTier(36000, 40_032_000, 6_120_000, 288_000),
        500: LustreTier(18000, 20_016_000, 3_060_000, 144_000),
        1000: LustreTier(9000, 10_008_000, 1_530_000, 72_000)}),
    # Filestore zonal (cloud.google.com/filestore/docs/service-tiers-zonal)
    default_lustre_throughput=250,
    nfs_sizes=NfsSizes("Filestore zonal", 1024, 102400, filestore_step),
    filesystems=MappingProxyType({
        "lustre": FilesystemService("managed-lustre", "Managed Lustre", True, needs_zone=True,
                                    own_range=True, range_prefix=20, one_per_fleet=True,
                                    mount_options="defaults,_netdev,noatime,flock"),
        "nfs": FilesystemService("filestore", "Filestore (zonal)", True, needs_zone=True,
                                 mount_options="defaults,_netdev,hard,timeo=600,retrans=3")}),
    lb_certificate="gcp-cm",
    lb_certificate_hint=", or `{type: gcp-cm, name: <name>}` with `load_balancer: {type: alb}` "
                        "(GCP Certificate Manager)",
    load_balancer_title="regional {scope} Application Load Balancer {name}",
    zone_walk_text="the closest Cloud DNS zone that contains the domain, found at `pulumi up` "
                   "(offline: {zone})",
    reservation_use=MappingProxyType({
        None: "SPECIFIC reservation affinity, STANDARD provisioning; no placement policy of "
              "gpufleet's (the reservation's placement holds)"}),
    nat_priced_per_vm=True, spot_addresses_priced=True,
    address_kinds=MappingProxyType({True: "static external address",
                                   False: "static internal address"}),
    pulumi_package="gcp",
    reservation_kinds=("specific", "calendar"),
    capacity_errors=(
        CapacityCode("gcp", "ZONE_RESOURCE_POOL_EXHAUSTED", _POOL_DOCS),
        CapacityCode("gcp", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", _POOL_DOCS),
        CapacityCode("gcp", "does not have enough resources available to fulfill the request",
                     f"{_POOL_DOCS} (the message the Terraform-bridged provider prints for "
                     "ZONE_RESOURCE_POOL_EXHAUSTED)"),
        CapacityCode("gcp", "insufficientCapacity",
                     "cloud.google.com/compute/docs/troubleshooting/"
                     "troubleshooting-bulk-vm-creation"),
    ),
    # shared-core E2 takes no compact placement policy (cloud.google.com/compute/docs/
    # instances/use-compact-placement-policies#restrictions)
    no_cluster_families=("e2-",),
    # GPUDirect-TCPX (cloud-recipes.md 2.3): A3 High/Edge clusters. Google documents TCPX on
    # VMs with Container-Optimized OS (cloud.google.com/compute/docs/gpus/gpudirect; dstack
    # 0.22.5 boots cos-121-lts for them), and on Ubuntu with Google's TCPX kernel
    # (linux-gcp-tcpx), whose private PPA Google's staff give access to (Cluster Toolkit
    # examples/machine-learning/a3-highgpu-8g: README "Before starting", a3high-slurm-
    # blueprint.yaml builds the image). COS keeps / read-only (only /etc is writable and
    # executable), while dstack 0.22.5's SSH-fleet deploy writes dstack-shim to
    # /usr/local/bin (core/backends/base/compute.py, get_dstack_shim_binary_path), so COS
    # nodes cannot become an SSH fleet; an Ubuntu image with the TCPX kernel can, and gpufleet
    # builds on it when the backends file names one (`tcpx_image`). Google publishes the
    # GPU-to-NIC topology its receive path needs on Ubuntu for a3-highgpu-8g only (the same
    # blueprint's gpu_rxq_configuration.textproto), so A3 Edge stays refused. A3 Mega's
    # TCPXO runs on the Ubuntu image gpufleet boots (compile/hostsetup.py).
    unbuildable_cluster_fabrics=MappingProxyType({
        "gpudirect-tcpx": "GPUDirect-TCPX, whose receive path needs Container-Optimized OS "
                          "(where dstack 0.22.5's SSH fleets cannot deploy: its read-only "
                          "/usr/local/bin) or Google's TCPX kernel (linux-gcp-tcpx, from a "
                          "PPA Google's staff give access to; its Ubuntu GPU-NIC topology is "
                          "published for a3-highgpu-8g only)"}),
    cluster_fabric_unlocks=MappingProxyType({
        "gpudirect-tcpx": FabricUnlock(
            "tcpx_image", ("a3-highgpu-8g",),
            "an Ubuntu image booting Google's TCPX kernel, such as the one Cluster Toolkit's "
            "a3high-slurm blueprint builds (examples/machine-learning/a3-highgpu-8g)")}),
    # the GPU network bandwidth of each type (cloud-recipes.md 2.2-2.4); the A3 Mega NCCL
    # figures are NVIDIA AICR's "GKE TCPXO networking"; none is published for A3 High or Edge
    cluster_fabric_loss=MappingProxyType({
        "a3-highgpu-8g": "a fraction of the 1 Tbps its 4 GPU NICs carry with GPUDirect-TCPX",
        "a3-edgegpu-8g": "a fraction of the 0.8 Tbps its 4 GPU NICs carry with GPUDirect-TCPX"}),
    cluster_fabric_alternative=", or pick A3 Mega (TCPXO) or A3 Ultra / A4 (RoCE)",
    family=_family, labels=labels,
    name_rules=_names.NAME_RULES, name_budgets=_names.NAME_BUDGETS,
    network_quotas=_names.NETWORK_QUOTAS,
    buckets=_buckets.BUCKETS, bucket_identity_key="vm_service_account",
    secret_store=_buckets.SECRETS,
    compute_quotas=_quotas.compute_quotas, quota_scope="project",
    quota_lag=("hours to days: Google reviews GPU quota increases "
               "(cloud.google.com/docs/quotas/help/request_increase); meanwhile keep the fleet "
               "at `nodes: 0`, or plan it on another offer"),
    offline_run_cost=36,  # pulumi-gcp's compute modules, 2026-11-28
)
