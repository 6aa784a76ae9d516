"""`loopscale isoflop` (issue 53, item 5): Approach 2 on any iso-FLOP table, its columns mapped by options as `fit`
maps them; the per-budget table (window, N*, interval) and the exponent with its interval, printed and written.
Through loopscale.cli.main in this process (support.cli.run_cli)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from support.cli import run_cli

LAW = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}


def released_table(path, seed: int = 0):
    """A study's release as its own columns name it: params, flops, loss (and no r): 5 budgets x 12 sizes over two
    decades of N, log L + N(0, 0.002^2)."""
    rng = np.random.default_rng(seed)
    a = LAW["beta"] / (LAW["alpha"] + LAW["beta"])
    g = (LAW["alpha"] * LAW["A"] / (LAW["beta"] * LAW["B"])) ** (1 / (LAW["alpha"] + LAW["beta"]))
    lines = ["params,flops,loss"]
    for C in np.geomspace(1e18, 1e20, 5):
        for N in np.geomspace(g * (C / 6) ** a / 10, g * (C / 6) ** a * 10, 12):
            L = LAW["E"] + LAW["A"] * N ** -LAW["alpha"] + LAW["B"] * (C / (6 * N)) ** -LAW["beta"]
            lines.append(f"{N:.6g},{C:.6g},{L * np.exp(0.002 * rng.standard_normal()):.6f}")
    path.write_text("\n".join(lines) + "\n")
    return a


def test_isoflop_reads_any_table_through_column_options_and_writes_its_table(tmp_path):
    src, md, out = tmp_path / "released.csv", tmp_path / "a2.md", tmp_path / "a2.json"
    a_true = released_table(src)
    args = ["isoflop", str(src), "--n-col", "params", "--c-col", "flops", "--loss-col", "loss"]
    res = run_cli([*args, "--md", str(md), "--json", str(out), "--bootstrap", "200"])
    assert res.returncode == 0, res.stderr[-2000:]
    record = json.loads(out.read_text())
    assert len(record["budgets"]) == 5 and all(b["N_star"] and b["interval"] for b in record["budgets"])
    lo, hi = record["a_interval"]
    assert lo < a_true < hi
    text = md.read_text()
    assert "| budget C | sizes | window (N) | N* | 95% interval |" in text and text in res.stdout + "\n"
    missing = run_cli(["isoflop", str(src), "--n-col", "nope", "--c-col", "flops", "--loss-col", "loss"])
    assert missing.returncode == 2 and "nope" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    no_budget = run_cli([*args, "--budget-col", "budget"])
    assert no_budget.returncode == 2 and "--budget-col 'budget'" in no_budget.stderr
    # a release whose runs spent a little more or less than their budget: grouped by its budget column
    raw = pd.read_csv(src)
    jitter = np.exp(0.03 * np.random.default_rng(1).standard_normal(len(raw)))
    raw.assign(budget=raw["flops"], flops=raw["flops"] * jitter).to_csv(src, index=False)
    assert run_cli([*args, "--json", str(out)]).returncode == 0
    assert len(json.loads(out.read_text())["budgets"]) > 5  # by the spent C: one budget split into many
    assert run_cli([*args, "--budget-col", "budget", "--json", str(out)]).returncode == 0
    assert len(json.loads(out.read_text())["budgets"]) == 5
