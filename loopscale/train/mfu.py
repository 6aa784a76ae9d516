"""Model-FLOPs utilisation: achieved FLOP/s over the device's dense bf16 peak.

Two numerators, both counted in loopscale/model/accounting.py and handed over by the run's plan (RunPlan.F,
RunPlan.F_causal): F (full T x T attention, as the scaling law counts compute) and the causal F, which counts
half of the attention score and value matmuls: a causal kernel (flash / memory-efficient SDPA) skips the masked
half, so F overstates the work done (x1.25 at s = 6, T = 2048).

The peak is looked up by the exact CUDA device name: "H100" alone would give a PCIe card (756 TFLOP/s) the
SXM figure (989). An unknown name gives no MFU and one warning.
"""

from __future__ import annotations

import logging

log = logging.getLogger("loopscale.train.mfu")

# Dense (no sparsity) bf16 tensor-core peak per device in FLOP/s, from NVIDIA's datasheets, keyed by the
# name torch.cuda.get_device_name() reports.
PEAK_BF16_FLOPS = {
    "NVIDIA H100 80GB HBM3": 989.4e12,  # H100 SXM5
    "NVIDIA H100 PCIe": 756.5e12,
    "NVIDIA H100 NVL": 835.5e12,
    "NVIDIA H200": 989.4e12,  # H200 SXM
    "NVIDIA H200 NVL": 835.5e12,
    "NVIDIA GH200 480GB": 989.4e12,
    "NVIDIA A100-SXM4-80GB": 312e12,
    "NVIDIA A100-SXM4-40GB": 312e12,
    "NVIDIA A100 80GB PCIe": 312e12,
    "NVIDIA A100-PCIE-40GB": 312e12,
    "NVIDIA L40S": 362.05e12,
    "NVIDIA A10": 125e12,
    "NVIDIA L4": 121e12,
}
_warned: set[str] = set()


def peak_flops(device_name: str) -> float | None:
    """The dense bf16 peak of the device called `device_name` (exact name, case and spacing ignored), else
    None with a warning once per name."""
    wanted = " ".join(device_name.split()).casefold()
    for name, peak in PEAK_BF16_FLOPS.items():
        if name.casefold() == wanted:
            return peak
    if device_name not in _warned:
        _warned.add(device_name)
        log.warning(
            "no bf16 peak known for device %r: MFU is not logged (known: %s)", device_name, ", ".join(PEAK_BF16_FLOPS)
        )
    return None


def mfu(tokens_per_s: float, flops_per_token: float, peak_flops_per_device: float, world: int) -> float:
    """Achieved model FLOP/s over the peak of all `world` devices."""
    return tokens_per_s * flops_per_token / (peak_flops_per_device * world)
