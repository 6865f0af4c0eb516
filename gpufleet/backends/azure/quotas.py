"""The Azure quotas a node counts against: its VM family's vCPUs and the region's total vCPUs
on demand, the region's one low-priority (Spot) vCPU quota for spot (learn.microsoft.com/
azure/virtual-machines/quotas: "vCPU quotas ... are arranged in two tiers for each
subscription, in each region"; "Spot ... quota ... separate"). The family names are the
Microsoft.Compute usages' `name.value` (the names Microsoft.Quota files increases for);
preflight reads the live SKU's own family, this table plans offline. Pure.

Family names: the usages API's values as Red Hat's OpenShift docs list them for Azure's GPU
series ("Installing a cluster on Azure", tested instance types); NDm A100 v4's as the usages
API answers it."""

from __future__ import annotations

from gpufleet.traitparts import QuotaAsk, QuotaId

SOURCE = "learn.microsoft.com/azure/virtual-machines/quotas"
# size series (the size name's distinctive part) -> the family quota's name
FAMILIES: tuple[tuple[str, str], ...] = (
    ("_H100_v5", "standardNDSH100v5Family"),  # ND96isr_H100_v5 (NC..._H100_v5 below first)
    ("_H200_v5", "standardNDISRH200V5Family"),
    ("amsr_A100_v4", "standardNDAMSv4_A100Family"),
    ("asr_v4", "Standard NDASv4_A100 Family"),
    ("rs_v2", "standardNDSv2Family"),
    ("ads_A100_v4", "StandardNCADSA100v4Family"),
    ("as_T4_v3", "Standard NCASv3_T4 Family"),
    ("_A10_v5", "StandardNVADSA10v5Family"),
    ("s_v3", "standardNCSv3Family"),
)
NC_H100 = "StandardNCadsH100v5Family"


def family(instance_type: str) -> str | None:
    if instance_type.startswith("Standard_NC") and instance_type.endswith("_H100_v5"):
        return NC_H100
    return next((name for tail, name in FAMILIES if instance_type.endswith(tail)), None)


def compute_quotas(ask: QuotaAsk) -> tuple[QuotaId, ...]:
    if ask.spot:
        return (QuotaId("Total Regional Low-priority vCPUs", "lowPriorityCores", "vCPUs",
                        ask.vcpus, SOURCE),)
    fam = family(ask.instance_type)
    first = QuotaId(f"{fam} vCPUs", fam, "vCPUs", ask.vcpus, SOURCE) if fam else \
        QuotaId(f"the {ask.instance_type} family's vCPUs", "unknown", "vCPUs", ask.vcpus,
                SOURCE, requestable=False)
    return (first, QuotaId("Total Regional vCPUs", "cores", "vCPUs", ask.vcpus, SOURCE))
