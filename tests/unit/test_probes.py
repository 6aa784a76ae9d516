"""Recipe probes reuse the baseline's r = 1 runs: `loopscale collect PROBE --dense BASELINE` adds them (column
dense_from) and the looped fit of the result recovers the law; a probe table without them is refused by
`loopscale fit` with a message naming the fix, unless --allow-no-dense.

The sweeps here are run.json records written for the published grid's points (accounting from
loopscale.model.accounting, losses from a known law), since training 200 published-size models is out of reach
on this machine; collecting real trained sweeps is covered by test_sweep.py and test_slurm_sweep.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from loopscale.atomic import write_json_atomic
from loopscale.cli import main as cli_main
from loopscale.model.accounting import flops_per_token, paper_model, param_counts, tokens_for_budget
from loopscale.train.run_json import RUN_FILE

BATCH_TOKENS = 262_144
# a law in the range of the published fit (phi = 0.46 there)
LAW = dict(E=1.6, A=300.0, alpha=0.25, B=900.0, beta=0.35, phi=0.5)
BUDGETS = {
    4.64e17: [6, 8, 10, 12],
    1e18: [6, 8, 10, 12, 14],
    2.15e18: [8, 10, 12, 14, 16],
    4.64e18: [10, 12, 14, 16, 18, 20],
}


def loss(N_once: int, N_rec: int, r: int, D: int) -> float:
    n_eff = N_once + r ** LAW["phi"] * N_rec
    return LAW["E"] + LAW["A"] * n_eff ** -LAW["alpha"] + LAW["B"] * D ** -LAW["beta"]


def write_sweep(sweep_dir: Path, recipe: str, rs) -> int:
    """One done run.json per (budget, size, r) of the grid above, as `loopscale-train` writes it."""
    n = 0
    for C, sizes in BUDGETS.items():
        for s in sizes:
            for r in rs:
                cfg = paper_model(s, r, recipe)
                counts, F = param_counts(cfg), flops_per_token(cfg)
                D, steps = tokens_for_budget(C, F, BATCH_TOKENS)
                name = f"{recipe}-r{r}-C{C:.3g}-s{s}"
                write_json_atomic(
                    sweep_dir / name / RUN_FILE,
                    {
                        "status": "done",
                        "run_name": name,
                        "identity": f"{n:016x}",  # what loopscale-train records (run_json.record_problem)
                        "r": r,
                        "recipe": cfg.recipe,
                        "N_once": counts.N_once,
                        "N_rec": counts.N_rec,
                        "N": counts.N,
                        "D": D,
                        "C": F * D,
                        "C_budget": C,
                        "F": F,
                        "steps": steps,
                        "width": cfg.d_model,
                        "depth": cfg.l_eff,
                        "n_rec": cfg.n_rec,
                        "bptt_k": cfg.bptt_k,
                        "injection": cfg.injection,
                        "seed": 0,
                        "L": loss(counts.N_once, counts.N_rec, r, D),
                    },
                )
                n += 1
    return n


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    write_sweep(root / "isodepth", "baseline", (1, 2, 4, 8))
    write_sweep(root / "isodepth_tbptt", "tbptt", (2, 4, 8))
    return {"baseline": root / "isodepth", "probe": root / "isodepth_tbptt"}


N_CELLS = sum(len(sizes) for sizes in BUDGETS.values())


def test_collect_dense_adds_the_baselines_r1_rows_and_the_fit_uses_them(sweeps, tmp_path, capsys):
    out = tmp_path / "probe.csv"
    assert cli_main(["collect", str(sweeps["probe"]), "--dense", str(sweeps["baseline"]), "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert len(table) == 3 * N_CELLS + N_CELLS  # the probe's r = 2, 4, 8 and the baseline's r = 1, nothing else
    dense = table[table["r"] == 1]
    assert len(dense) == N_CELLS and set(dense["dense_from"]) == {str(sweeps["baseline"])}
    assert set(dense["run_dir"].map(lambda p: Path(p).parent)) == {sweeps["baseline"]}
    assert table.loc[table["r"] > 1, "dense_from"].isna().all()
    assert set(table.loc[table["r"] > 1, "recipe"]) == {"tbptt"}
    assert (table["dense_from"].notna() == (table["r"] == 1)).all()

    fit_json = tmp_path / "fit.json"
    assert cli_main(["fit", str(out), "--no-profile", "--starts", "4", "--out", str(fit_json)]) == 0
    result = json.loads(fit_json.read_text())
    assert result["input"]["n_rows_used"] == 4 * N_CELLS
    params = result["params"]
    assert params["phi"] == pytest.approx(LAW["phi"], abs=0.02)  # noise-free: the law comes back
    assert params["alpha"] == pytest.approx(LAW["alpha"], abs=0.02)


def test_fit_refuses_a_probe_table_without_r1_rows(sweeps, tmp_path, capsys):
    out = tmp_path / "probe_only.csv"
    assert cli_main(["collect", str(sweeps["probe"]), "--out", str(out)]) == 0
    assert set(pd.read_csv(out)["r"]) == {2, 4, 8}
    capsys.readouterr()
    assert cli_main(["fit", str(out), "--no-profile", "--starts", "2"]) == 2
    err = capsys.readouterr().err
    assert "no r = 1 runs in the table (r = 2, 4, 8)" in err
    assert "loopscale collect PROBE_DIR --dense BASELINE_DIR" in err and "--allow-no-dense" in err
    assert len(err.strip().splitlines()) == 1
    # the Chinchilla law does not use r: never refused
    assert cli_main(["fit", str(out), "--law", "chinchilla", "--no-profile", "--starts", "2"]) == 0
    # an explicit flag: fit the r > 1 runs alone on purpose
    assert cli_main(["fit", str(out), "--no-profile", "--starts", "2", "--allow-no-dense"]) == 0


def test_collect_dense_bad_input(sweeps, tmp_path, capsys):
    # the baseline already has r = 1 runs: adding another sweep's would count them twice
    assert (
        cli_main(
            ["collect", str(sweeps["baseline"]), "--dense", str(sweeps["baseline"]), "--out", str(tmp_path / "a.csv")]
        )
        == 2
    )
    assert "already has" in capsys.readouterr().err
    # a dense sweep with no r = 1 runs
    assert (
        cli_main(["collect", str(sweeps["probe"]), "--dense", str(sweeps["probe"]), "--out", str(tmp_path / "b.csv")])
        == 2
    )
    assert "has no finished r = 1 runs" in capsys.readouterr().err
    assert (
        cli_main(
            ["collect", str(sweeps["probe"]), "--dense", str(tmp_path / "missing"), "--out", str(tmp_path / "c.csv")]
        )
        == 2
    )
    assert "is not a directory" in capsys.readouterr().err
    assert not any((tmp_path / name).exists() for name in ("a.csv", "b.csv", "c.csv"))
