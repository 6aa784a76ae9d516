"""`loopscale advise` on a looped-logn fit (issue 54: the demo's law): m = r^(phi + psi ln(N_c / N_ref)) reads the
size, so advice prices every width by the m of its own N_c = N_once + r N_rec (`Law.multiplier_scaling`,
`optimum.multiplier_at`). On the power-law family of test_advise_formulas.py (closed-form accounting) each advised
model's N_eff is looped-logn's own `effective_size` and its L is eq. 1 there; the slope the optimiser bisects is the
loss's derivative; psi = 0 advises as the looped law; a joint fit is read at its recipe's phi."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loopscale.analysis.advise.advice import advise
from loopscale.analysis.advise.family import power_law_family
from loopscale.analysis.advise.law_sets import fit_law_sets
from loopscale.analysis.advise.optimum import Constraints, loss, loss_slope
from loopscale.fit.laws.looped_logn import LoopedLogN
from loopscale.fit.laws.registry import law_class
from loopscale.fit.result import FitResult
from support.fit_records import fit_record

TRUTH = {"E": 1.57, "A": 28.0, "alpha": 0.20, "B": 916.0, "beta": 0.37, "phi": 0.46, "psi": -0.2, "N_ref": 1e8}
F_ONCE = 0.2
R_ALL = [1, 2, 4, 8]
C = 1e19


def logn_fit(params, law="looped-logn") -> FitResult:
    return fit_record(params, law)


def test_the_advised_model_is_eq1_at_looped_logns_own_effective_size():
    record = advise(logn_fit(TRUTH), compute_flops=C, family=power_law_family(R_ALL, F_ONCE), r_values=R_ALL).record
    law = LoopedLogN(N_ref=TRUTH["N_ref"])
    gaps = []
    for rec in record["per_r"]:
        r, m = rec["r"], rec["advised"]
        n = 240 * m["d_model"] ** 2
        D = C / (6 * (F_ONCE + r * (1 - F_ONCE)) * n)
        cols = {"r": np.array([r]), "N_once": np.array([F_ONCE * n]), "N_rec": np.array([(1 - F_ONCE) * n])}
        n_eff = float(law.effective_size(TRUTH, {**cols, "D": np.array([D])})[0])
        assert m["N_eff"] == pytest.approx(n_eff, rel=1e-12)
        expected = TRUTH["E"] + TRUTH["A"] * n_eff ** -TRUTH["alpha"] + TRUTH["B"] * D ** -TRUTH["beta"]
        assert m["L"] == pytest.approx(expected, rel=1e-12)
        gaps.append(n_eff / n)
    # psi < 0 and N_c above N_ref: a pass is worth less than r^phi says at this size
    n_c = [rec["advised"]["N_once"] + rec["r"] * rec["advised"]["N_rec"] for rec in record["per_r"]]
    assert all(nc > TRUTH["N_ref"] for nc in n_c)
    assert all(g < F_ONCE + r ** TRUTH["phi"] * (1 - F_ONCE) for g, r in zip(gaps[1:], R_ALL[1:]))


def test_the_slope_the_optimiser_bisects_is_the_derivative_of_the_loss_in_ln_d():
    point, _, _ = fit_law_sets(logn_fit(TRUTH), R_ALL)
    family, cons = power_law_family(R_ALL, F_ONCE), Constraints(compute_flops=C)
    d, h = np.array([[60.0, 400.0, 3000.0]]), 1e-5
    for r in R_ALL:
        numeric = (loss(point, family, r, d * math.exp(h), cons) - loss(point, family, r, d * math.exp(-h), cons)) / (
            2 * h
        )
        assert loss_slope(point, family, r, d, cons) == pytest.approx(numeric, rel=1e-6)


def test_psi_zero_advises_as_the_looped_law():
    flat = {**TRUTH, "psi": 0.0}
    looped = {k: v for k, v in TRUTH.items() if k not in ("psi", "N_ref")}
    family = power_law_family(R_ALL, F_ONCE, width_step=8)
    a = advise(logn_fit(flat), compute_flops=C, family=family, r_values=R_ALL).record
    b = advise(logn_fit(looped, law="looped"), compute_flops=C, family=family, r_values=R_ALL).record
    for x, y in zip(a["per_r"], b["per_r"]):
        assert x["advised"]["d_model"] == y["advised"]["d_model"]
        assert x["advised"]["L"] == pytest.approx(y["advised"]["L"], rel=1e-12)
    assert a["best"]["r"] == b["best"]["r"]


def test_a_joint_fit_is_advised_at_its_recipes_phi_and_the_shared_psi():
    dense = {k: TRUTH[k] for k in ("E", "A", "alpha", "B", "beta")}
    joint = {**dense, "phi[baseline]": 0.46, "phi[probe]": 0.66, "psi": -0.2, "N_ref": 1e8}
    law = law_class("looped-logn-joint").from_params(joint)
    m, exponent, ref = law.multiplier_scaling(joint, 4.0, "probe")
    assert (float(m), float(exponent), ref) == pytest.approx((4**0.66, -0.2 * math.log(4), 1e8))
    family = power_law_family(R_ALL, F_ONCE)
    probe = advise(logn_fit(joint, "looped-logn-joint"), compute_flops=C, family=family, recipe="probe").record
    alone = advise(logn_fit({**dense, "phi": 0.66, "psi": -0.2, "N_ref": 1e8}), compute_flops=C, family=family).record
    assert [x["advised"]["L"] for x in probe["per_r"]] == pytest.approx([x["advised"]["L"] for x in alone["per_r"]])
