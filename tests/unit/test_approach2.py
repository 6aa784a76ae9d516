"""Approach 2 as practitioners run it (issue 53, item 5): per budget a parabola through the points near the
minimum, a bootstrap interval per budget, an exponent whose interval carries them. On synthetic asymmetric
iso-FLOP curves (L = E + A N^-alpha + B D^-beta, D = C / 6N) whose points span two decades of N and whose true
minima are known in closed form."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.fit.validation.approach2 import iso_flop_exponent
from loopscale.fit.validation.text import approach2_lines

LAW = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}  # Hoffmann et al.'s published fit
A_TRUE = LAW["beta"] / (LAW["alpha"] + LAW["beta"])


def true_n_star(C: float) -> float:
    """argmin over N of E + A N^-alpha + B (C / 6N)^-beta: (alpha A / (beta B))^(1/(alpha+beta)) (C/6)^a."""
    g = (LAW["alpha"] * LAW["A"] / (LAW["beta"] * LAW["B"])) ** (1 / (LAW["alpha"] + LAW["beta"]))
    return g * (C / 6) ** A_TRUE


def isoflop_table(budgets, sigma: float, seed: int, span=(30.0, 3.3), n_sizes: int = 15, drift=(0.0, 0.0)):
    """Per budget, n_sizes log-spaced N from N*/span[0] to N* x span[1] (by default two decades, most points on the
    small side, where the curve is steep), the grid's centre moved from N* by 10^drift[0] at the smallest budget
    to 10^drift[1] at the largest (log-linearly: a fixed grid of sizes drifts so), one run each, log L + N(0,
    sigma^2)."""
    rng = np.random.default_rng(seed)
    shifts = 10 ** np.linspace(drift[0], drift[1], len(budgets))
    rows = []
    for C, shift in zip(budgets, shifts):
        for N in np.geomspace(true_n_star(C) * shift / span[0], true_n_star(C) * shift * span[1], n_sizes):
            D = C / (6 * N)
            L = LAW["E"] + LAW["A"] * N ** -LAW["alpha"] + LAW["B"] * D ** -LAW["beta"]
            rows.append({"r": 1, "N": N, "D": D, "C": C, "L": L * np.exp(sigma * rng.standard_normal())})
    return pd.DataFrame(rows)


def whole_span_exponent(table: pd.DataFrame) -> float:
    """The method before issue 53: one parabola of L in ln N through every point of a budget."""
    xs, ys = [], []
    for C, g in table.groupby("C"):
        c2, c1, _ = np.polyfit(np.log(g["N"]), g["L"], 2)
        xs.append(np.log(C))
        ys.append(-c1 / (2 * c2))
    return float(np.polyfit(xs, ys, 1)[0])


def test_each_budgets_n_star_is_recovered_within_its_interval_and_the_exponent_within_its_own():
    """Two decades per budget whose centre drifts from N*/5 to N* x 5: on noise-free curves the window's exponent
    is the truth (to 0.002) where one parabola over every point was off by > 0.015; with noise each budget's N*
    lies in its interval (at most one of six misses) and so does the exponent here."""
    budgets = np.geomspace(1e18, 1e21, 6)
    exact = isoflop_table(budgets, sigma=0.0, seed=0, span=(10.0, 10.0), drift=(-0.7, 0.7))
    assert abs(iso_flop_exponent(exact)["a"] - A_TRUE) < 0.002
    assert abs(whole_span_exponent(exact) - A_TRUE) > 0.015  # the method before issue 53
    table = isoflop_table(budgets, sigma=0.002, seed=0, span=(10.0, 10.0), drift=(-0.7, 0.7))
    a2 = iso_flop_exponent(table, LAW)
    rows = a2["budgets"]
    assert len(rows) == 6 and all(b["N_star"] is not None and b["interval"] is not None for b in rows)
    covered = [b["interval"][0] <= true_n_star(b["C"]) <= b["interval"][1] for b in rows]
    assert sum(covered) >= 5  # 95% intervals: at most one of six may miss
    for b in rows:  # the window holds the points near the minimum, not the whole span
        assert 3 <= b["n_window"] <= 5 and b["window"][0] < b["N_star"] < b["window"][1]
        assert b["window"][1] / b["window"][0] < 10 and b["n_sizes"] == 15
    lo, hi = a2["a_interval"]
    assert lo < A_TRUE < hi and a2["a_law"] == pytest.approx(A_TRUE)
    text = "\n".join(approach2_lines(a2))
    assert "window" in text and f"{a2['a']:.3f}" in text and "95% interval" in text


def test_the_exponents_interval_covers_the_truth_across_noise_draws():
    """20 noisy tables: the exponent's 95% interval covers the true a in at least 16 (expected 19; measured 38 of
    40 and the budgets' intervals 184 of 194 with these settings)."""
    budgets = np.geomspace(1e18, 1e21, 5)
    covered = 0
    for seed in range(20):
        a2 = iso_flop_exponent(isoflop_table(budgets, sigma=0.004, seed=100 + seed), n_boot=200, seed=seed)
        lo, hi = a2["a_interval"]
        covered += lo <= A_TRUE <= hi
    assert covered >= 16


def test_a_budget_whose_lowest_point_is_on_an_edge_is_left_out_with_its_reason():
    table = isoflop_table([1e19, 1e20, 1e21], sigma=0.0, seed=0)
    edge = isoflop_table([1e19], sigma=0.0, seed=0, span=(100.0, 0.5), n_sizes=6)  # every size below N*
    a2 = iso_flop_exponent(pd.concat([table[table["C"] != 1e19], edge], ignore_index=True))
    first = next(b for b in a2["budgets"] if b["C"] == pytest.approx(1e19))
    assert first["N_star"] is None and "edge" in first["reason"]
    assert a2["a"] is not None  # the other two budgets still give a slope


def test_the_window_is_the_lowest_size_and_its_two_nearest_on_each_side():
    """docs/operations.md: per budget the lowest size and its two nearest on each side (fewer at an edge)."""
    from loopscale.fit.isoflop import window_of

    y = np.array([5.0, 4.0, 3.0, 2.5, 2.0, 2.2, 2.6, 3.1, 4.0])  # the lowest at index 4
    assert window_of(y)[0] == slice(2, 7)
    assert window_of(y[3:])[0] == slice(0, 4)  # the lowest second: one below it, two above
    assert window_of(y[:6])[0] == slice(2, 6)  # the lowest second to last: two below, one above
    table = isoflop_table([1e19, 1e20, 1e21], sigma=0.0, seed=0)
    for b in iso_flop_exponent(table, n_boot=40)["budgets"]:
        rows = table[np.isclose(table["C"], b["C"], rtol=1e-6)].sort_values("N")
        sizes, losses = rows["N"].to_numpy(), rows["L"].to_numpy()
        k = int(np.argmin(losses))
        assert b["n_window"] == 5 and b["window"] == pytest.approx([sizes[k - 2], sizes[k + 2]], rel=1e-9)


def _seeded(table: pd.DataFrame, offsets) -> pd.DataFrame:
    """Each row as len(offsets) seeds, log L moved by the offsets (distinct, their mean 0: the same size means)."""
    return pd.concat([table.assign(L=table["L"] * np.exp(o)) for o in offsets], ignore_index=True)


def test_the_bootstrap_moves_a_sizes_mean_by_sigma_over_the_root_of_its_seeds():
    """Approach 2's bootstrap: each size's mean log L moved by sigma / sqrt(n_seeds). Two designs with the same
    means, 4 seeds at a seed sigma s and 16 seeds at 2 s, move their means alike: the same intervals."""
    base = isoflop_table([1e19, 1e20, 1e21], sigma=0.0, seed=0)
    d = 0.004
    four = iso_flop_exponent(_seeded(base, d * np.arange(-3, 4, 2)), n_boot=200)  # s^2 = 20 d^2 / 3
    e = d * np.sqrt(5 / 17)  # s^2 = 1360 e^2 / 15 = 4 x 20 d^2 / 3
    sixteen = iso_flop_exponent(_seeded(base, e * np.arange(-15, 16, 2)), n_boot=200)
    assert "seed" in four["sigma_source"] and "seed" in sixteen["sigma_source"]
    assert sixteen["sigma_log"] == pytest.approx(2 * four["sigma_log"], rel=1e-9)
    for a, b in zip(four["budgets"], sixteen["budgets"]):
        assert a["N_star"] == pytest.approx(b["N_star"], rel=1e-9)
        assert b["log_se"] == pytest.approx(a["log_se"], rel=1e-6)


def _law_loss(N, C):
    D = C / (6 * N)
    return LAW["E"] + LAW["A"] * N ** -LAW["alpha"] + LAW["B"] * D ** -LAW["beta"]


def _scattered_minima(seed: int, scatter: float, sigma: float = 0.002) -> pd.DataFrame:
    """Eight budgets whose curves are the law's moved in ln N by N(0, scatter^2) each (released minima scatter
    about a power law by more than their noise), sampled alternately by 25 and 7 sizes over N*/8 .. 8 N*."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, C in enumerate(np.geomspace(1e18, 1e21, 8)):
        shift = scatter * rng.standard_normal()
        for N in np.geomspace(true_n_star(C) / 8, true_n_star(C) * 8, (25, 7)[i % 2]):
            L = _law_loss(N * np.exp(-shift), C) * np.exp(sigma * rng.standard_normal())
            rows.append({"r": 1, "N": N, "D": C / (6 * N), "C": C, "L": L})
    return pd.DataFrame(rows)


def test_minima_scattering_about_the_power_law_enter_as_a_between_budget_variance():
    """tau, DerSimonian-Laird's between-budget sd, recovers a scatter of 0.2 in ln N* (within 0.1-0.3 on average
    over draws) and is ~0 without one; with it in the weights the exponent's interval covers the truth (measured
    37 of 40 draws, 31 of 40 with the budgets' se alone; 19 and 16 of these 20)."""
    taus = [iso_flop_exponent(_scattered_minima(s, 0.2), n_boot=100, seed=s)["tau_log"] for s in range(8)]
    assert 0.1 < np.mean(taus) < 0.3
    calm = [iso_flop_exponent(_scattered_minima(s, 0.0), n_boot=100, seed=s)["tau_log"] for s in range(4)]
    assert np.mean(calm) < 0.03
    a2 = iso_flop_exponent(_scattered_minima(0, 0.2), n_boot=100)
    rows = [b for b in a2["budgets"] if b["N_star"] is not None]
    x, y = np.log([b["C"] for b in rows]), np.log([b["N_star"] for b in rows])
    se2 = np.array([b["log_se"] for b in rows]) ** 2
    slope = {k: np.polyfit(x, y, 1, w=1 / np.sqrt(v))[0] for k, v in (("re", se2 + a2["tau_log"] ** 2), ("fe", se2))}
    assert a2["tau_log"] > 0.05 and a2["a"] == pytest.approx(slope["re"], abs=1e-9)
    assert abs(slope["re"] - slope["fe"]) > 0.005  # the budgets' scatter changes the line, not only its interval
    covered = 0
    for s in range(20):
        lo, hi = iso_flop_exponent(_scattered_minima(200 + s, 0.2), n_boot=100, seed=s)["a_interval"]
        covered += lo <= A_TRUE <= hi
    assert covered >= 18


def test_the_interpolation_rule_finds_the_minimum_of_the_curve_through_every_size():
    """approach2.interp_vertex: the argmin of an Akima spline through a budget's sizes (Porian et al.'s rule). On the
    law's noise-free curves sampled densely it is the true N* (to the search grid), its exponent the truth to 0.003;
    a curve falling to its last size has none; the record and the text carry it beside the window's a."""
    from loopscale.fit.validation.approach2 import interp_vertex

    budgets = np.geomspace(1e18, 1e21, 5)
    exact = isoflop_table(budgets, sigma=0.0, seed=0, span=(10.0, 7.0), n_sizes=21)  # no size at N*
    for C, g in exact.groupby("C"):
        x, y = np.log(g["N"].to_numpy()), np.log(g["L"].to_numpy())
        assert interp_vertex(x, y) == pytest.approx(np.log(true_n_star(C)), abs=0.01)
        assert interp_vertex(x[: int(np.argmin(y))], y[: int(np.argmin(y))]) is None  # the minimum cut off
    a2 = iso_flop_exponent(exact, n_boot=40)
    assert a2["a_interp"] == pytest.approx(A_TRUE, abs=0.003)
    assert f"C^{a2['a_interp']:.3f}" in "\n".join(approach2_lines(a2))


def test_the_exponents_se_is_widened_by_the_budgets_scatter_and_never_narrowed():
    """docs/design.md (Approach 2): the line's se and interval are widened by sqrt(chi2 / dof) when the budgets
    scatter about it by more than their se say; when they scatter less (here: noise-free minima, every budget's
    se from seed repeats), the se is the weighted fit's own, 1 / sqrt(sum w (x - x_w)^2), not a narrower one."""
    base = isoflop_table(np.geomspace(1e18, 1e21, 4), sigma=0.0, seed=0)
    a2 = iso_flop_exponent(_seeded(base, 0.004 * np.arange(-3, 4, 2)), n_boot=200)
    rows = [b for b in a2["budgets"] if b["N_star"] is not None]
    se2 = np.square([b["log_se"] for b in rows]) + a2["tau_log"] ** 2  # tau: 0 where the budgets agree this well
    x, w = np.log([b["C"] for b in rows]), 1 / se2
    own_se = 1 / np.sqrt(np.sum(w * (x - np.average(x, weights=w)) ** 2))
    assert len(rows) == 4 and a2["a_chi2_dof"] < 0.5  # the minima lie on the line, well within their se
    assert a2["a_se"] == pytest.approx(own_se, rel=1e-9)
    lo, hi = a2["a_interval"]
    assert hi - lo > 2 * own_se  # the bootstrap's percentiles (~3.9 se), not shrunk by sqrt(chi2 / dof) < 1


def test_tau_is_dersimonian_lairds_moment_rule_written_out():
    """docs/design.md (Approach 2): tau^2 is the DerSimonian-Laird moment estimate for a weighted line,
    (Q - dof) / tr(P), Q the chi^2 of the 1 / se^2 line, P = W - W X (X'W X)^-1 X'W (written out here as a matrix:
    tr(P) = sum w - the weighted leverages), and the exponent is the line weighted by 1 / (se^2 + tau^2)."""
    a2 = iso_flop_exponent(_scattered_minima(3, 0.2), n_boot=100, seed=3)
    rows = [b for b in a2["budgets"] if b["N_star"] is not None]
    x, y = np.log([b["C"] for b in rows]), np.log([b["N_star"] for b in rows])
    W = np.diag(1 / np.square([b["log_se"] for b in rows]))
    X = np.column_stack([x, np.ones_like(x)])
    P = W - W @ X @ np.linalg.inv(X.T @ W @ X) @ X.T @ W
    Q = float(y @ P @ y)  # the weighted residual sum of squares of the 1 / se^2 line
    assert Q > len(x) - 2  # the budgets scatter beyond their se: tau > 0
    tau2 = (Q - (len(x) - 2)) / np.trace(P)
    assert a2["tau_log"] == pytest.approx(np.sqrt(tau2), rel=1e-9)
    w = 1 / (np.diag(1 / W) + tau2)
    assert a2["a"] == pytest.approx(np.polyfit(x, y, 1, w=np.sqrt(w))[0], rel=1e-9)
