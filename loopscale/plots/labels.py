"""The axis labels of every figure, as matplotlib mathtext with their units: the loss is a cross-entropy in
nats per token, sizes are parameters (non-embedding), data is tokens, compute is FLOPs."""

from __future__ import annotations

LOSS = r"loss $L$ (nats/token)"
PRED_LOSS = r"predicted $\hat{L}$ (nats/token)"
OBS_LOSS = r"observed $L$ (nats/token)"
N = r"$N$ (non-embedding parameters)"
N_STAR = r"$N^*$ (non-embedding parameters)"
D_STAR = r"$D^*$ (tokens)"
COMPUTE = r"compute $C$ (FLOPs)"
BUDGET = r"compute budget $C$ (FLOPs)"
N_EFF = r"$N_\mathrm{eff} = N_\mathrm{once} + r^{\phi} N_\mathrm{rec}$ (parameters)"
COLLAPSED = r"$L - B D^{-\beta}$ (nats/token)"
LAW_CURVE = r"$E + A N_\mathrm{eff}^{-\alpha}$"
PHI = r"$\phi$"
DELTA_PHI = r"$\Delta\phi$"
RESIDUAL = r"$\log L - \log \hat{L}$"
R = r"$r$ (recurrences)"
K_R = r"$k_r$ ($N_\mathrm{eff} = N_\mathrm{once} + k_r N_\mathrm{rec}$)"
OBJECTIVE = "objective $-$ minimum"
STEP = "optimizer step"
TOKENS = r"tokens seen $D(t)$ (tokens)"


def sci(x: float, digits: int = 3) -> str:
    """x as mathtext m x 10^k with `digits` significant digits (e.g. $4.64\\times10^{17}$)."""
    if x == 0:
        return "$0$"
    mant, exp = f"{x:.{digits - 1}e}".split("e")
    mant = mant.rstrip("0").rstrip(".")
    return f"${mant}\\times10^{{{int(exp)}}}$" if mant != "1" else f"$10^{{{int(exp)}}}$"


def phi_text(phi: float, name: str = r"\hat{\phi}") -> str:
    return f"${name} = {phi:.3f}$"
