"""The first-GPU-run check: one prepared command (<= 6 min on one H100/H200) that says whether the published
sweep will fit, train at the expected speed, stay compiled and survive a kill, by running production itself.

    python benchmarks/gpu_check.py --out gpu_check.json             # on the GPU node (docs/operations.md)
    python benchmarks/gpu_check.py --smoke --out smoke.json         # tiny sizes on CPU (in the test suite)

Offline: the data is a synthetic packed set in the published format (rows of 2049 ids < 32,001, written
here), so nothing is downloaded and no corpus package is needed. Sections, each written to --out as soon as
it ends (a kill at a command's time limit keeps what was done):

  device      the card, its bf16 peak and memory, torch / Python versions; an unknown card fails
  grid        every job of the three published grids (baseline, tbptt, hyper: 308) planned for this card:
              its device batch (budget.device_batch=auto) x accumulation = 262,144 tokens per step, and its
              predicted peak (loopscale/model/memory.py) within the card's usable memory; one that does not fit fails
  production  the heaviest grid point of each device-batch class (s16 hyper r8 at 32, s28 hyper r8 at 16,
              s34 r1 at 8), each a real `loopscale-train` run in its own process: trainer=gpu (bf16, compiled
              as configured), MuonH, gradient accumulation, through Lightning; measured peak memory against the
              model (within 15%), tokens/s and MFU (accounting F and causal F) once compiled, compiled graphs,
              graph breaks and recompile-limit hits (an eager fall back fails)
  resume      a MuonH run on packed rows killed at step 7, resumed from its step-5 checkpoint, against the same
              run uninterrupted (runs before production, whose points take the time left of --budget-s)
Exit status 0 when every section passed its checks.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from loopscale.config.dirs import compose  # noqa: E402
from loopscale.model.memory import CARD_MEMORY_MIB, GIB, estimate_memory, usable_memory  # noqa: E402
from loopscale.train.mfu import peak_flops  # noqa: E402

GRIDS = ("isodepth", "isodepth_tbptt", "isodepth_hyper")
STEP_TOKENS = 262_144
# (name, experiment, point, r): the heaviest published point of each device-batch class (32, 16, 8)
POINTS = (
    ("s16-hyper-r8", "isodepth_hyper", "C2.15e18-s16", 8),
    ("s28-hyper-r8", "isodepth_hyper", "C2.15e19-s28", 8),
    ("s34-r1", "isodepth", "C2.15e19-s34", 1),
)
TRAIN_STEPS = 4  # the first compiles; tokens/s and MFU: the median of steps 3 and 4 (step 2 is the first timed)
MEMORY_TOLERANCE = 0.15
# smoke: the published layout at a CPU size (L_eff = 20, p = c = 2), bf16 autocast, Dynamo without code generation
SMOKE = (
    "model.d_model=64",
    "model.head_dim=16",
    "model.seq_len=32",
    "trainer.accelerator=cpu",
    "trainer.compile_backend=aot_eager",
    "budget.batch_size=8",
    "budget.device_batch=4",
    "data.vocab_size=512",
)


class Check:
    """One run's settings: smoke or not, where it writes, the synthetic data, the card it plans for."""

    def __init__(self, smoke: bool, workdir: Path):
        self.smoke, self.workdir = smoke, workdir
        self.cuda = torch.cuda.is_available() and not smoke
        self.name = torch.cuda.get_device_name() if self.cuda else "cpu"
        self.card = self.name if self.name in CARD_MEMORY_MIB else "NVIDIA H100 80GB HBM3"
        self.seq_len = 32 if smoke else 2048
        self.data = workdir / "data"

    def overrides(self, experiment: str, point: str, r: int, *extra: str) -> list[str]:
        return [
            f"experiment={experiment}",
            f"point={point}",
            f"model.r={r}",
            f"data.path={self.data}",
            "data.val_rows=16",
            f"trainer.plan_device={self.card}",
            "trainer.progress=false",
            "trainer.val_every_steps=0",
            "sweep=gpu_check",
            *(SMOKE if self.smoke else ()),
            *extra,
        ]


def write_packed_set(root: Path, seq_len: int, rows: int = 2048, vocab: int = 32001) -> None:
    """A packed set in the published format (train-/val-*.parquet, one `tokens` list<uint16> of T + 1 ids per
    row): random ids, so the loss stays near log V; enough rows for every run here."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", rows), ("val", 64)):
        ids = rng.integers(0, vocab, size=(n, seq_len + 1), dtype=np.uint16)
        column = pa.FixedSizeListArray.from_arrays(pa.array(ids.ravel()), seq_len + 1).cast(pa.list_(pa.uint16()))
        pq.write_table(pa.table({"tokens": column}), root / f"{split}-00000.parquet", row_group_size=256)


# ------------------------------------------------------------------------------------------------ sections
def section_device(check: Check) -> dict[str, Any]:
    out = {
        "device": check.name,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "plan_device": check.card,
    }
    if check.cuda:
        out["memory_gib"] = torch.cuda.get_device_properties(0).total_memory / GIB
        out["peak_bf16_flops"] = peak_flops(check.name)
        out["ok"] = out["peak_bf16_flops"] is not None and check.name in CARD_MEMORY_MIB
    else:
        out["ok"] = True
    return out


def section_grid(check: Check) -> dict[str, Any]:
    from loopscale.config.schema import with_vocab
    from loopscale.launch.sweep import expand
    from loopscale.train.batching import device_batching

    heaviest, problems, jobs = {}, [], 0
    for experiment in GRIDS:
        for job in expand([f"experiment={experiment}", f"trainer.plan_device={check.card}"]):
            cfg = with_vocab(job.cfg, job.cfg.data.vocab_size)
            b = device_batching(cfg.budget, cfg.model, cfg.trainer, cfg.optim.optimizer)
            peak = estimate_memory(cfg.model, b.device_batch, cfg.trainer.compile, cfg.optim.optimizer).peak
            jobs += 1
            if b.world * b.device_batch * b.grad_accum * cfg.model.seq_len != STEP_TOKENS:
                problems.append(f"{cfg.run_name}: {b} is not {STEP_TOKENS} tokens per step")
            if peak > usable_memory(check.card):
                problems.append(f"{cfg.run_name}: predicted {peak / GIB:.1f} GiB at device batch {b.device_batch}")
            if peak > heaviest.get(b.device_batch, ("", 0))[1]:
                heaviest[b.device_batch] = (cfg.run_name, peak)
    return {
        "jobs": jobs,
        "card": check.card,
        "usable_gib": usable_memory(check.card) / GIB,
        "heaviest": {str(k): {"run": n, "predicted_gib": p / GIB} for k, (n, p) in sorted(heaviest.items())},
        "problems": problems,
        "ok": not problems and jobs == 308,
    }


def _steady(metrics: list[dict], key: str) -> float | None:
    """The median of a logged per-step value after the first log (which includes the compile)."""
    values = sorted(float(row[key]) for row in metrics[1:] if row.get(key) not in (None, ""))
    return values[len(values) // 2] if values else None


def run_point(check: Check, name: str) -> dict[str, Any]:
    """One production point trained in this process (the parent runs each in a fresh one on CUDA)."""
    import csv

    from torch._dynamo.utils import counters

    from loopscale.config.schema import with_vocab
    from loopscale.train.batching import device_batching
    from loopscale.train.plan import run_dir_of, to_train_config
    from loopscale.train.runner import train_run

    _, experiment, point, r = next(p for p in POINTS if p[0] == name)
    batch = 8 if check.smoke else 128
    steps_tokens = f"budget.tokens={TRAIN_STEPS * batch * check.seq_len}"
    cfg = compose(
        check.overrides(
            experiment,
            point,
            r,
            "budget.mode=tokens",
            steps_tokens,
            f"run_name={name}",
            f"runs_dir={check.workdir / 'runs'}",
            "trainer.log_every_steps=1",
        )
    )
    train_cfg = to_train_config(cfg)
    if check.cuda:
        torch.cuda.reset_peak_memory_stats()
    # the runner's fit without its final validation (a second compile, not what is measured here)
    record = train_run(train_cfg, run_dir_of(train_cfg), validate=False)
    train_cfg = with_vocab(train_cfg, train_cfg.data.vocab_size)
    b = device_batching(train_cfg.budget, train_cfg.model, train_cfg.trainer, "muonh")
    predicted = estimate_memory(train_cfg.model, b.device_batch, train_cfg.trainer.compile, "muonh", check.cuda).peak
    measured = torch.cuda.max_memory_allocated() if check.cuda else None
    (metrics_file,) = Path(record["run_dir"]).glob("metrics/version_*/metrics.csv")
    metrics = [row for row in csv.DictReader(metrics_file.open()) if row.get("perf/tokens_per_s")]
    out = {
        "point": name,
        "status": record["status"],
        "device_batch": record["device_batch"],
        "grad_accum": record["grad_accum"],
        "predicted_gib": predicted / GIB,
        "measured_gib": None if measured is None else measured / GIB,
        "tokens_per_s": _steady(metrics, "perf/tokens_per_s"),
        "mfu": _steady(metrics, "perf/mfu"),
        "mfu_causal": _steady(metrics, "perf/mfu_causal"),
        "compiled_graphs": int(counters["stats"]["unique_graphs"]),
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "recompile_limit_hits": record.get("recompile_limit_hits"),
        "wall_s": record.get("wall_time_s"),
    }
    # within the model's tolerance, and inside the card's usable memory
    memory_ok = measured is None or (
        abs(measured / predicted - 1) <= MEMORY_TOLERANCE and measured <= usable_memory(check.card)
    )
    compiled_ok = out["compiled_graphs"] > 0 and out["graph_breaks"] == 0 and out["recompile_limit_hits"] == 0
    out["ok"] = record["status"] == "done" and memory_ok and compiled_ok and out["tokens_per_s"] is not None
    return out


def section_production(check: Check, budget_s: float, started: float, save) -> dict[str, Any]:
    rows = []
    for name, *_ in POINTS:
        left = budget_s - (time.perf_counter() - started)
        if check.cuda and left < 60:
            rows.append({"point": name, "ok": False, "error": f"skipped: {left:.0f} s of the time budget left"})
            continue
        try:
            rows.append(_isolated_point(check, name, left) if check.cuda else run_point(check, name))
        except Exception:
            rows.append({"point": name, "ok": False, "error": traceback.format_exc()[-3000:]})
        save({"rows": rows, "ok": False})  # what is done so far, in case the next point is killed
    return {"rows": rows, "ok": all(row["ok"] for row in rows)}


def _isolated_point(check: Check, name: str, timeout_s: float) -> dict[str, Any]:
    """The point in a fresh process: its own CUDA peak and Dynamo state, and a hang cannot take the rest."""
    out = check.workdir / f"point-{name}.json"
    cmd = [sys.executable, __file__, "--point", name, "--workdir", str(check.workdir), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if not out.exists():
        return {"point": name, "ok": False, "error": (proc.stderr or proc.stdout)[-3000:]}
    return json.loads(out.read_text())


def section_resume(check: Check) -> dict[str, Any]:
    from loopscale.train.entry import run_training
    from loopscale.train.lightning_module import InjectedFailure

    batch = ("budget.batch_size=8", "budget.device_batch=4") if not check.smoke else ()
    common = check.overrides(
        "isodepth", "C4.64e17-s6", 2, "trainer.compile=false", "budget.mode=tokens",
        f"budget.tokens={10 * 8 * check.seq_len}", "trainer.ckpt_every_steps=5", "run_name=resume", *batch,
    )  # fmt: skip
    killed = False
    try:
        run_training(compose([*common, f"runs_dir={check.workdir / 'resume'}", "trainer.fail_at_step=7"]))
    except InjectedFailure:
        killed = True
    resumed = run_training(compose([*common, f"runs_dir={check.workdir / 'resume'}"]))
    straight = run_training(compose([*common, f"runs_dir={check.workdir / 'straight'}"]))
    return {
        "killed_at_step_7": killed,
        "resumed_from_step": resumed["resumed_from_step"],
        "grad_accum": resumed["grad_accum"],
        "optimizer": resumed["optimizer"],
        "L_resumed": resumed["L"],
        "L_uninterrupted": straight["L"],
        "ok": killed
        and resumed["status"] == "done"
        and resumed["resumed_from_step"] == 5
        and resumed["optimizer"] == "muonh"
        and abs(resumed["L"] - straight["L"]) <= 1e-2 * straight["L"],
    }


def _summary(name: str, result: dict[str, Any]) -> str:
    if "error" in result:
        return result["error"].strip().splitlines()[-1][:100]
    if name == "grid":
        return f"{result['jobs']} jobs on {result['card']}: " + ", ".join(
            f"B{k} {v['run']} {v['predicted_gib']:.1f} GiB" for k, v in result["heaviest"].items()
        )
    if name == "production":
        return "; ".join(
            f"{r['point']} {r.get('measured_gib') or 0:.1f}/{r.get('predicted_gib') or 0:.1f} GiB "
            f"{r.get('tokens_per_s') or 0:,.0f} tok/s mfu {r.get('mfu') or 0:.2f}"
            if "error" not in r
            else r["point"]
            for r in result["rows"]
        )
    if name == "resume":
        resumed, straight = result["L_resumed"], result["L_uninterrupted"]
        return f"resumed from {result['resumed_from_step']}, L {resumed:.4f} vs {straight:.4f} uninterrupted"
    return f"{result.get('device')} torch {result.get('torch')}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on CPU: checks the script itself")
    parser.add_argument("--out", type=Path, help="write the results as JSON here (after every section)")
    parser.add_argument("--workdir", type=Path, default=None, help="runs and synthetic data (default: a temp dir)")
    parser.add_argument("--budget-s", type=float, default=330.0, help="skip production points past this many seconds")
    parser.add_argument("--point", help=argparse.SUPPRESS)  # internal: one production point in this process
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gpu_check-"))
    check = Check(args.smoke, workdir)
    if args.point:
        args.out.write_text(json.dumps(run_point(check, args.point), default=str))
        return 0
    write_packed_set(check.data, check.seq_len, vocab=512 if args.smoke else 32001)
    started, results = time.perf_counter(), {}

    def save(partial: dict | None = None, name: str = "production") -> None:
        if args.out:
            snapshot = {**results, **({name: partial} if partial else {})}
            args.out.write_text(json.dumps({"smoke": args.smoke, "sections": snapshot}, indent=2, default=str))

    sections = {
        "device": lambda: section_device(check),
        "grid": lambda: section_grid(check),
        "resume": lambda: section_resume(check),  # before production, which takes what time is left
        "production": lambda: section_production(check, args.budget_s, started, save),
    }
    for name, section in sections.items():
        print(f"== {name}", flush=True)
        t0 = time.perf_counter()
        try:
            result = section()
        except Exception:  # one section's failure must not stop the others
            result = {"ok": False, "error": traceback.format_exc()}
            print(result["error"], file=sys.stderr, flush=True)
        results[name] = {**result, "seconds": time.perf_counter() - t0}
        print(json.dumps(results[name], default=str), flush=True)
        save()
    print(f"\n{'section':<11} {'ok':<4} {'s':>6}  summary")
    for name, result in results.items():
        print(f"{name:<11} {'yes' if result['ok'] else 'NO':<4} {result['seconds']:>6.1f}  {_summary(name, result)}")
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
