"""The model family a looped fit was made for, as exact polynomials in the width: what `loopscale advise`
searches (docs/design.md, "Advice").

On an iso-depth family the layer plan (p, k, c) is fixed per r and only the width d varies, so every count
of `loopscale.model.accounting` is a quadratic in d: N_once(d, r), N_rec(d, r) (blocks 12 d^2 + 2 d, the injection
2 d^2, norms 3 d), the training FLOPs per token F(d, r) of the published convention (6 x the matmul
parameters per pass + the LM head 6 V d + attention 12 L_eff T d + the norm gains) and the forward FLOPs
per token F_infer(d, r) = F / 3 of the same model trained with full backprop (what serving one token costs,
the 2 N_active of the lifetime cost). A family is those four polynomials per r, read off the accounting by
exact interpolation at three valid widths and checked at a fourth (a family whose counts are not quadratic,
e.g. SwiGLU's rounded hidden width, is refused), plus the valid widths (multiples of the head dim) and the
tokens per optimizer step.

Families: `paper` (experiment=isodepth: L_eff = 20, r = 1 a plain 0-20-0 stack), `cpu`
(experiment=isodepth_cpu), `demo` (experiment=isodepth_cpu_demo, what `loopscale demo` fits), `custom` (any
experiment plus Hydra overrides), and `power_law_family` (N_unique = c d^2 with a fixed share run once and
F = 6 (N_once + r N_rec): the closed-form family the tests check the optimiser against). Which family a fit
was made for is `loopscale.analysis.advise.matching`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from loopscale.config.dirs import compose
from loopscale.config.model import ModelConfig
from loopscale.errors import InputError
from loopscale.model.accounting import flops_per_token, inference_flops_per_token, param_counts

QUANTITIES = ("N_once", "N_rec", "F", "F_infer")  # the polynomials; N_unique = N_once + N_rec
FAMILY_EXPERIMENTS = {"paper": "isodepth", "demo": "isodepth_cpu_demo", "cpu": "isodepth_cpu"}
MAX_WIDTH_STEPS = 2**14  # the search ceiling, in width steps


@dataclass(frozen=True)
class Family:
    """Quadratics in the width per r: polys[r][quantity] = (c0, c1, c2), value = c0 + c1 d + c2 d^2.

    width_step: valid widths are its multiples (the head dim); batch_tokens: tokens per optimizer step;
    size_unit: the published grid's size s = d / 64 (None elsewhere)."""

    name: str
    polys: Mapping[int, Mapping[str, tuple[float, float, float]]]
    width_step: int
    batch_tokens: int
    experiment: str | None = None
    recipe: str = "baseline"
    size_unit: int | None = None
    width_ceiling: float | None = None  # the search's largest width; default width_step x MAX_WIDTH_STEPS

    @property
    def r_values(self) -> tuple[int, ...]:
        return tuple(sorted(self.polys))

    @property
    def max_width(self) -> float:
        return float(self.width_ceiling or self.width_step * MAX_WIDTH_STEPS)

    def coeffs(self, quantity: str, r: int) -> np.ndarray:
        if r not in self.polys:
            raise InputError(f"family {self.name!r} has no r = {r} (built for r in {list(self.r_values)})")
        if quantity == "N_unique":
            return np.add(self.polys[r]["N_once"], self.polys[r]["N_rec"])
        return np.asarray(self.polys[r][quantity], dtype=float)

    def value(self, quantity: str, r: int, d):
        c0, c1, c2 = self.coeffs(quantity, r)
        d = np.asarray(d, dtype=float)
        return c0 + d * (c1 + c2 * d)

    def slope(self, quantity: str, r: int, d):
        """d value / d width."""
        _, c1, c2 = self.coeffs(quantity, r)
        return c1 + 2 * c2 * np.asarray(d, dtype=float)

    def width_for(self, quantity: str, r: int, target):
        """The width d > 0 at which the (increasing) quantity equals `target`: the positive root."""
        return positive_root(self.coeffs(quantity, r), target)

    def size_of(self, d: float) -> float | None:
        return None if self.size_unit is None else float(d) / self.size_unit

    def describe(self) -> dict:
        out = {"name": self.name, "width_step": self.width_step, "batch_tokens": self.batch_tokens}
        return {**out, "experiment": self.experiment, "recipe": self.recipe, "r_values": list(self.r_values)}


def positive_root(coeffs, target):
    """The d > 0 at which the increasing quadratic c0 + c1 d + c2 d^2 equals `target`."""
    c0, c1, c2 = coeffs
    rhs = np.asarray(target, dtype=float) - c0
    if c2 == 0:
        return rhs / c1
    return 2 * rhs / (c1 + np.sqrt(c1 * c1 + 4 * c2 * np.maximum(rhs, 0.0)))  # stable form of the root


# ----------------------------------------------------------------------------------------------------
# building families


def interpolate(quantities_at: Callable[[int], Mapping[str, float]], width_step: int) -> dict[str, tuple]:
    """Exact quadratic coefficients of each quantity from its values at widths step x (1, 2, 3), checked at
    step x 8 (ValueError when the accounting is not a quadratic in the width)."""
    widths = width_step * np.array([1.0, 2.0, 3.0])
    samples = [quantities_at(int(d)) for d in widths]
    vander = np.vander(widths, 3, increasing=True)
    out = {q: tuple(float(c) for c in np.linalg.solve(vander, [s[q] for s in samples])) for q in QUANTITIES}
    probe = 8 * width_step
    exact = quantities_at(probe)
    for q, (c0, c1, c2) in out.items():
        if abs(c0 + c1 * probe + c2 * probe**2 - exact[q]) > 1e-9 * max(1.0, abs(exact[q])):
            raise InputError(f"{q} of this model family is not a quadratic in the width (e.g. a rounded MLP width)")
    return out


def accounting_quantities(cfg) -> dict[str, float]:
    """N_once, N_rec, F (training FLOPs per token) and F_infer (forward FLOPs per token: F / 3 of the model
    with full backprop, where every use counts 6x) of one ModelConfig, from `loopscale.model.accounting`."""
    counts = param_counts(cfg)
    return {
        "N_once": counts.N_once,
        "N_rec": counts.N_rec,
        "F": flops_per_token(cfg),
        "F_infer": inference_flops_per_token(cfg),
    }


def experiment_family(
    name: str,
    experiment: str,
    r_values: Sequence[int],
    recipe: str | None = "baseline",
    overrides: Sequence[str] = (),
) -> Family:
    """The model `loopscale-train experiment=EXPERIMENT model.recipe=RECIPE OVERRIDES` trains, at every
    width and each r in r_values (ValueError naming the r the layer plan does not allow). recipe None: the
    experiment's own (a recipe probe's experiment sets its recipe and its fields, e.g. hyper_lanes)."""
    pinned = [f"model.recipe={recipe}"] if recipe else []
    try:
        composed = compose([f"experiment={experiment}", *pinned, *overrides])
        fields = OmegaConf.to_container(composed.model, resolve=True)
    except (HydraException, OmegaConfBaseException) as err:
        first = str(err).strip().splitlines()[0]
        raise InputError(
            f"family {name!r}: cannot compose experiment={experiment} {' '.join(overrides)}: {first}"
        ) from None
    fields["vocab_size"] = int(composed.data.vocab_size)  # what the run sets from its tokenizer
    step = int(fields["head_dim"])
    polys = {}
    for r in sorted({int(v) for v in r_values}):
        try:
            ModelConfig(**{**fields, "d_model": step, "r": r})
        except ValueError as err:
            raise InputError(f"family {name!r} (experiment={experiment}) cannot loop r = {r}: {err}") from None
        polys[r] = interpolate(
            lambda d, r=r: accounting_quantities(ModelConfig(**{**fields, "d_model": d, "r": r})), step
        )
    batch_tokens = int(composed.budget.batch_size) * int(fields["seq_len"])
    recipe = ModelConfig(**{**fields, "d_model": step, "r": max(polys)}).recipe  # "auto" resolved to its label
    return Family(name, polys, step, batch_tokens, experiment, recipe, 64 if experiment == "isodepth" else None)


def named_family(
    name: str,
    r_values: Sequence[int],
    recipe: str | None = "baseline",
    experiment: str | None = None,
    overrides: Sequence[str] = (),
) -> Family:
    """paper | demo | cpu (their experiments, FAMILY_EXPERIMENTS) or custom (`experiment` + `overrides`;
    recipe None keeps the experiment's own)."""
    if name == "custom":
        if not experiment:
            raise InputError(
                "--family custom needs --experiment NAME (a config under sweeps/experiment/ or in your "
                "LOOPSCALE_CONFIG_PATH)"
            )
        return experiment_family(name, experiment, r_values, recipe, overrides)
    if name not in FAMILY_EXPERIMENTS:
        raise InputError(f"unknown family {name!r}; choose from {', '.join([*FAMILY_EXPERIMENTS, 'custom'])}")
    if experiment or overrides:
        raise InputError(f"--experiment and --override go with --family custom, not --family {name}")
    return experiment_family(name, FAMILY_EXPERIMENTS[name], r_values, recipe)


def power_law_family(
    r_values: Sequence[int], once_fraction: float = 0.2, params_per_width2: float = 240.0, width_step: int = 1
) -> Family:
    """The closed-form family: N_unique = c d^2 with N_once = f N_unique, N_rec = (1 - f) N_unique, training
    F = 6 (N_once + r N_rec) (C = 6 N D with N the parameters a token passes through) and F_infer = F / 3.
    At r = 1 this is Chinchilla's setting, whose optimum is Hoffmann et al.'s eq. 4."""
    c, f = params_per_width2, once_fraction
    polys = {
        int(r): {
            "N_once": (0.0, 0.0, f * c),
            "N_rec": (0.0, 0.0, (1 - f) * c),
            "F": (0.0, 0.0, 6 * (f + r * (1 - f)) * c),
            "F_infer": (0.0, 0.0, 2 * (f + r * (1 - f)) * c),
        }
        for r in r_values
    }
    return Family("power-law", polys, width_step, batch_tokens=1, width_ceiling=1e9)
