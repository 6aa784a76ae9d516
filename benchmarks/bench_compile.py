"""Compiled CPU training with the compiled-graph cache against eager, on (a reduced) demo grid: training tokens/s
with the compile included, the cost of a cold and of a cached compile, and what two more seeds cost.

    .venv/bin/python benchmarks/bench_compile.py [--points C2.5e11-d16 C2.5e11-d24] [--r 4] [--repeats 2] \
        [--out .bench/compile]

Each measurement is one `loopscale-train -m experiment=isodepth_cpu_demo ... hydra/launcher=local_pool` (two
single-thread worker processes, as the demo trains), timed from start to exit, in a runs folder of its own:

    eager       trainer.compile=false, seed 0
    cold        trainer.compile=model, seed 0, an empty graph cache ($LOOPSCALE_CACHE of its own)
    warm        trainer.compile=model, seed 0, the cache `cold` filled
    seeds       trainer.compile=auto, seeds 0, 1, 2, the cache `cold` filled (the sweep compiles what pays)
    seeds-cold  trainer.compile=auto, seeds 0, 1, 2, an empty cache (the first seed of each shape compiles)
    before      with `--baseline DIR`: the code before issue 37 (`git archive f644981 | tar -x -C DIR`) trains the
                same grid eagerly, as it did then ("today's" of the issue's 1.4x target), alternated with eager and warm

eager and warm are alternated `--repeats` times (a shared machine's drift hits both) and the best of each kept.
On a loaded machine the wall times of whole sweeps move with the other jobs' load; `--interleaved N` measures
instead, per shape in one process, the first compiled step (cold cache, then warm) and N eager and N compiled
training steps interleaved, and predicts the jobs' training time both ways from their step counts; with
`--baseline DIR` a third side in the same process: the same eager model stepped
by that code's MuonH (the model's code did not change).
Printed: wall seconds, training tokens/s (every job's tokens over the wall time: start-up, compile, validation
and records included), warm / eager, seeds / eager, and each shape's first compiled step, cold and from the cache
(`first_steps`); with the load average before and after. The demo grid in full:
`--points C2.5e11_3.54e11-d16 C2.5e11_3.54e11_5e11-d24 C2.5e11_3.54e11_5e11-d32 C2.5e11_3.54e11_5e11-d48 --r 1 2 4 8`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from loopscale.launch.sweep import expand
from loopscale.train.job_plan import plan_job

REPO_ROOT = Path(__file__).resolve().parents[1]
TRAIN = str(Path(sys.executable).parent / "loopscale-train")


def overrides(args, compile_mode, seeds: str, runs: Path) -> list[str]:
    return [
        "experiment=isodepth_cpu_demo",
        f"point={','.join(args.points)}",
        f"model.r={','.join(map(str, args.r))}",
        f"seed={seeds}",
        f"trainer.compile={compile_mode}",
        f"runs_dir={runs}",
        "hydra/launcher=local_pool",
        f"hydra.launcher.workers={args.workers}",
        f"hydra.sweep.dir={runs}/multirun",
    ]


def timed_run(args, name: str, compile_mode, seeds: str, cache: Path, tree: Path | None = None) -> float:
    """One sweep from launch to exit; with `tree`, the loopscale in that source tree trains it (the code before
    a change: its own package first on the path, run from its folder)."""
    runs = args.out / "runs" / name
    shutil.rmtree(runs, ignore_errors=True)
    env = {**os.environ, "LOOPSCALE_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
    launcher = [TRAIN]
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
        launcher = [sys.executable, "-c", BASELINE_TRAIN]
    started = time.perf_counter()
    done = subprocess.run(
        [*launcher, "-m", *overrides(args, compile_mode, seeds, runs)], env=env, cwd=tree or REPO_ROOT
    )
    wall_s = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{name}: loopscale-train exited {done.returncode}")
    return wall_s


# the entry point as the code before this change named it (pyproject's loopscale-train at f644981)
BASELINE_TRAIN = "import sys; from loopscale.train.entry import main; sys.argv[0] = 'loopscale-train'; main()"


def baseline_tree(tree: Path) -> Path:
    """A `git archive` of the code before this change, made importable without an install: its sweep designs
    (the top-level sweeps/) are the package loopscale.sweeps only once installed, so they are copied there."""
    tree = tree.resolve()
    if not (tree / "loopscale" / "train" / "entry.py").is_file():
        raise SystemExit(f"--baseline {tree}: not a loopscale source tree of that time (no loopscale/train/entry.py)")
    if not (tree / "loopscale" / "sweeps").exists():
        shutil.copytree(tree / "sweeps", tree / "loopscale" / "sweeps")
    return tree


STEPS = """
import dataclasses, importlib.util, json, statistics, sys, time, torch
from loopscale.config.schema import with_vocab
from loopscale.launch.sweep import expand
from loopscale.train.job_plan import plan_job
from loopscale.train.lightning_module import LoopedLM
from loopscale.train.optim.groups import MATRIX, recipe_param_groups
from loopscale.train.plan import plan_training
torch.set_num_threads(1)
n, old_muonh = int(sys.argv[1]), sys.argv[2]
cfg = expand(sys.argv[3:])[0].cfg
cfg = with_vocab(cfg, cfg.data.vocab_size)  # the model training builds (the tokenizer's vocabulary)
F, steps = plan_job(cfg).run.F, plan_job(cfg).steps
x = torch.randint(0, cfg.model.vocab_size, (cfg.budget.batch_size, cfg.model.seq_len))
y = torch.randint(0, cfg.model.vocab_size, x.shape)  # not x itself: an aliased input is another graph
sides = {}
for side in ("compiled", "eager") + (("baseline",) if old_muonh else ()):
    torch.manual_seed(0)
    trainer = type(cfg.trainer)(compile="model" if side == "compiled" else False)
    plan = plan_training(dataclasses.replace(cfg, trainer=trainer), plan_job(cfg).run)  # a forked job: its parent
    module = LoopedLM(cfg.model, cfg.optim, trainer, plan)
    optimizer = module.configure_optimizers()["optimizer"]
    if side == "baseline":  # the same model eagerly with the MuonH before this change (its file, loaded by path)
        spec = importlib.util.spec_from_file_location("old_muonh", old_muonh)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        groups = [dict(g) for g in optimizer.param_groups]
        for g in groups:
            g.pop("arithmetic", None)
        optimizer = old.MuonH(groups)
    sides[side] = (module.model, optimizer)
def step(side):
    model, opt = sides[side]
    t0 = time.perf_counter()
    model(x, y).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t0
first = step("compiled")  # the compile (from the cache when it holds the graphs) and the first step
order = [side for side in sides if side != "compiled"]
for side in order:
    step(side)
order = ["compiled"] + order
times = {side: [] for side in sides}
for i in range(2 * n):
    for side in (order if i % 2 == 0 else order[::-1]):
        times[side].append(step(side))
print(json.dumps(dict(first_s=first, steps=steps, **{s + "_s": statistics.median(t[2:]) for s, t in times.items()})))
"""


FIRST_STEP = """
import sys, time, torch
from loopscale.launch.sweep import expand
from loopscale.model.transformer import LoopedTransformer
from loopscale.train.compiling import compile_model
torch.set_num_threads(1)
from loopscale.config.schema import with_vocab
cfg = expand(sys.argv[1:])[0].cfg
cfg = with_vocab(cfg, cfg.data.vocab_size)  # the model training builds (the tokenizer's vocabulary)
model = LoopedTransformer(cfg.model)
x = torch.randint(0, cfg.model.vocab_size, (cfg.budget.batch_size, cfg.model.seq_len))
y = torch.randint(0, cfg.model.vocab_size, x.shape)  # not x itself: an aliased input is another graph
started = time.perf_counter()
compile_model(model, "model")
model(x, y).backward()
print(time.perf_counter() - started)
"""


def first_step_s(point: str, r: int, cache: Path) -> float:
    """Seconds of the first compiled training step (forward + backward) of one shape in a new process: the
    compile, from `cache` (its graphs there: a cache hit)."""
    env = {**os.environ, "LOOPSCALE_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-c", FIRST_STEP, "experiment=isodepth_cpu_demo", f"point={point}", f"model.r={r}"]
    out = subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def interleaved(point: str, r: int, cache: Path, n: int, baseline: Path | None = None) -> dict:
    """One shape in a new process: the first compiled step from `cache` (compile included), then compiled and
    eager training steps (forward + backward + MuonH) interleaved, their medians, and the job's steps. With
    `baseline` (a source tree of loopscale before this change): a third side, the same eager model stepped by
    that tree's MuonH (the model's code is the same), interleaved too."""
    import json

    env = {**os.environ, "LOOPSCALE_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
    old_muonh = str(baseline / "loopscale/train/optim/muonh.py") if baseline else ""
    shape = ["experiment=isodepth_cpu_demo", f"point={point}", f"model.r={r}"]
    cmd = [sys.executable, "-c", STEPS, str(n), old_muonh, *shape]
    out = subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def steps_table(args) -> None:
    """--interleaved: per shape, a cold then a warm process (module docstring); the jobs' predicted training
    time: eager (this code; with --baseline, the code before this change) against compiled from the cache (job
    steps x step time, + the warm first step)."""
    cache = args.out / "cache-interleaved"
    if not args.reuse_cache:
        shutil.rmtree(cache, ignore_errors=True)
    print(
        f"{'shape':>28} {'cold 1st s':>10} {'warm 1st s':>10} {'base ms':>8} {'eager ms':>9} {'compiled ms':>11} "
        f"{'steps':>6}"
    )
    total = {"base": 0.0, "eager": 0.0, "compiled": 0.0}
    for point in args.points:
        for r in args.r:
            runs = [interleaved(point, r, cache, args.interleaved, args.baseline) for _ in range(2)]
            cold, warm = runs
            ms = {side: 1e3 * min(run.get(f"{side}_s", float("nan")) for run in runs) for side in total}
            ms["base"] = 1e3 * min(run.get("baseline_s", float("nan")) for run in runs)
            total["base"] += warm["steps"] * ms["base"] / 1e3
            total["eager"] += warm["steps"] * ms["eager"] / 1e3
            total["compiled"] += warm["first_s"] + (warm["steps"] - 1) * ms["compiled"] / 1e3
            print(
                f"{point + ' r=' + str(r):>28} {cold['first_s']:10.1f} {warm['first_s']:10.1f} {ms['base']:8.1f} "
                f"{ms['eager']:9.1f} {ms['compiled']:11.1f} {warm['steps']:6d}",
                flush=True,
            )
    print(
        f"training steps of these jobs: baseline eager {total['base']:.0f} s, eager {total['eager']:.0f} s, "
        f"compiled from the cache {total['compiled']:.0f} s (first steps included): tokens/s "
        f"{total['base'] / total['compiled']:.2f}x the baseline's, {total['eager'] / total['compiled']:.2f}x "
        f"this code's eager; load average {os.getloadavg()[0]:.2f}"
    )


def tokens_of(args, seeds: str) -> int:
    jobs = expand(overrides(args, False, seeds, args.out / "runs" / "plan")[:5])
    return sum(plan_job(job.cfg).tokens for job in jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", nargs="+", default=["C2.5e11-d16", "C2.5e11-d24"])
    parser.add_argument("--r", type=int, nargs="+", default=[4])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(".bench/compile"))
    parser.add_argument("--skip-seeds", action="store_true")
    parser.add_argument("--skip-seeds-cold", action="store_true")
    parser.add_argument("--reuse-cache", action="store_true", help="keep --out's warm cache (no cold run)")
    parser.add_argument("--first-steps-only", action="store_true", help="only each shape's first step, cold and hit")
    parser.add_argument("--skip-first-steps", action="store_true", help="not each shape's first step, cold and hit")
    parser.add_argument(
        "--interleaved",
        type=int,
        default=0,
        metavar="N",
        help="instead: per shape, N eager and N compiled steps interleaved in one process (cold, then warm cache)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a source tree of loopscale before this change (`git archive f644981 | tar -x -C DIR`): with "
        "--interleaved its MuonH steps the same eager model as a third side; else its whole sweep runs eagerly "
        "beside eager and warm (alternated), and the tokens/s are also given against it",
    )
    args = parser.parse_args()
    args.out = args.out.resolve()
    if args.interleaved:
        return steps_table(args)
    if args.first_steps_only:
        return first_steps(args)
    warm_cache, cold_cache = args.out / "cache-warm", args.out / "cache-cold"
    one, three = tokens_of(args, "0"), tokens_of(args, "0,1,2")
    print(f"grid: points {args.points} x r {args.r}, {args.workers} workers; load average {os.getloadavg()[0]:.2f}")
    wall = {}
    if not args.reuse_cache:
        shutil.rmtree(warm_cache, ignore_errors=True)
        wall["cold"] = timed_run(args, "cold", "model", "0", warm_cache)
    eager, warm, before = [], [], []
    tree = baseline_tree(args.baseline) if args.baseline else None
    for i in range(args.repeats):
        if tree:
            before.append(timed_run(args, f"before{i}", False, "0", args.out / "cache-before", tree))
        eager.append(timed_run(args, f"eager{i}", False, "0", warm_cache))
        warm.append(timed_run(args, f"warm{i}", "model", "0", warm_cache))
    wall["eager"], wall["warm"] = min(eager), min(warm)
    if tree:
        wall["before"] = min(before)
    if not args.skip_seeds:
        wall["seeds"] = timed_run(args, "seeds", "auto", "0,1,2", warm_cache)
    if not args.skip_seeds and not args.skip_seeds_cold:
        shutil.rmtree(cold_cache, ignore_errors=True)
        wall["seeds-cold"] = timed_run(args, "seeds-cold", "auto", "0,1,2", cold_cache)
    print(f"{'run':>11} {'wall s':>8} {'tokens/s':>9} {'vs eager':>9}")
    for name, seconds in wall.items():
        tokens = three if name.startswith("seeds") else one
        speed = tokens / seconds
        ratio = (
            f"{seconds / wall['eager']:.2f}x wall"
            if name.startswith("seeds")
            else f"{speed * wall['eager'] / one:.2f}x"
        )
        against = f" {speed * wall['before'] / one:.2f}x before" if tree and not name.startswith("seeds") else ""
        print(f"{name:>11} {seconds:8.1f} {speed:9.0f} {ratio:>9}{against}")
    print(f"eager runs {[round(s, 1) for s in eager]}, warm runs {[round(s, 1) for s in warm]}")
    if tree:
        print(f"before ({tree}, eager) runs {[round(s, 1) for s in before]}")
    if not args.skip_first_steps:
        first_steps(args)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def first_steps(args) -> None:
    """Per shape, the first compiled step (forward + backward, compile included) in a new process twice against one
    empty cache of its own: cold, then a cache hit. Its own cache, not the sweeps': this script's step is not a
    training step (no Lightning, no optimizer, inputs of its own), its graphs are not the training's and the
    sweeps' cache would only ever miss (it did: 24-37 s "from the cache" on 2026-12-04, the cold compile)."""
    cache = args.out / "cache-first-step"
    for point in args.points:
        for r in args.r:
            shutil.rmtree(cache, ignore_errors=True)
            cold, hit = first_step_s(point, r, cache), first_step_s(point, r, cache)
            print(f"{point} r={r}: first compiled step {cold:.1f} s cold, {hit:.1f} s from the cache", flush=True)


if __name__ == "__main__":
    main()
