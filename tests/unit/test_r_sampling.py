"""Variable-depth training (loopscale/model/r_sampling.py, train/plan.py, the LightningModule's sampled step): the
distributions against closed forms and Monte Carlo, the exact FLOPs ledger, the budget met in realised FLOPs, N_rec
unchanged, and under torch.compile one graph family whatever r is drawn (Dynamo's graphs counted)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from loopscale.errors import ConfigError
from loopscale.model import r_sampling as rs
from loopscale.model.accounting import flops_per_token, param_counts
from loopscale.model.transformer import LoopedTransformer
from loopscale.train.compiling import compile_model
from loopscale.train.job_plan import plan_job
from loopscale.train.plan import plan_run
from support.train import TINY, tiny_model, train_config


def sampled(**fields):
    return tiny_model(4, "baseline", **fields)


def test_poisson_lognormal_pmf_is_the_mixture():
    cfg = sampled(r_sampling="poisson-lognormal", r_sigma=0.5, r_max=40)
    values, probs = rs.pmf(cfg)
    assert probs.sum() == pytest.approx(1.0, abs=1e-12) and values.tolist() == list(range(1, 41))
    # E[n] = E[lambda] + 1 = r + 1, up to the tail lumped at r_max (P(lambda > 20) ~ 3e-4 at sigma 0.5)
    assert values @ probs == pytest.approx(5.0, abs=1e-4)
    far = rs.pmf(sampled(r_sampling="poisson-lognormal", r_sigma=0.5, r_max=120))
    assert far[0] @ far[1] == pytest.approx(5.0, abs=1e-8)
    # sigma -> 0: Poisson(r) + 1
    tight = rs.pmf(sampled(r_sampling="poisson-lognormal", r_sigma=1e-4, r_max=40))[1]
    poisson = [math.exp(-4) * 4**k / math.factorial(k) for k in range(10)]
    np.testing.assert_allclose(tight[:10], poisson, atol=1e-6)
    # Monte Carlo of the keyed draws agrees with the pmf
    draws = np.concatenate([rs.draw_sequences(cfg, 0, s, 2000) for s in range(20)])
    counts = np.bincount(draws, minlength=41)[1:] / len(draws)
    assert np.abs(counts - probs).max() < 0.01


def test_uniform_and_the_cap():
    cfg = sampled(r_sampling="uniform", r_set=[6, 2, 2, 4])
    assert cfg.r_set == [2, 4, 6]
    assert rs.pmf(cfg)[0].tolist() == [2, 4, 6] and rs.r_cap(cfg) == 6
    capped = sampled(r_sampling="poisson-lognormal", r_max=6)
    values, probs = rs.pmf(capped)
    assert values.max() == 6 and probs[-1] > 0.1  # the tail's mass lumped at r_max
    assert max(rs.draw_sequences(capped, 3, s, 500).max() for s in range(5)) == 6
    with pytest.raises(ConfigError, match="r_sampling=uniform needs r_set"):
        sampled(r_sampling="uniform")
    with pytest.raises(ConfigError, match="r_max=2 must be >= r=4"):
        sampled(r_sampling="poisson-lognormal", r_max=2)


def test_draws_are_keyed_by_seed_and_step():
    cfg = sampled(r_sampling="poisson-lognormal")
    a = [rs.draw_step(cfg, 7, s) for s in range(50)]
    assert a == [rs.draw_step(cfg, 7, s) for s in range(50)]  # a resumed run draws what the stopped one would
    assert a != [rs.draw_step(cfg, 8, s) for s in range(50)]
    assert len(set(a)) > 3


def test_flops_at_n_are_the_accountings_with_the_gradient_rule():
    half = sampled(r_sampling="poisson-lognormal", r_grad="half")
    at = tiny_model(4, "baseline")
    at.r, at.bptt_k = 7, 4  # ceil(7 / 2): Parcae's rule
    assert rs.train_flops_at(half, 7) == flops_per_token(at)
    huginn = tiny_model(4, "tbptt", r_sampling="poisson-lognormal", bptt_k=2)
    at.r, at.bptt_k = 9, 2
    assert rs.train_flops_at(huginn, 9) == flops_per_token(at) and rs.grad_passes_at(huginn, 1) == 1
    values, probs = rs.pmf(half)
    assert rs.expected_flops(half) == pytest.approx(sum(p * rs.train_flops_at(half, n) for n, p in zip(values, probs)))


def test_half_keeps_the_gradient_of_ceil_n_over_2_passes_at_every_n():
    """Parcae's r_grad=half is ceil(n / 2) at every draw, odd ones included: at n = 1, 5, 9 rounding would give 0,
    2, 4 (blind round 8; the check at n = 7 above cannot tell, round(3.5) = 4). One pass keeps its gradient."""
    half = sampled(r_sampling="poisson-lognormal", r_grad="half")
    assert [rs.grad_passes_at(half, n) for n in range(1, 10)] == [1, 1, 2, 2, 3, 3, 4, 4, 5]
    at = tiny_model(4, "baseline")
    for n, k in ((1, None), (5, 3)):  # bptt_k None: every pass with gradient
        at.r, at.bptt_k = n, k
        assert rs.train_flops_at(half, n) == flops_per_token(at)


@pytest.mark.parametrize("per", ["step", "sequence"])
def test_the_budget_is_met_in_realised_flops_and_n_rec_is_unchanged(per):
    C = 3e10
    cfg = train_config(
        [
            *TINY,
            "budget.mode=flops",
            f"budget.compute_flops={C}",
            "model.r=4",
            "model.depth=null",
            "model.r_sampling=poisson-lognormal",
            f"model.r_sampling_per={per}",
            "model.r_grad=half",
        ]
    )
    fixed = train_config([*TINY, "budget.mode=flops", f"budget.compute_flops={C}", "model.r=4", "model.depth=null"])
    plan, fixed_plan = plan_run(cfg), plan_run(fixed)
    assert (plan.N_once, plan.N_rec, plan.N) == (fixed_plan.N_once, fixed_plan.N_rec, fixed_plan.N)
    assert param_counts(cfg.model) == param_counts(fixed.model)
    ledger = plan.r_ledger
    sched = rs.schedule(cfg.model, cfg.seed, cfg.budget.batch_size, steps=plan.steps)
    per_step = [np.mean([rs.train_flops_at(cfg.model, int(n)) for n in d]) for d in sched.draws]
    realised = sum(per_step) * plan.batch_tokens
    assert plan.C == pytest.approx(realised, rel=1e-12) == ledger["C_realised"]
    assert plan.F * plan.D == pytest.approx(plan.C, rel=1e-12)
    assert abs(plan.C - C) <= max(per_step) * plan.batch_tokens  # within one step of the budget
    assert ledger["F_expected"] == pytest.approx(rs.expected_flops(cfg.model))
    assert sum(ledger["histogram"].values()) == plan.steps * cfg.budget.batch_size
    if per == "step":  # one draw a step: every sequence of a step alike
        assert all(len(set(d)) == 1 for d in sched.draws)


def test_sampled_r_refuses_forks():
    with pytest.raises(ConfigError, match="needs budget.mode=flops or tokens"):
        plan_job(  # a forked job's planner (train/job_plan.py); plan_run plans one run
            train_config(
                [*TINY, "budget=forks", "budget.mode=forks", "model.r=4", "model.r_sampling=poisson-lognormal"]
            )
        )


def _graphs_after(r_values, **fields) -> int:
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()  # the counters outlive reset()
    torch.manual_seed(0)
    model = LoopedTransformer(tiny_model(4, "baseline", **fields))
    compile_model(model, "blocks", backend="eager")
    x = torch.randint(0, 200, (2, 16))
    for r in r_values:
        model(x, x, r=r, n_grad=math.ceil(r / 2)).backward()
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def test_compiled_blocks_trace_one_graph_family_whatever_r_is_drawn():
    """Each layer compiled, the loop over passes in Python: the graphs Dynamo traces for r drawn from 2-7 are those
    of one fixed r (with and without gradient), not one per r."""
    fixed = _graphs_after([4, 4, 4, 4, 4])
    drawn = _graphs_after([2, 5, 3, 7, 4, 6, 2])
    assert drawn == fixed > 0
