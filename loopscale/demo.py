"""The main job, end to end on this machine: `loopscale demo` (what `make demo` runs).

    prepare the default corpus -> train the isodepth_cpu sweep (32 runs, r in {1, 2, 4, 8}) in this process
    -> collect runs.csv -> fit the looped law with a bootstrap, its phi profile and a held-out budget, plus
    the looped-free diagnostic -> figures -> report.md, all under one output directory (runs/demo/).

Every stage reuses what an earlier call finished: finished runs are skipped (their run.json says done), an
interrupted run resumes from its checkpoint. Nothing here computes a result of its own: it calls the same
functions as `loopscale-train`, `loopscale collect`, `loopscale fit`, `loopscale plot` and `loopscale report`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

EXPERIMENT = "isodepth_cpu"


@dataclass
class DemoSettings:
    out_dir: Path = Path("runs/demo")
    overrides: list[str] = field(default_factory=list)  # extra Hydra overrides, e.g. model.r=1,2 point=...
    n_bootstrap: int = 200
    seed: int = 0
    data_dir: str | None = None  # default: the data config's (data/cache)


@dataclass
class DemoOutputs:
    runs_table: Path
    fit: Path
    fit_free: Path | None
    figures: list[Path]
    report: Path
    n_runs: int
    n_trained: int
    wall_time_s: float


def _quiet_lightning() -> None:
    # Each run's own INFO lines (GPU available, etc.) would bury the demo's progress. Lightning sets its
    # loggers' levels when imported, so import it first.
    import warnings

    import lightning  # noqa: F401

    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "loopscale.train"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")


def run_demo(settings: DemoSettings, console=None) -> DemoOutputs:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    from loopscale import plots
    from loopscale.atomic import atomic_path
    from loopscale.fit import fit_table
    from loopscale.records import collect, is_finished, runs_table
    from loopscale.report import write_report
    from loopscale.shards import prepare
    from loopscale.sweep import expand
    from loopscale.tables import canonical_table
    from loopscale.train import run_dir_of, run_training

    console = console or Console()
    started = time.perf_counter()
    out = Path(settings.out_dir)
    runs_dir = out / "runs"
    overrides = [f"experiment={EXPERIMENT}", f"runs_dir={runs_dir}", "trainer.progress=false",
                 *([f"data.data_dir={settings.data_dir}"] if settings.data_dir else []), *settings.overrides]
    jobs = expand(overrides)
    console.rule(f"[bold]loopscale demo[/]: {len(jobs)} runs of experiment={EXPERIMENT} -> {out}")

    console.print("[1/5] preparing the default corpus (cached after the first call)")
    prepare(jobs[0].cfg.data, progress=True)

    console.print(f"[2/5] training {len(jobs)} runs (finished runs are reused)")
    _quiet_lightning()
    n_trained = 0
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn()]
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("runs", total=len(jobs))
        for job in jobs:
            cfg = job.cfg
            progress.update(task, description=f"{cfg.run_name:<28}")
            if not is_finished(run_dir_of(cfg)):
                record = run_training(cfg)
                if record["status"] != "done":  # e.g. running elsewhere (another demo holds its lock)
                    progress.console.print(f"  {cfg.run_name:<28} {record['status']}: {record.get('reason')}")
                    progress.advance(task)
                    continue
                n_trained += 1
                progress.console.print(f"  {cfg.run_name:<28} L = {record['L']:.4f}  "
                                       f"({record['steps']} steps, {record['wall_time_s']:.1f} s)")
            progress.advance(task)

    console.print("[3/5] collecting the runs table")
    sweep_dir = runs_dir / jobs[0].cfg.sweep
    rows, problems = collect(sweep_dir)
    table = runs_table(rows)
    runs_csv = out / "runs.csv"
    with atomic_path(runs_csv) as tmp:
        table.to_csv(tmp, index=False)

    console.print(f"[4/5] fitting the looped law ({settings.n_bootstrap} bootstrap replicates, phi profile, "
                  "largest budget held out)")
    looped_table = canonical_table(table, "looped")
    try:
        fit = fit_table(looped_table, law="looped", seed=settings.seed, n_bootstrap=settings.n_bootstrap,
                        holdout=True)
    except ValueError as err:  # a reduced demo may have too few runs outside the largest budget
        console.print(f"  no holdout check: {err}")
        fit = fit_table(looped_table, law="looped", seed=settings.seed, n_bootstrap=settings.n_bootstrap)
    fit.input = {"path": str(runs_csv), "n_rows": len(table)}
    fit_path = out / "fit.json"
    with atomic_path(fit_path) as tmp:
        fit.write_json(tmp)
    fit_free_path = None
    try:
        free = fit_table(canonical_table(table, "looped-free"), law="looped-free", seed=settings.seed)
        fit_free_path = out / "fit_free.json"
        with atomic_path(fit_free_path) as tmp:
            free.write_json(tmp)
    except ValueError as err:  # e.g. no r = 1 runs in a reduced demo: the diagnostic is skipped, not faked
        console.print(f"  looped-free diagnostic skipped: {err}")
        free = None

    console.print("[5/5] figures and report")
    figures = plots.save_all(table, fit, out / "figures", free=free)
    report = write_report(table, fit, figures, out / "report.md", problems=problems,
                          title="loopscale demo: iso-depth looped transformers on Shakespeare (CPU)")
    wall = time.perf_counter() - started
    phi = fit.params["phi"]
    ci = (fit.ci95 or {}).get("phi")
    ci_text = f" (95% CI {ci[0]:.2f} to {ci[1]:.2f})" if ci else ""
    console.rule("[bold green]done")
    console.print(f"phi = {phi:.3f}{ci_text} from {len(table)} runs; {n_trained} trained now, "
                  f"{wall / 60:.1f} min in all")
    console.print(f"report:  {report}\nfit:     {fit_path}\ntable:   {runs_csv}\nfigures: {out / 'figures'}")
    return DemoOutputs(runs_table=runs_csv, fit=fit_path, fit_free=fit_free_path, figures=figures,
                       report=report, n_runs=len(table), n_trained=n_trained, wall_time_s=wall)
