"""The resource types and sources the rules match. The pack keeps its own lists, because it
must stand alone (pulumi-policy runs it where only the pack's requirements are installed);
where gpufleet is installed, what the backend plugins declare joins them, so a plugin's
addresses, zones, records, storage, machines and ways in are checked too
(tests/test_policy.py keeps the pack's own lists complete for gpufleet's built-in clouds).
"""

from __future__ import annotations

from collections.abc import Iterable

# --- the pack's own lists (gpufleet's built-in clouds) -------------------------------------
OWN: dict[str, tuple[str, ...]] = {
    # sources port 22 may open to besides ssh_cidrs: Google's IAP TCP forwarding range
    # (cloud.google.com/iap/docs/using-tcp-forwarding)
    "ssh_sources": ("35.235.240.0/20",),
    # what a gateway's component must not build (dstack makes its own at `dstack apply`)
    "gateway_machines": ("aws:ec2/instance:Instance", "aws:ec2/launchTemplate:LaunchTemplate",
                         "aws:lb/loadBalancer:LoadBalancer", "gcp:compute/instance:Instance",
                         "gcp:compute/forwardingRule:ForwardingRule",
                         "azure-native:compute:VirtualMachine",
                         "azure-native:compute:VirtualMachineScaleSet",
                         "pulumi-python:dynamic/lambda:Instance"),
    "addresses": ("aws:ec2/eip:Eip", "gcp:compute/address:Address",
                  "azure-native:network:PublicIPAddress"),
    # azure-native:network:Zone / RecordSet: the provider's older module for the same APIs
    "zones": ("aws:route53/zone:Zone", "gcp:dns/managedZone:ManagedZone",
              "azure-native:network:Zone", "azure-native:dns:Zone"),
    "records": ("aws:route53/record:Record", "gcp:dns/recordSet:RecordSet",
                "azure-native:dns:RecordSet", "azure-native:network:RecordSet"),
    "stored_data": ("aws:fsx/lustreFileSystem:LustreFileSystem", "aws:efs/fileSystem:FileSystem",
                    "gcp:lustre/instance:Instance", "gcp:filestore/instance:Instance",
                    "azure-native:storagecache:AmlFilesystem",
                    "azure-native:storage:StorageAccount", "aws:ebs/volume:Volume",
                    "gcp:compute/disk:Disk", "azure-native:storage:FileShare",
                    "pulumi-python:dynamic/lambda:Filesystem",
                    # buckets (the backends file's `buckets:`), Cloudflare R2's too
                    "aws:s3/bucket:Bucket", "aws:s3/directoryBucket:DirectoryBucket",
                    "gcp:storage/bucket:Bucket", "azure-native:storage:BlobContainer",
                    "cloudflare:index/r2Bucket:R2Bucket"),
}


def declared() -> dict[str, frozenset[str]]:
    """What the installed backend plugins declare, by list; {} without gpufleet."""
    try:
        from gpufleet.backends import all_backends
    except ImportError:  # the pack on its own
        return {}
    out: dict[str, set[str]] = {k: set() for k in OWN}
    for t in all_backends():
        billed = {**{ty: k.billed_as for ty, k in t.resources.items() if k.billed_as},
                  **t.billed}
        for ty, kind in t.resources.items():
            if kind.category == "address":
                out["addresses"].add(ty)
            elif kind.category == "dns" and billed.get(ty) != "dns_zone":
                out["records"].add(ty)
        for ty, what in billed.items():
            if what == "dns_zone":
                out["zones"].add(ty)
            elif what in ("filesystem", "volume"):
                out["stored_data"].add(ty)
            elif what in ("instance", "load_balancer"):
                out["gateway_machines"].add(ty)
        for own in t.own_features:
            if own.way is not None:
                out["ssh_sources"].update(own.way.ssh_from)
    return {k: frozenset(v) for k, v in out.items()}


def _joined(name: str, extra: Iterable[str]) -> tuple[str, ...]:
    own = OWN[name]
    return (*own, *sorted(set(extra) - set(own)))


_DECLARED = declared()
SSH_SOURCES = _joined("ssh_sources", _DECLARED.get("ssh_sources", ()))
GATEWAY_MACHINES = _joined("gateway_machines", _DECLARED.get("gateway_machines", ()))
ADDRESS_TYPES = _joined("addresses", _DECLARED.get("addresses", ()))
ZONE_TYPES = _joined("zones", _DECLARED.get("zones", ()))
RECORD_TYPES = _joined("records", _DECLARED.get("records", ()))
STORED_DATA_TYPES = _joined("stored_data", _DECLARED.get("stored_data", ()))
