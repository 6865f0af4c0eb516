"""The EC2 quotas a node counts against: vCPUs per instance family group, on-demand and spot
apart, per region (Service Quotas, service code `ec2`). Pure.

Codes: docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html ("Running
On-Demand ... instances", "All ... Spot Instance Requests"); the same codes the Service Quotas
console lists for `ec2`."""

from __future__ import annotations

from gpufleet.traitparts import QuotaAsk, QuotaId

SOURCE = "docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html"
# instance family (the type's leading letters) -> (on-demand code, spot code, quota name)
QUOTAS: dict[str, tuple[str, str, str]] = {
    "p": ("L-417A185B", "L-7212CCBC", "P instances"),
    "g": ("L-DB2E81BA", "L-3819A6DF", "G and VT instances"),
    "vt": ("L-DB2E81BA", "L-3819A6DF", "G and VT instances"),
}
STANDARD = ("L-1216C47A", "L-34B43A08", "Standard (A, C, D, H, I, M, R, T, Z) instances")
STANDARD_FAMILIES = frozenset("acdhimrtz")


def family(instance_type: str) -> str:
    """"p5" of "p5.48xlarge" -> "p"; "vt1.3xlarge" -> "vt"."""
    head = instance_type.split(".")[0]
    letters = ""
    for ch in head:
        if not ch.isalpha():
            break
        letters += ch
    return letters.lower()


def quota_code(instance_type: str, spot: bool) -> tuple[str, str] | None:
    """(code, name) of the vCPU quota an instance type counts against, None if unknown."""
    fam = family(instance_type)
    entry = QUOTAS.get(fam) or (STANDARD if fam[:1] in STANDARD_FAMILIES and len(fam) <= 2
                                else None)
    if entry is None:
        return None
    od, sp, name = entry
    return (sp, f"All {name} Spot Instance Requests") if spot else \
        (od, f"Running On-Demand {name}")


def compute_quotas(ask: QuotaAsk) -> tuple[QuotaId, ...]:
    code = quota_code(ask.instance_type, ask.spot)
    if code is None:
        return (QuotaId(f"vCPU quota of the {family(ask.instance_type)} family", "unknown",
                        "vCPUs", ask.vcpus, SOURCE, requestable=False),)
    return (QuotaId(code[1], code[0], "vCPUs", ask.vcpus, SOURCE),)
