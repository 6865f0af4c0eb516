"""The Compute Engine quotas a node counts against: its GPUs per GPU family and region
(on-demand and preemptible apart) and the project's GPUs in all regions; a CPU-only machine
its series' vCPUs. Identifiers as Cloud Quotas names them (quota id and dimensions, what a
`gcp.cloudquota.SQuotaPreference` files), beside the Compute Engine metric preflight reads.
Pure.

Sources: cloud.google.com/compute/resource-usage ("GPU quota": per family and region,
preemptible apart, and GPUS_ALL_REGIONS); cloud.google.com/docs/quotas/configure-dimensions
(the gpu_family dimension of GPUS-PER-GPU-FAMILY-per-project-region)."""

from __future__ import annotations

from gpufleet.traitparts import QuotaAsk, QuotaId

SOURCE = "cloud.google.com/compute/resource-usage"
DIMENSIONS = "cloud.google.com/docs/quotas/configure-dimensions"
# the metric where it is not NVIDIA_<GPU>_GPUS: by (GPU, series) or (GPU, memory GiB)
METRICS = {("A100", 80): "NVIDIA_A100_80GB_GPUS", ("H100", "a3-megagpu"): "NVIDIA_H100_MEGA_GPUS"}


def gpu_metric(ask: QuotaAsk) -> str:
    """The regional quota metric of the node's GPUs ("NVIDIA_H100_GPUS"), or of its vCPUs
    for a CPU-only machine ("N2_CPUS"; "CPUS" for N1); "PREEMPTIBLE_" first for spot."""
    prefix = "PREEMPTIBLE_" if ask.spot else ""
    if ask.gpu and ask.gpus:
        series = "-".join(ask.instance_type.split("-")[:2])
        name = (METRICS.get((ask.gpu, series))
                or METRICS.get((ask.gpu, round(ask.gpu_memory_gib or 0)))
                or f"NVIDIA_{ask.gpu.upper()}_GPUS")
        return prefix + name
    series = ask.instance_type.split("-")[0].upper()
    return prefix + ("CPUS" if series == "N1" else f"{series}_CPUS")


def compute_quotas(ask: QuotaAsk) -> tuple[QuotaId, ...]:
    metric = gpu_metric(ask)
    if not (ask.gpu and ask.gpus):
        ident = f"{metric.replace('_', '-')}-per-project-region"
        return (QuotaId(f"{metric} (vCPUs)", ident, "vCPUs", ask.vcpus, SOURCE, live=metric),)
    family = metric.removeprefix("PREEMPTIBLE_").removesuffix("_GPUS")
    ident = ("PREEMPTIBLE-GPUS-PER-GPU-FAMILY-per-project-region" if ask.spot
             else "GPUS-PER-GPU-FAMILY-per-project-region")
    title = f"{'Preemptible ' if ask.spot else ''}{family} GPUs"
    return (QuotaId(title, ident, "GPUs", ask.gpus, DIMENSIONS,
                    dimensions=(("gpu_family", family),), live=metric),
            QuotaId("GPUs (all regions)", "GPUS-ALL-REGIONS-per-project", "GPUs", ask.gpus,
                    SOURCE, scope="global", live="GPUS_ALL_REGIONS", every_market=True))
