"""Synthetic runs tables with a known law, shaped like the published iso-depth sweep and its probes.

Used by the tests (ground-truth recovery of phi and delta-phi), the benchmarks and anyone who wants
to check a fitting method before trusting it on real runs.

Grid (docs/design.md, "The published recipe"): size s has d_model = 64 s rounded up to a multiple of 128;
L_eff = 20 with r = 1 a plain 20-layer model and r > 1 the 2 + 16/r x r + 2 layout. Baseline sizes
per compute budget are `BASELINE_SIZES` at r in {1, 2, 4, 8}; the truncated-backprop probe trains
`TBPTT_SIZES` at r in {2, 4, 8} only (its fits reuse the baseline's r = 1 runs). N_once, N_rec and
the FLOPs per token F come from `loopscale.model.accounting` (so a truncated pass costs 2x, not 6x), and
D = C / F rounded to whole 262,144-token batches (`accounting.tokens_for_budget`).

Loss: L = E + A (N_once + r^phi_g N_rec)^-alpha + B D^-beta for the run's recipe g, times
(1 + noise z), z ~ N(0, 1): multiplicative noise, 0.5% by default.

A second, simpler grid (`published_grid`, `published_grid_table`) predates the accounting above and
is kept because the committed fixture tables (tests/fixtures/make_fixtures.py) and their tests are
drawn from it: for each budget, widths that are multiples of 128 in [384, 2176] around the
compute-optimal width of the true law (multipliers 1/2, 1/sqrt2, 1, sqrt2, 2 on d*, duplicates
merged), blocks of 12 d^2 + 2 d parameters (attention 4 d^2, MLP 8 d^2, two norms), 2 + 16/r x r + 2
layers; for r > 1 N_rec = the 16/r middle blocks and N_once = the 4 outer blocks, the linear
injection 2 d^2 and 3 d of norms; for r = 1 N_once = the 4 outer blocks + 2 d of norms and N_rec =
the 16 middle blocks (the law only sees N_once + 1^phi N_rec, so the split is free). Tokens:
D = C / (6 (N_once + r N_rec)) (head and attention FLOPs left out).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from loopscale.fit.laws.form import cost_params, tokens_from_compute
from loopscale.model.accounting import cpu_model, flops_per_token, paper_model, param_counts, tokens_for_budget

# Dense parameters near the published fit (alpha ~ 0.20, beta ~ 0.37, E ~ 1.57 nats); A and B put
# the compute-optimal size inside the published grid.
TRUE_DENSE = {"E": 1.57, "A": 28.0, "alpha": 0.20, "B": 916.0, "beta": 0.37}
PUBLISHED_PHI = {"baseline": 0.46, "tbptt": 0.38, "hyper": 0.65}
BATCH_TOKENS = 262_144

BASELINE_SIZES = {
    4.64e17: (6, 8, 10, 12),
    1e18: (6, 8, 10, 12, 14),
    2.15e18: (8, 10, 12, 14, 16),
    4.64e18: (10, 12, 14, 16, 18, 20),
    1e19: (12, 16, 18, 20, 24),
    2.15e19: (18, 24, 28, 34),
}
TBPTT_SIZES = {
    4.64e17: tuple(range(6, 13, 2)),
    1e18: tuple(range(6, 17, 2)),
    2.15e18: tuple(range(8, 19, 2)),
    4.64e18: tuple(range(10, 23, 2)),
    1e19: (12, 16, 18, 20, 24, 28),
    2.15e19: (18, 24, 28, 34, 40),
}
BASELINE_R = (1, 2, 4, 8)
PROBE_R = (2, 4, 8)


def isodepth_grid(
    sizes: Mapping[float, tuple[int, ...]], r_values=BASELINE_R, recipe: str = "baseline", label: str | None = None
) -> pd.DataFrame:
    """One row per (budget, size, r) with the columns `loopscale collect` writes for the law
    (r, N_once, N_rec, N, D, C, F, C_budget, width, size, recipe, run_name); no loss yet. The models are the
    registered `recipe`'s; `label` (default: the recipe) is the name the table gives them."""
    label = recipe if label is None else label
    rows = []
    for budget, size_list in sizes.items():
        for size in size_list:
            for r in r_values:
                cfg = paper_model(size, r, recipe if r > 1 else "baseline")
                name = f"{label}_C{budget:.3g}_s{size}_r{r}"
                rows.append(_grid_row(cfg, budget, BATCH_TOKENS, cfg.d_model, size, label, name))
    return pd.DataFrame(rows)


def _grid_row(cfg, budget: float, batch_tokens: int, width: int, size: int, recipe: str, run_name: str) -> dict:
    """One model at one budget as a grid row (exact accounting; D, steps: `tokens_for_budget`)."""
    counts = param_counts(cfg)
    F = flops_per_token(cfg)
    D, steps = tokens_for_budget(budget, F, batch_tokens)
    return {
        "r": cfg.r,
        "N_once": counts.N_once,
        "N_rec": counts.N_rec,
        "N": counts.N,
        "D": float(D),
        "C": D * F,
        "F": F,
        "C_budget": budget,
        "steps": steps,
        "width": width,
        "size": size,
        "recipe": recipe,
        "run_name": run_name,
    }


def law_loss(table: pd.DataFrame, params: Mapping[str, float], phi: float) -> np.ndarray:
    """E + A (N_once + N_pass + r^phi N_rec)^-alpha + B D^-beta per row (the noise-free loss; N_pass, the
    parameters used once per pass, counts as N_once does: loopscale/fit/laws/looped_pass.py; 0 without the column)."""
    n_once = table["N_once"].to_numpy(float)
    if "N_pass" in table.columns:
        n_once = n_once + table["N_pass"].fillna(0).to_numpy(float)
    n_eff = n_once + table["r"].to_numpy(float) ** phi * table["N_rec"].to_numpy(float)
    return (
        params["E"]
        + params["A"] * n_eff ** -params["alpha"]
        + params["B"] * table["D"].to_numpy(float) ** -params["beta"]
    )


def recipe_sweep(
    phi: Mapping[str, float] | None = None,
    seed: int = 0,
    noise: float = 0.005,
    dense: Mapping[str, float] | None = None,
    dense_by_recipe: Mapping[str, Mapping[str, float]] | None = None,
) -> pd.DataFrame:
    """The baseline grid plus one probe grid per other recipe, in one table with a `recipe` column.

    phi: recipe -> phi_g (default baseline 0.46, tbptt 0.38); the first recipe is the baseline,
    trained at r in {1, 2, 4, 8} on `BASELINE_SIZES`; every other recipe at r in {2, 4, 8} on
    `TBPTT_SIZES` (no probe r = 1: the probes share the baseline's dense runs). dense: the shared
    E, A, alpha, B, beta; dense_by_recipe overrides them for a recipe's looped runs (to simulate
    recipes that do NOT share the dense model). noise: relative standard deviation of L.
    """
    phi = dict(phi or {"baseline": PUBLISHED_PHI["baseline"], "tbptt": PUBLISHED_PHI["tbptt"]})
    dense = dict(dense or TRUE_DENSE)
    recipes = list(phi)
    parts = [isodepth_grid(BASELINE_SIZES, BASELINE_R, recipes[0])]
    parts += [isodepth_grid(TBPTT_SIZES, PROBE_R, g) for g in recipes[1:]]
    table = pd.concat(parts, ignore_index=True)
    L = np.empty(len(table))
    for g in recipes:
        rows = (table["recipe"] == g).to_numpy()
        params = {**dense, **(dense_by_recipe or {}).get(g, {})} if g != recipes[0] else dense
        L[rows] = law_loss(table[rows], params, phi[g])
    rng = np.random.default_rng(seed)
    table["L"] = L * (1 + noise * rng.standard_normal(len(table)))
    table["seed"] = seed
    return table


CPU_SIZES = {4.64e17: (6, 8, 10), 1e18: (8, 10, 12)}  # a reduced grid: two budgets, three sizes each


def small_recipe_sweep(seed: int = 0, noise: float = 0.005, recipe: str = "additive", phi: float = 0.38):
    """A CPU-sized recipe comparison (30 runs): the baseline at r in {1, 2, 4} and one other recipe at
    r in {2, 4}, on `CPU_SIZES`, with the shared dense law `TRUE_DENSE` (what `benchmarks/bench_fit.py`
    times a `fit --joint --bootstrap 200` on). `recipe` is the other design's label: its models are the
    baseline's (the same accounting), only its phi differs."""
    parts = [isodepth_grid(CPU_SIZES, (1, 2, 4), "baseline"), isodepth_grid(CPU_SIZES, (2, 4), "baseline", recipe)]
    table = pd.concat(parts, ignore_index=True)
    phis = np.where(table["recipe"] == "baseline", PUBLISHED_PHI["baseline"], phi)
    n_eff = table["N_once"].to_numpy(float) + table["r"].to_numpy(float) ** phis * table["N_rec"].to_numpy(float)
    p = TRUE_DENSE
    L = p["E"] + p["A"] * n_eff ** -p["alpha"] + p["B"] * table["D"].to_numpy(float) ** -p["beta"]
    table["L"] = L * (1 + noise * np.random.default_rng(seed).standard_normal(len(table)))
    table["seed"] = seed
    return table


def recipe_tables(sweep: pd.DataFrame, column: str = "recipe") -> dict[str, pd.DataFrame]:
    """One runs table per recipe as a probe's collect writes it: the recipe's own runs plus the
    baseline's r = 1 runs (the same dense runs repeated in every table)."""
    dense = sweep[sweep["r"] == 1]
    out = {}
    for g in pd.unique(sweep[column]):
        own = sweep[(sweep[column] == g) & (sweep["r"] > 1)]
        out[str(g)] = pd.concat([dense, own], ignore_index=True)
    return out


def evaluation_log_table(
    n_rows: int, seed: int = 0, noise: float = 0.005, phi: float = PUBLISHED_PHI["baseline"]
) -> pd.DataFrame:
    """A big runs table like one row per logged evaluation across a sweep: n_rows draws of baseline
    grid runs, each at a fraction u ~ U(0.05, 1) of its tokens (D = u D_final, C = D F), with the
    law's loss and multiplicative noise. For benchmarking the fitter on 10^4-10^6 rows."""
    grid = isodepth_grid(BASELINE_SIZES, BASELINE_R)
    rng = np.random.default_rng(seed)
    table = grid.iloc[rng.integers(0, len(grid), n_rows)].reset_index(drop=True)
    table["D"] = table["D"] * rng.uniform(0.05, 1.0, n_rows)
    table["C"] = table["D"] * table["F"]
    table["L"] = law_loss(table, TRUE_DENSE, phi) * (1 + noise * rng.standard_normal(n_rows))
    return table


# ----------------------------------------------------------------------------------------------
# The simpler published-shaped grid of the committed fixture tables (see the module docstring)
# ----------------------------------------------------------------------------------------------
TRUE_PARAMS = {**TRUE_DENSE, "phi": PUBLISHED_PHI["baseline"]}
WIDTH_MULTIPLIERS = (0.5, 2**-0.5, 1.0, 2**0.5, 2.0)
L_EFF, PRELUDE, CODA = 20, 2, 2


def block_params(d: int) -> int:
    return 12 * d * d + 2 * d


def split_params(d: int, r: int) -> tuple[int, int]:
    """(N_once, N_rec) for width d and r recurrences on the simpler grid."""
    k = (L_EFF - PRELUDE - CODA) // r
    if r == 1:
        return (PRELUDE + CODA) * block_params(d) + 2 * d, k * block_params(d)
    return (PRELUDE + CODA) * block_params(d) + 2 * d * d + 3 * d, k * block_params(d)


def optimal_width(C: float, p: Mapping[str, float]) -> float:
    """Width whose r = 1 model is compute-optimal for the law p at budget C (C = 6 N D)."""
    a, b = p["alpha"], p["beta"]
    G = (a * p["A"] / (b * p["B"])) ** (1 / (a + b))
    N_star = G * (C / 6) ** (b / (a + b))
    return float(np.sqrt(N_star / (L_EFF * 12)))


def published_grid(params: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Noise-free simpler grid: one row per (budget, width, r) with r, N_once, N_rec, N, D, C, width."""
    p = dict(TRUE_PARAMS if params is None else params)
    rows = []
    for C in BASELINE_SIZES:
        d_star = optimal_width(C, p)
        widths = sorted({int(min(2176, max(384, 128 * np.ceil(m * d_star / 128)))) for m in WIDTH_MULTIPLIERS})
        for d in widths:
            for r in BASELINE_R:
                n_once, n_rec = split_params(d, r)
                D = tokens_from_compute(C, cost_params(n_once, n_rec, r))
                rows.append({"r": r, "N_once": n_once, "N_rec": n_rec, "N": n_once + n_rec, "D": D, "C": C, "width": d})
    return pd.DataFrame(rows)


def published_grid_table(
    seed: int, noise: float = 0.005, n_rows: int | None = None, params: Mapping[str, float] | None = None
) -> pd.DataFrame:
    """The simpler grid with loss L = law * (1 + noise z) (`params` with phi; default TRUE_PARAMS);
    `n_rows` drops random rows (seeded) down to it."""
    p = dict(TRUE_PARAMS if params is None else params)
    rng = np.random.default_rng(seed)
    table = published_grid(p)
    table["L"] = law_loss(table, p, p["phi"]) * (1 + noise * rng.standard_normal(len(table)))
    table["seed"] = seed
    if n_rows is not None and n_rows < len(table):
        keep = np.sort(rng.choice(len(table), n_rows, replace=False))
        table = table.iloc[keep].reset_index(drop=True)
    return table


# ----------------------------------------------------------------------------------------------
# Seed replicates: sweeps whose points were each trained with several seeds (loopscale.fit.noise)
# ----------------------------------------------------------------------------------------------
# The CPU demo's design (sweeps/grid/cpu_demo.yaml): r in {1, 2, 4, 8}, L_eff = 10 (1 + 8/r x r + 1), head
# dim 8, T = 64, a 512-token vocabulary, batches of 16 x 64 tokens; one forked job per (r, width) with a
# branch per budget (width 16 only the first two): 44 points from 16 jobs.
DEMO_BUDGETS = {
    16: (2.5e11, 3.54e11),
    24: (2.5e11, 3.54e11, 5e11),
    32: (2.5e11, 3.54e11, 5e11),
    48: (2.5e11, 3.54e11, 5e11),
}
DEMO_BATCH_TOKENS = 16 * 64
# A dense law near the demo's scale (E ~ 3.3 nats, phi 0.75 measured), whose r = 1 optimum lies inside the
# demo's widths at its budgets: a stand-in for simulation, not the demo's fit.
DEMO_DENSE = {"E": 3.3, "A": 50.0, "alpha": 0.45, "B": 60.0, "beta": 0.38}
DEMO_PHI = 0.75


def demo_grid(r_values=BASELINE_R, recipe: str = "baseline") -> pd.DataFrame:
    """One row per (r, width, budget) of the CPU demo's forked design, with the columns of `isodepth_grid`
    (width = d_model; no `parent` yet: `seeded_sweep(forked=True)` adds one per job and seed)."""
    rows = []
    for width, budgets in DEMO_BUDGETS.items():
        for r in r_values:
            cfg = cpu_model(
                width,
                r,
                recipe if r > 1 else "baseline",
                depth=10,
                n_prelude=1,
                n_coda=1,
                head_dim=8,
                seq_len=64,
                vocab_size=512,
            )
            for budget in budgets:
                name = f"{recipe}-r{r}-d{width}-C{budget:.3g}"
                rows.append(_grid_row(cfg, budget, DEMO_BATCH_TOKENS, width, width, recipe, name))
    return pd.DataFrame(rows)


def demo_forked_design() -> pd.DataFrame:
    """`demo_grid` as a design `power` and `curve_worth` read: one seed, a job (`parent`) per (r, width) and each
    branch's steps at the demo's batch."""
    grid = demo_grid().assign(seed=0, steps=lambda t: np.round(t["D"] / DEMO_BATCH_TOKENS).astype(int))
    return grid.assign(parent="r" + grid["r"].astype(str) + "-d" + grid["width"].astype(str))


def seeded_sweep(
    grid: pd.DataFrame,
    phi: float | Mapping[str, float],
    n_seeds=3,
    sigma_log=0.005,
    seed: int = 0,
    dense: Mapping[str, float] | None = None,
    forked: bool = False,
    parent_share: float = 1.0,
) -> pd.DataFrame:
    """A sweep of `grid` (rows without L: `isodepth_grid`, `demo_grid`, `published_grid`) trained with several
    seeds per point: each grid row repeated once per seed (column `seed` = 0, 1, ...), with
    log L = log L_law + eps, eps ~ N(0, sigma^2) (sigma of log L, the quantity `loopscale.fit.noise` estimates).

    phi: one phi, or recipe -> phi (rows by their `recipe`); dense: E, A, alpha, B, beta (TRUE_DENSE).
    n_seeds: seeds for every point, or one count per grid row (unequal seeds; 1 = no repeat).
    sigma_log: a number, or a function of the repeated table giving sigma per row (a trend in C or N).
    forked: each (recipe, r, N_once, N_rec, seed) is one parent job (column `parent`) whose branches are its
    budgets; a share `parent_share` of the variance is the parent's (one offset for all its branches, as a
    seed moves a whole training run), the rest each branch's own. seed: the generator's seed.
    """
    dense = dict(dense or TRUE_DENSE)
    counts = np.broadcast_to(np.asarray(n_seeds, dtype=int), (len(grid),))
    table = grid.loc[grid.index.repeat(counts)].reset_index(drop=True)
    table["seed"] = np.concatenate([np.arange(k) for k in counts])
    recipes = table["recipe"].astype(str).to_numpy() if "recipe" in table.columns else np.full(len(table), "")
    phis = np.array([phi[g] for g in recipes]) if isinstance(phi, Mapping) else np.full(len(table), float(phi))
    L = np.empty(len(table))
    for p in np.unique(phis):
        on = phis == p
        L[on] = law_loss(table[on], dense, p)
    sigma = np.broadcast_to(np.asarray(sigma_log(table) if callable(sigma_log) else sigma_log, float), (len(table),))
    rng = np.random.default_rng(seed)
    eps = rng.standard_normal(len(table))
    if forked:
        job = table[["r", "N_once", "N_rec", "seed"]].astype(str).agg("-".join, axis=1) + "-" + recipes
        codes, inverse = np.unique(job.to_numpy(), return_inverse=True)
        table["parent"] = "parent-" + job
        shared = rng.standard_normal(len(codes))[inverse]
        eps = np.sqrt(parent_share) * shared + np.sqrt(1 - parent_share) * eps
    table["L"] = L * np.exp(sigma * eps)
    return table
