"""The main job, end to end on this machine: `loopscale demo` (what `make demo` runs).

    prepare the default corpus -> train the isodepth_cpu_demo sweep (16 forked jobs: r in {1, 2, 4, 8} x 4
    widths, 2-3 budgets each: 44 points, at two seeds: `--seeds`) on a pool of worker processes
    (loopscale/launch/local_workers.py) -> collect runs.csv -> fit looped-logn, phi at N_ref (or the looped law,
    r^phi: `--law`) with a bootstrap, its phi profile and a held-out budget, plus the looped-free diagnostic ->
    `loopscale validate` (held-out budgets and r, the rival forms) -> figures -> report.md -> demo.json (stage
    times, training FLOP/s, the conditioning numbers of
    loopscale/analysis/conditioning.py, validate's verdict), all under one output directory (runs/demo/).

Every stage reuses what an earlier call finished: finished runs are skipped (their run.json says done), an
interrupted run resumes from its checkpoint. Nothing here computes a result of its own: it calls the same
functions as `loopscale-train`, `loopscale collect`, `loopscale fit`, `loopscale plot` and `loopscale report`.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from loopscale.analysis.conditioning import check, conditioning
from loopscale.analysis.report import write_report
from loopscale.atomic import atomic_path, json_text
from loopscale.config.schema import with_vocab
from loopscale.data.run_data import open_run_data
from loopscale.errors import InputError
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.looped import Looped
from loopscale.fit.laws.looped_logn import LoopedLogN
from loopscale.fit.result import file_sha256
from loopscale.fit.runs_table import PARENT_COLUMN, canonical_table, is_forked
from loopscale.fit.validation.flags import AICC_FLAG, delta_aicc, full_result
from loopscale.fit.validation.inputs import point_means
from loopscale.fit.validation.run import validate
from loopscale.fit.verdict import PHI_CI_WIDTH_MAX, interval_of
from loopscale.launch.compile_order import schedule
from loopscale.launch.local_workers import train_in_workers
from loopscale.launch.sweep import expand
from loopscale.plots.registry import save_all
from loopscale.train.collect import collect, curves_table, runs_table, write_runs_table
from loopscale.train.job_plan import plan_job
from loopscale.train.plan import run_dir_of
from loopscale.train.run_json import ForkedJob, RunRecord, is_finished

EXPERIMENT = "isodepth_cpu_demo"
# the laws the demo fits: r^(phi + psi ln(N_c / N_ref)), phi read at N_ref, the form the demo's runs prefer (AICc
# -23.5 against r^phi at one seed; docs/results.md, "phi runs with the width"), and r^phi (the published question:
# one phi for every size), which validate fits beside it as a rival
DEMO_LAWS = (LoopedLogN.name, Looped.name)
# Two seeds of every point, each read on the whole val split (sweeps/experiment/isodepth_cpu_demo.yaml): the most
# the 15 minutes of a 2-core machine train (12.4 min of demo here). `loopscale power` on the five-seed pilot gives
# them a median phi width of 0.171 (38% of sweeps within the verdict's 0.16) and names 3 seeds (0.153, 57%) the
# cheapest design expected within it: `make demo-measured` (docs/results.md, "A demo that measures phi").
DEMO_SEEDS = 2


@dataclass
class DemoSettings:
    out_dir: Path = Path("runs/demo")
    overrides: list[str] = field(default_factory=list)  # extra Hydra overrides, e.g. model.r=1,2 point=...
    n_bootstrap: int = 200
    seed: int = 0
    data_dir: str | None = None  # default: the data config's (data/cache)
    workers: int = 0  # training processes; 0: min(CPUs, 2)
    threads_per_worker: int = 0  # torch threads per process; 0: 1
    seeds: int = DEMO_SEEDS  # training seeds of every point: seed=0..seeds-1 (the seed sigma the fit weighs by)
    law: str = LoopedLogN.name  # the law fitted: one of DEMO_LAWS


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
    summary: Path  # demo.json: stage times, training FLOP/s, conditioning numbers


def _summary(cfg, record: RunRecord | ForkedJob | None) -> str:
    points = record.branches if isinstance(record, ForkedJob) else [record]
    losses = [p.L for p in points if p is not None and p.status == "done"]
    span = (
        f"L = {min(losses):.4f}..{max(losses):.4f}"
        if len(losses) > 1
        else f"L = {losses[0]:.4f}"
        if losses
        else "no finished point"
    )
    return f"{cfg.run_name:<22} {len(losses)} point{'s' * (len(losses) != 1)}, {span}"


def job_line(cfg, record: RunRecord | ForkedJob | None, wall_s: float) -> str:
    """The console's line for a job the pool handed back: its points' losses and wall time, or the status and reason
    of a run that did not train here (e.g. one another process holds). A forked job with branches is summed up by
    its branches; one without (its parent locked elsewhere, or failed before its first fork) by its parent."""
    shown = record.parent if isinstance(record, ForkedJob) and not record.branches else record
    if isinstance(shown, RunRecord) and shown.status not in ("done", None):
        return f"{cfg.run_name:<22} {shown.status}: {shown.reason}"
    return f"{_summary(cfg, record)}  ({wall_s:.0f} s)"


def check_request(settings: DemoSettings) -> None:
    """InputError, before anything is prepared, for what the demo would silently get wrong: `experiment=X` among
    its overrides (outvoted by its own experiment: the command that runs X is named instead), fewer than one seed,
    or a `seed=` override beside --seeds K (which sets seed=0..K-1: outvoted or doubled)."""
    if settings.seeds < 1:
        raise InputError(f"--seeds {settings.seeds}: the training seeds of every point, 1 or more")
    for override in settings.overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+~")
        if key == "experiment" or key.startswith("experiment@"):
            raise InputError(
                f"{override}: the demo trains experiment={EXPERIMENT} only; for your own experiment run "
                f"`loopscale-train -m experiment={value or 'X'} hydra/launcher=local_pool`, then "
                "`loopscale collect`, `loopscale fit` and `loopscale report` (docs/operations.md)"
            )
        if key == "seed" and settings.seeds > 1:
            raise InputError(
                f"{override}: --seeds {settings.seeds} sets the training seeds (seed=0..{settings.seeds - 1}); give one"
            )


def _overrides(settings: DemoSettings, runs_dir: Path, threads: int) -> list[str]:
    data = [f"data.data_dir={settings.data_dir}"] if settings.data_dir else []
    progress = ["trainer.progress=false", f"trainer.num_threads={threads}"]
    seeds = [f"seed={','.join(str(s) for s in range(settings.seeds))}"] if settings.seeds > 1 else []
    return [f"experiment={EXPERIMENT}", f"runs_dir={runs_dir}", *progress, *data, *seeds, *settings.overrides]


@contextmanager
def _timed(stage_s: dict[str, float], name: str):
    t0 = time.perf_counter()
    yield
    stage_s[name] = time.perf_counter() - t0


def run_demo(settings: DemoSettings, console=None) -> DemoOutputs:
    """Every stage of the module docstring, in order; returns where each output went."""
    check_request(settings)
    console = console or Console()
    started = time.perf_counter()
    stage_s: dict[str, float] = {}
    out = Path(settings.out_dir)
    workers = settings.workers or min(os.cpu_count() or 1, 2)
    threads = settings.threads_per_worker or 1
    jobs = expand(_overrides(settings, out / "runs", threads))
    console.rule(f"[bold]loopscale demo[/]: {len(jobs)} jobs of experiment={EXPERIMENT} -> {out}")
    console.print("[1/5] preparing the default corpus (cached after the first call)")
    with _timed(stage_s, "data"):
        vocab_size = open_run_data(jobs[0].cfg.data, jobs[0].cfg.model.seq_len, progress=True).vocab_size
    with _timed(stage_s, "train"):
        trained = _train(jobs, vocab_size, workers, threads, console)
    console.print("[3/5] collecting the runs table")
    with _timed(stage_s, "collect"):
        table, problems, runs_csv = _collect(out, out / "runs" / jobs[0].cfg.sweep)
        looped_table = canonical_table(table, settings.law)
    with _timed(stage_s, "fit"):
        fit, fit_path, free, fit_free_path = _fit(table, looped_table, runs_csv, out, settings, console)
    with _timed(stage_s, "validate"):
        validation = _validate(looped_table, fit, fit_path, out, workers, console)
    console.print("[5/5] figures and report")
    with _timed(stage_s, "figures_report"):
        figures = save_all(table, fit, out / "figures", free=free)
        title = "loopscale demo: iso-depth looped transformers on Shakespeare (CPU)"
        report = write_report(
            table, fit, figures, out / "report.md", problems=problems, title=title, validation=validation
        )
    summary = run_summary(settings, (workers, threads), len(jobs), trained, len(table), stage_s)
    summary["wall_time_s"] = time.perf_counter() - started
    summary["validation"] = None if validation is None else validation_summary(validation)
    demo_json = _write_summary(summary, looped_table, fit, out / "demo.json")
    _print_result(summary, fit, console)
    console.print(
        f"report:  {report}\nfit:     {fit_path}\ntable:   {runs_csv}\nfigures: {out / 'figures'}\n"
        f"summary: {demo_json}",
        markup=False,  # paths are data: "--out runs/[a]" is no tag
    )
    return DemoOutputs(
        runs_table=runs_csv,
        fit=fit_path,
        fit_free=fit_free_path,
        figures=figures,
        report=report,
        n_runs=len(table),
        n_trained=len(trained),
        wall_time_s=summary["wall_time_s"],
        summary=demo_json,
    )


def run_summary(
    settings: DemoSettings, pool: tuple[int, int], n_jobs: int, trained: list, n_runs: int, stage_s
) -> dict:
    """demo.json's record of the run (before its wall time, validation, verdict and conditioning): what was asked
    (the overrides, the law, the seeds), the pool (workers, threads each), the jobs and runs, the stage times and the
    training FLOPs (eq. C = F x D over the plans trained now; forked: the parent plus the cooldowns)."""
    train_flops = sum(job.flops for job in trained)
    return {
        "experiment": EXPERIMENT,
        "overrides": settings.overrides,
        **dict(law=settings.law, seeds=settings.seeds, n_jobs=n_jobs, n_trained=len(trained), n_runs=n_runs),
        **dict(workers=pool[0], threads_per_worker=pool[1], stage_s=stage_s),
        "train_flops": train_flops,
        "train_flops_per_s": train_flops / stage_s["train"] if trained else None,
    }


def _train(jobs, vocab_size: int, workers: int, threads: int, console) -> list:
    """Train the jobs not finished yet (a job is when each of its points is) on the worker pool, longest first
    (their training tokens: at these widths a CPU step's time follows its tokens more than its FLOPs); returns
    their plans."""
    plans = [plan_job(with_vocab(job.cfg, vocab_size)) for job in jobs]
    todo = [(job.cfg, p) for job, p in zip(jobs, plans) if not all(is_finished(run_dir_of(x.cfg)) for x in p.points)]
    # longest first (local_workers.py), each model's first job before its other seeds (the compiled-graph cache)
    cfgs = schedule([cfg for cfg, _ in todo], [p.tokens for _, p in todo])
    console.print(
        f"[2/5] training {len(todo)} of {len(jobs)} jobs on {workers} worker process"
        f"{'es' * (workers != 1)} x {threads} thread{'s' * (threads != 1)} (finished jobs are reused)"
    )
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, TimeRemainingColumn(), console=console) as progress:
        task = progress.add_task("jobs", total=len(todo))
        # a failed or diverged job stops the pool and the demo (local_workers.JobFailed), as it should:
        # a fit without it would be a fit of another grid
        for cfg, record, wall_s in train_in_workers(cfgs, workers, threads):
            progress.console.print(f"  {job_line(cfg, record, wall_s)}", markup=False)
            progress.advance(task)
    return [p for _, p in todo]


def _collect(out: Path, sweep_dir: Path):
    """`loopscale collect SWEEP_DIR --out OUT/runs.csv`: the table, the runs not done, the table's path."""
    rows, problems = collect(sweep_dir)
    if not rows:
        raise InputError(f"no finished runs to fit in {sweep_dir} ({len(problems)} not done)")
    table = runs_table(rows)
    runs_csv = out / "runs.csv"
    write_runs_table(table, problems, runs_csv, curves_table(rows))
    return table, problems, runs_csv


def _fit(table, looped_table, runs_csv: Path, out: Path, settings: DemoSettings, console):
    """`loopscale fit runs.csv --law LAW --bootstrap N --holdout-largest` on the law's canonical table and the
    looped-free diagnostic, each recorded with its input's path, hash and size; returns (fit, its path,
    free fit or None, its path)."""
    console.print(
        f"[4/5] fitting the {settings.law} law ({settings.n_bootstrap} bootstrap replicates by parent job, phi "
        "profile, largest budget held out)"
    )
    input_info = {"path": str(runs_csv), "sha256": file_sha256(runs_csv), "n_rows": len(table)}
    # a forked sweep's bootstrap resamples whole parent jobs (their branches share one draw of noise), as the
    # verdict's profile sums them (docs/design.md, "The verdict")
    cluster = PARENT_COLUMN if is_forked(looped_table) else None
    fit_args = dict(law=settings.law, seed=settings.seed, n_bootstrap=settings.n_bootstrap, cluster=cluster)
    try:
        fit = fit_table(looped_table, holdout=True, **fit_args)
    except ValueError as err:  # a reduced demo may have too few runs outside the largest budget
        console.print(f"  no holdout check: {err}", markup=False)
        fit = fit_table(looped_table, **fit_args)
    fit.input = dict(input_info, n_rows_used=len(looped_table))
    fit_path = out / "fit.json"
    with atomic_path(fit_path) as tmp:
        fit.write_json(tmp)
    try:
        free = fit_table(canonical_table(table, "looped-free"), law="looped-free", seed=settings.seed)
    except ValueError as err:  # e.g. no r = 1 runs in a reduced demo: the diagnostic is skipped, not faked
        console.print(f"  looped-free diagnostic skipped: {err}", markup=False)
        return fit, fit_path, None, None
    free.input = dict(input_info)
    free_path = out / "fit_free.json"
    with atomic_path(free_path) as tmp:
        free.write_json(tmp)
    return fit, fit_path, free, free_path


def _validate(looped_table, fit, fit_path: Path, out: Path, workers: int, console):
    """`loopscale validate fit.json --out validate.json`: does the law hold on unseen budgets and r, and does a rival
    form (a free k_r, an exponent running with ln r, a one-off price of looping, ...) describe the runs better? Its
    verdict goes in the report and demo.json (issue 54: the demo's answer to "does r^phi hold here?"). None when
    the table is too small for its folds (a reduced demo), said on the console."""
    console.print("  validating the law: held-out budgets and r, rival forms (loopscale validate)")
    try:
        table, repeats = point_means(looped_table)
        record = validate(table, fit, jobs=workers, conventions=False)
    except ValueError as err:  # InputError included: e.g. one budget, or one r > 1
        console.print(f"  validate skipped: {err}", markup=False)
        return None
    record.fit["json"] = str(fit_path)
    record = record.replace(tables=[str(fit.input["path"])], seed_repeats=repeats)
    with atomic_path(out / "validate.json") as tmp:
        record.write_json(tmp)
    console.print(f"  validate: {record.verdict['line']}", markup=False)
    return record


def validation_summary(record) -> dict:
    """validate's verdict line, its flags, and the rival form with the lowest AICc (its dAICc against the fit's
    law and its phi, when it has one): what demo.json and the console carry of validate.json."""
    forms = record["forms"]
    own = forms[0]["law"]  # the fit's law (first); its MSE twin is not a rival form
    scored = [(delta_aicc(record, i), i) for i, form in enumerate(forms) if form.get("law") not in (None, own)]
    scored = [(d, i) for d, i in scored if d is not None]
    best = None
    if scored:
        daicc, i = min(scored)
        phi = full_result(record, i)["params"].get("phi")
        best = {"form": forms[i]["label"], "law": forms[i]["law"], "daicc": daicc}
        best["phi"] = None if phi is None else float(phi)
    return {"line": record.verdict["line"], "flags": list(record.verdict["flags"]), "best_rival": best}


def _write_summary(summary: dict, looped_table, fit, path: Path) -> Path:
    """demo.json: the summary, the verdict (its one line and the interval it read: `verdict_summary`) and the
    conditioning numbers of the looped fit (on the table it was fitted to) with the targets it misses."""
    summary["verdict"] = verdict_summary(fit)
    numbers = conditioning(looped_table, fit)
    summary["conditioning"], summary["conditioning_misses"] = numbers.to_json(), check(numbers)
    with atomic_path(path) as tmp:
        tmp.write_text(json_text(summary) + "\n")
    return path


def verdict_summary(fit) -> dict:
    """The verdict of the demo's fit as one record: its line (what `fit`, report.md and fit.json say), phi, the
    interval the verdict read and its name, whether phi is measured, and the size phi is read at (looped-logn's
    N_ref; None for r^phi, whose phi is every size's)."""
    ci, source, _ = interval_of(fit, "phi", fit.profile_phi)
    cond = fit.conditioning
    return {
        "line": cond.verdict if cond else None,
        "measured": bool(cond and cond.measured),
        "phi": float(fit.params["phi"]),
        "interval": ci,
        "interval_name": source,
        "N_ref": float(fit.params["N_ref"]) if "N_ref" in fit.params else None,
    }


def readme_sentence(summary: dict) -> str:
    """The README's sentence about the demo, from its demo.json (tests/unit/test_readme_demo.py holds the README
    to docs/demo_summary.json, the demo.json of the run the README quotes): the wall time, phi, the verdict and
    the interval it read, or the verdict's own reason when that interval is not closed."""
    v = summary["verdict"]
    word = "phi measured" if v["measured"] else "not measured"
    minutes = summary["wall_time_s"] / 60
    at = f" at N_ref = {v['N_ref']:.2g}" if v.get("N_ref") else ""
    head = f'Measured on 2 CPU cores ({minutes:.1f} min): **phi = {v["phi"]:.3f}{at}**, verdict **"{word}"**'
    if not v["interval"] or None in v["interval"]:  # the verdict's own reason, as its line gives it
        return f"{head}: {v['line'].removeprefix(word + ': ')}."
    lo, hi = v["interval"]
    return (
        f"{head}: the 95% {v['interval_name']} interval [{lo:.3f}, {hi:.3f}] is {hi - lo:.3f} wide; the "
        f"published recipes need <= {PHI_CI_WIDTH_MAX:.2f}."
    )


def _print_result(summary: dict, fit, console) -> None:
    v = summary["verdict"]
    console.rule("[bold green]done")
    at = f" at N_ref = {v['N_ref']:.2g} ({summary['law']})" if v.get("N_ref") else ""
    console.print(
        f"phi = {v['phi']:.3f}{at} from {summary['n_runs']} runs; {summary['n_trained']} jobs trained now, "
        f"{summary['wall_time_s'] / 60:.1f} min in all"
    )
    console.print(f"verdict: {v['line']}", markup=False)
    console.print(f"README: {readme_sentence(summary)}", markup=False)
    checked = summary.get("validation")
    if checked:
        console.print(f"validate: {checked['line']}", markup=False)
        best = checked["best_rival"]
        if best and best["daicc"] < AICC_FLAG:  # validate's own rule: below it a form is clearly better
            phi = "" if best["phi"] is None else f", phi = {best['phi']:.3f}"
            console.print(
                f"  the runs prefer {best['form']} (AICc {best['daicc']:+.1f}{phi}): validate.json", markup=False
            )
            for flag in (f for f in checked["flags"] if f.startswith(f"{best['form']}: ")):  # what its win says
                console.print(f"  FLAG: {flag}", markup=False)
    misses = summary["conditioning_misses"]
    if misses:
        console.print("[yellow]conditioning diagnostics missed:[/]\n  " + escape("\n  ".join(misses)))
    else:
        console.print(
            "[green]conditioning: every target met[/] (phi interval, E, basins, holdout, iso-FLOP minima, collapse)"
        )
