"""The experiment configs under sweeps/experiment/: each composes, each expands (like `loopscale-train -m`
would, without launching) to its published number of jobs with distinct, deterministic run directories,
and each one's jobs really train (first step, shrunk to this CPU). No SLURM here: see test_slurm_sweep.py.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from loopscale.config.dirs import compose, group_dir
from loopscale.launch.sweep import compose_jobs, expand, sweep_overrides
from loopscale.train.entry import run_training
from loopscale.train.plan import run_dir_of, to_train_config
from loopscale.train.run_json import read_record
from support.cli import run_cli
from support.procs import run_loopscale

EXPERIMENTS = sorted(p.stem for p in group_dir("experiment").glob("*.yaml"))
PAPER = ["isodepth", "isodepth_tbptt", "isodepth_hyper"]
RECIPE = {"isodepth": "baseline", "isodepth_tbptt": "tbptt", "isodepth_hyper": "hyper", "isodepth_cpu": "baseline"}
# The authors' size tables (their released sweep scripts), budget -> sizes s (d_model = 64 s rounded up to 128).
BASELINE_SIZES = {
    4.64e17: [6, 8, 10, 12],
    1e18: [6, 8, 10, 12, 14],
    2.15e18: [8, 10, 12, 14, 16],
    4.64e18: [10, 12, 14, 16, 18, 20],
    1e19: [12, 16, 18, 20, 24],
    2.15e19: [18, 24, 28, 34],
}
TBPTT_SIZES = {
    4.64e17: [6, 8, 10, 12],
    1e18: [6, 8, 10, 12, 14, 16],
    2.15e18: [8, 10, 12, 14, 16, 18],
    4.64e18: [10, 12, 14, 16, 18, 20, 22],
    1e19: [12, 16, 18, 20, 24, 28],
    2.15e19: [18, 24, 28, 34, 40],
}
HYPER_SIZES = {**BASELINE_SIZES, 2.15e18: [8, 10, 12, 14, 16, 18]}


def table(sizes: dict, rs) -> set[tuple[float, int, int]]:
    return {(C, s, r) for C, ss in sizes.items() for s in ss for r in rs}


# (C, s, r) of every job: the baseline trains r in {1, 2, 4, 8}; the probes r in {2, 4, 8} only.
PUBLISHED = {
    "isodepth": table(BASELINE_SIZES, (1, 2, 4, 8)),
    "isodepth_tbptt": table(TBPTT_SIZES, (2, 4, 8)),
    "isodepth_hyper": table(HYPER_SIZES, (2, 4, 8)),
}
# 29 cells x 4 r; 34 x 3; 30 x 3; the CPU grid: 8 points x 4 r.
JOBS = {"isodepth": 116, "isodepth_tbptt": 102, "isodepth_hyper": 90, "isodepth_cpu": 32}


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_experiment_composes_to_a_valid_config(experiment):
    cfg = to_train_config(compose([f"experiment={experiment}"]))  # runs every __post_init__ check
    assert cfg.sweep == experiment
    # Hydra writes the job's .hydra/ and logs into the same directory the training code uses
    hydra_cfg = compose([f"experiment={experiment}"], return_hydra_config=True)
    assert Path(hydra_cfg.hydra.sweep.dir) / hydra_cfg.hydra.sweep.subdir == run_dir_of(cfg)
    if experiment not in JOBS:
        return  # an experiment of another kind (e.g. forked WSD runs): its own tests check its design
    assert cfg.model.recipe == RECIPE[experiment]
    if experiment in PAPER:
        # docs/design.md: L_eff = 20 (r = 1: 0-20-0, r > 1: p = c = 2), T = 2048, 262,144-token batches, the
        # published packed FineWeb-Edu rows (Llama-2 32k, 32,064-row head, 34,560 val rows), MuonH; a single
        # run of a probe (no -m) is one of its points (r = 2)
        assert cfg.model.r == (1 if experiment == "isodepth" else 2)
        assert (cfg.model.l_eff, cfg.model.n_prelude, cfg.model.n_coda) == (
            (20, 0, 0) if cfg.model.r == 1 else (20, 2, 2)
        )
        assert cfg.model.seq_len == 2048 and cfg.budget.batch_size * cfg.model.seq_len == 262_144
        assert (cfg.data.source, cfg.data.format, cfg.data.hf_name) == (
            "packed",
            "packed",
            "KristianS7/prepacked-fineweb-edu-llama2-32K-T2048",
        )
        # the published vocabulary, 32,001 ids; the model pads its embedding and head to 32,064 rows
        assert (cfg.data.vocab_size, cfg.data.val_rows, cfg.data.allow_repeat) == (32_001, 34_560, False)
        assert (cfg.optim.optimizer, cfg.model.init, cfg.model.logit_softcap) == ("muonh", "paper", 15.0)
    else:
        assert (cfg.model.l_eff, cfg.model.n_prelude, cfg.model.n_coda) == (12, 2, 2)
        assert cfg.data.source == "shakespeare"


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_multirun_jobs_have_distinct_deterministic_run_dirs(experiment):
    jobs = expand([f"experiment={experiment}"])
    names = [job.cfg.run_name for job in jobs]
    dirs = [run_dir_of(job.cfg) for job in jobs]
    assert len(set(names)) == len(names) > 1, [n for n, k in Counter(names).items() if k > 1]
    assert len(set(dirs)) == len(dirs)
    assert {d.parent for d in dirs} == {Path("runs") / experiment}
    # deterministic: the same command expands to the same jobs, in the same order, with the same configs
    again = expand([f"experiment={experiment}"])
    assert [job.overrides for job in again] == [job.overrides for job in jobs]
    assert [run_dir_of(job.cfg) for job in again] == dirs


def test_expansion_matches_hydra_composing_each_job():
    """expand() composes the first job and applies the others' values to copies (fast); every job must be
    what Hydra's compose gives for its overrides. Checked on a sample of the paper grid and on a sweep
    that also varies a config group (which takes the slow path)."""
    paper = sweep_overrides(["experiment=isodepth_hyper"])
    sample = paper[::9] + paper[-1:]
    groups = sweep_overrides(["experiment=isodepth_cpu", "model.r=1,2", "point=C5e11-d64", "trainer=cpu,ddp_cpu"])
    for jobs in (sample, groups):
        composed = [OmegaConf.to_object(compose(job)) for job in jobs]
        assert [OmegaConf.to_object(cfg) for cfg in compose_jobs(jobs)] == composed


def point_cell(point: str) -> tuple[float, int]:
    """'C1e18-s10' -> (1e18, 10)."""
    budget, size = point.split("-")
    return float(budget[1:]), int(size[1:])


@pytest.mark.parametrize("experiment", sorted(JOBS))
def test_multirun_expands_to_the_published_grid(experiment):
    cfgs = [job.cfg for job in expand([f"experiment={experiment}"])]
    assert len(cfgs) == JOBS[experiment]
    assert all(run_dir_of(cfg).name == f"{RECIPE[experiment]}-r{cfg.model.r}-{cfg.point}" for cfg in cfgs)
    # iso-depth: every job has the same effective depth
    assert {cfg.model.l_eff for cfg in cfgs} == {20 if experiment in PAPER else 12}
    if experiment in PAPER:
        jobs = [(*point_cell(cfg.point), cfg.model.r) for cfg in cfgs]
        assert len(set(jobs)) == len(jobs) and set(jobs) == PUBLISHED[experiment]
        for cfg in cfgs:
            C, s = point_cell(cfg.point)
            m = cfg.model
            assert (cfg.budget.compute_flops, m.d_model) == (C, -(-64 * s // 128) * 128)
            assert (m.init, m.logit_softcap) == ("paper", 15.0)
            # r = 1 a plain 0-20-0 stack; r > 1 2 + 16/r x r + 2
            assert (m.n_prelude, m.n_rec, m.n_coda) == ((0, 20, 0) if m.r == 1 else (2, 16 // m.r, 2))
    else:
        points = Counter((cfg.budget.compute_flops, cfg.model.d_model) for cfg in cfgs)
        assert set(points.values()) == {4} and len(points) == JOBS[experiment] // 4
        assert Counter(cfg.model.r for cfg in cfgs) == {r: JOBS[experiment] // 4 for r in (1, 2, 4, 8)}
        assert all(cfg.model.n_rec * cfg.model.r == cfg.model.l_eff - 4 for cfg in cfgs)

    looped = [cfg.model for cfg in cfgs if cfg.model.r > 1]
    if experiment == "isodepth_tbptt":
        assert all(m.bptt_k == math.ceil(m.r / 2) and m.recipe == "tbptt" for m in looped)
    elif experiment == "isodepth_hyper":
        assert all(
            m.injection == "hyper" and m.options.get("hyper_lanes", 2) == 2 and m.recipe == "hyper" for m in looped
        )
    else:
        # the published concat injection at every scale: model=cpu's too, since MuonH refuses linear's zero W_s
        assert all(m.injection == "concat" and m.recipe == "baseline" for m in looped)


@pytest.mark.parametrize("experiment", PAPER)
def test_sweep_cli_json_lists_the_authors_points(experiment, repo_root):
    """`loopscale sweep experiment=... --json`: exactly the authors' (C, s, r) jobs, each once; the probes
    list no r = 1 job; steps = round(C / (F x 262,144))."""
    proc = run_cli(["sweep", f"experiment={experiment}", "--json"], cwd=repo_root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    jobs = [(*point_cell(row["point"]), row["r"]) for row in rows]
    assert len(jobs) == len(set(jobs)) == JOBS[experiment] and set(jobs) == PUBLISHED[experiment]
    assert (1 in {row["r"] for row in rows}) == (experiment == "isodepth")
    for row in rows:
        F = row["C"] / row["D"]
        assert row["steps"] == round(row["C_budget"] / (F * 262_144)) and row["D"] == row["steps"] * 262_144


def test_model_paper_r1_composes_to_the_plain_stack():
    """`model=paper model.r=1` is the published 0-20-0 stack; model.r=4 is 2-4-2 with the concat injection."""
    dense = to_train_config(compose(["model=paper", "model.r=1"])).model
    assert (dense.n_prelude, dense.n_rec, dense.n_coda, dense.injection, dense.l_eff) == (0, 20, 0, "passthrough", 20)
    looped = to_train_config(compose(["model=paper", "model.r=4"])).model
    assert (looped.n_prelude, looped.n_rec, looped.n_coda, looped.injection) == (2, 4, 2, "concat")
    cpu = to_train_config(compose(["model=cpu", "model.r=1"])).model  # the CPU grid keeps 2-8-2 at r = 1
    assert (cpu.n_prelude, cpu.n_rec, cpu.n_coda, cpu.init) == (2, 8, 2, "gpt2")


def test_sweep_cli_counts_the_published_grid(repo_root):
    proc = run_cli(["sweep", "experiment=isodepth", "--count"], cwd=repo_root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "116"


# Shrinks a job to one CPU step: one sequence of 128 tokens, a small vocabulary, a tiny validation set.
ONE_STEP = [
    "trainer=cpu",
    "model.seq_len=128",
    "budget.batch_size=1",
    "budget.mode=tokens",
    "budget.tokens=128",
    "data.vocab_size=512",
    "data.val_tokens=256",
    "trainer.progress=false",
]
# The paper grid's hub corpus (FineWeb-Edu) is out of reach offline, and its widths (384-2176 at L_eff = 20)
# are too big for a quick CPU step: these jobs run on the embedded Shakespeare corpus at width 128.
PAPER_ON_CPU = ["data=shakespeare", "point=C4.64e17-d128"]


def _first_and_last_job(experiment: str) -> list[list[str]]:
    jobs = sweep_overrides([f"experiment={experiment}"])
    return [jobs[0], jobs[-1]]  # r = 1 at the first point, r = 8 at the last point


@pytest.mark.parametrize("experiment", sorted(JOBS))
def test_first_step_of_each_experiment_trains(experiment, tmp_path, data_dir):
    """The first and last job of every experiment's grid (r = 1 and r = 8, so each recipe's looped path
    runs: linear injection, truncated backprop, hyper-connection lanes) trains one real step."""
    for job in _first_and_last_job(experiment):
        shrink = [*ONE_STEP, *(PAPER_ON_CPU if experiment in PAPER else [])]
        cfg = to_train_config(compose([*job, *shrink, f"runs_dir={tmp_path}", f"data.data_dir={data_dir}"]))
        record = run_training(cfg)
        assert read_record(run_dir_of(cfg))["status"] == "done"
        assert record["status"] == "done" and record["step"] == record["steps"] == 1, record
        assert math.isfinite(record["L"])
        assert record["depth"] == cfg.model.l_eff and record["r"] == cfg.model.r
        assert record["recipe"] == (RECIPE[experiment] if cfg.model.r > 1 else "baseline") == cfg.model.recipe
        if experiment == "isodepth_tbptt" and cfg.model.r > 1:
            assert record["bptt_k"] == math.ceil(cfg.model.r / 2)
        if experiment == "isodepth_hyper" and cfg.model.r > 1:
            assert record["injection"] == "hyper"


@pytest.mark.slow
@pytest.mark.system  # the pipeline as a user runs it: loopscale-train -m, collect, fit
def test_local_sweep_collects_into_a_table_the_fitter_accepts(tmp_path, data_dir, repo_root):
    """12 tiny isodepth_cpu runs (r = 1, 2, 4 at four budget/width points, 9-36 steps each) in one process
    with Hydra's basic launcher, collected, then fitted by `loopscale fit` (6 parameters need 12 rows)."""
    sweep = [
        "-m",
        "experiment=isodepth_cpu",
        "hydra/launcher=basic",
        "model.r=1,2,4",
        "point=C2e10-d64,C4e10-d64,C8e10-d64,C8e10-d96",
        "trainer.progress=false",
        "data.val_tokens=2048",
        f"runs_dir={tmp_path / 'runs'}",
        f"data.data_dir={data_dir}",
    ]
    proc = run_loopscale(sweep, cwd=tmp_path, timeout_s=900, module="loopscale.train.entry")
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep_dir = tmp_path / "runs" / "isodepth_cpu"
    collect = run_loopscale(["collect", sweep_dir], cwd=repo_root, timeout_s=120)
    assert collect.returncode == 0, collect.stderr[-3000:]
    assert "12 finished runs" in collect.stdout
    fit = run_loopscale(
        ["fit", sweep_dir / "runs.csv", "--no-profile", "--out", tmp_path / "fit.json"], cwd=repo_root, timeout_s=300
    )
    assert fit.returncode == 0, fit.stderr[-3000:]
    result = json.loads((tmp_path / "fit.json").read_text())
    assert result["n_rows"] == 12 and "phi" in json.dumps(result)
