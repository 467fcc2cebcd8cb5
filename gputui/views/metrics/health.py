"""The health families: a GPU's error, and what its latest preflight reading says (clock-event
reasons, ECC errors, row remaps, page retirements). A GPU without a preflight reading yet has none of
the latter: unknown is absent, not 0."""

from __future__ import annotations

from ...model import Preflight
from .scrape import GPU_LABELS, Family, Scrape, collector, counter, flag, gpu_gauge, label, put


@collector("health")
def health_families(scrape: Scrape) -> list[Family]:
    error = gpu_gauge(
        "gputui_gpu_error",
        "1 while the GPU reports an error (code: gpu-lost, ...); absent otherwise.",
        "code",
    )
    throttled = gpu_gauge(
        "gputui_gpu_throttled",
        "1 when any clock-event (throttle) reason but idle is active, else 0 (latest preflight).",
    )
    reasons = gpu_gauge(
        "gputui_gpu_throttle_reason",
        "1 for each active clock-event reason (latest preflight); inactive ones are absent.",
        "reason",
    )
    ecc = counter(
        "gputui_gpu_ecc_errors",
        "Volatile ECC errors since the driver loaded, by type (corrected, uncorrected).",
        [*GPU_LABELS, "type"],
    )
    remap_pending = gpu_gauge("gputui_gpu_remap_pending", "1 when a row remap waits for a GPU reset, else 0.")
    remap_failed = gpu_gauge("gputui_gpu_remap_failed", "1 when a row remap failed, else 0.")
    retired_pending = gpu_gauge(
        "gputui_gpu_retired_pages_pending", "1 when a page retirement waits for a reset, else 0."
    )
    for row in scrape.gpus:
        labels = row.labels
        if row.gpu.error:
            error.add_metric([*labels, label(row.gpu.error)], 1.0)
        preflight = row.view.preflight.get(row.gpu.index)
        if preflight is None:
            continue
        _add_throttle(throttled, reasons, labels, preflight)
        put(ecc, [*labels, "corrected"], preflight.ecc_corrected)
        put(ecc, [*labels, "uncorrected"], preflight.ecc_uncorrected)
        flag(remap_pending, labels, preflight.remap_pending)
        flag(remap_failed, labels, preflight.remap_failed)
        flag(retired_pending, labels, preflight.retired_pending)
    return [error, throttled, reasons, ecc, remap_pending, remap_failed, retired_pending]


def _add_throttle(throttled: Family, reasons: Family, labels: tuple[str, ...], preflight: Preflight) -> None:
    """Throttled or not, and each active reason once; nothing where the driver reports no reasons."""
    if preflight.throttle is None:
        return
    throttled.add_metric(labels, 1.0 if preflight.throttle else 0.0)
    for reason in dict.fromkeys(preflight.throttle):
        reasons.add_metric([*labels, label(reason)], 1.0)
