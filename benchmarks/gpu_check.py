"""The first-GPU-run check: one prepared command (a 360 s deadline on one H200: 6 min; a 480 s call)
that says whether the published sweep fits, trains at the expected speed and stays compiled, by running
production itself.

    python benchmarks/gpu_check.py --out $OUT/gpu_check.json --save-compile-cache $OUT    # the GPU node
    python benchmarks/gpu_check.py --sections production --points s28-hyper-r8 \\
        --load-compile-cache .gpu_cache --out $OUT/gpu_check.json                        # a rerun of one point
    python benchmarks/gpu_check.py --smoke --out smoke.json                              # tiny sizes on CPU

It runs from a bare copy of the tree (no install of loopscale: this file puts the tree on sys.path) with the
node image's packages and the wheels of `make gpu-bundle`, offline: the data is a synthetic packed set in the
published format written here. Sections, in order of value, each under a deadline (--deadline-s from the
start; a section or point that would not fit the time left is skipped and says so):

  device      always: the card, torch / CUDA / Triton versions, a measured 8192^3 bf16 matmul (the real peak
              next to the datasheet's), and a probe that torch.compile's backend builds a kernel here (if not,
              production runs eager and says so)
  production  the published points that decide the plan, most valuable first: s16 hyper r8 at device batch 32
              (memory: the heaviest point the H100 plan keeps), s34 r1 (throughput: the largest model), s28
              hyper r8 at 16. Each is a real run in its own process with its own timeout: the runner's Trainer
              (trainer=gpu: bf16, compiled blocks, MuonH, gradient accumulation, Lightning) for STEPS optimizer
              steps without its checkpoints. Per point: time to the first step, compile time (Dynamo's timers),
              steady tokens/s, MFU against the datasheet and the measured peak, memory after the model and
              after the first step, peak allocated and reserved, each term of the memory model against its
              measurement, pass / fail against the H100's and the H200's usable memory. The child writes its
              JSON after every step; a killed point keeps what it measured and its log's tail
  grid        seconds: every job of the three published grids (308) planned for the H100: device batch x
              accumulation = 262,144 tokens per step, the predicted peak inside usable memory, and again with
              the predictions scaled by the worst measured/predicted ratio of production
  warm        each measured point again in a fresh process with a fresh cache dir and the compile cache its
              production run saved (torch.compiler.save_cache_artifacts / load_cache_artifacts): the compile
              time a rerun or the next job of the same shape pays (one micro-batch, one step)
  resume      last, with its own cap: a MuonH run on packed rows killed at step 7, resumed from its step-5
              checkpoint, against the same run uninterrupted

--sections and --points redo only what failed (device always runs). Compile caches: --save-compile-cache DIR
writes compile-<point>.bin (zlib of torch's cache artifacts, each under 16 MiB) after each production point;
--load-compile-cache DIR loads them before compiling. The JSON (--out) is rewritten as results arrive. Exit
status 0 when every section that ran passed its checks; docs/operations.md says what to do with each outcome.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SPAWNED_AT = time.time()  # before torch's import: a point's time to first step counts its interpreter start

import torch  # noqa: E402
from lightning.pytorch.callbacks import Callback  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the bare tree on the node: loopscale is not installed there

from loopscale.atomic import write_json_atomic  # noqa: E402
from loopscale.config.dirs import compose  # noqa: E402
from loopscale.model.memory import GIB, estimate_memory, usable_memory  # noqa: E402
from loopscale.train.mfu import peak_flops  # noqa: E402


@dataclass(frozen=True)
class Point:
    name: str
    experiment: str
    point: str
    r: int
    why: str


# in order of value: what the first call must answer even if it runs out of time
POINTS = (
    Point("s16-hyper-r8", "isodepth_hyper", "C2.15e18-s16", 8, "memory: the heaviest point at device batch 32"),
    Point("s34-r1", "isodepth", "C2.15e19-s34", 1, "throughput: the largest model, device batch 8"),
    Point("s28-hyper-r8", "isodepth_hyper", "C2.15e19-s28", 8, "memory: the heaviest point at device batch 16"),
)
SECTIONS = ("device", "production", "grid", "warm", "resume")
GRIDS = ("isodepth", "isodepth_tbptt", "isodepth_hyper")
STEP_TOKENS = 262_144
H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"  # the plan's card, and the card the check runs on
STEPS = 5  # optimizer steps per production point: the first compiles, the second settles, 3..5 are steady
STEADY_FROM = 3  # first step (1-based) counted as steady
# Time on the GPU (seconds): the whole call's deadline, one point's cap, and what production leaves for grid
DEADLINE_S = 360.0
POINT_CAP_S = 180.0
WARM_CAP_S = 75.0
RESUME_CAP_S = 120.0
GRID_RESERVE_S = 30.0
MIN_CHILD_S = 45.0  # a point given less than this is skipped, not started
MATMUL_N = 8192  # the peak probe: an N x N x N bf16 product, as the machine's notes measured it
CACHE_FILE_LIMIT = 16 * 2**20  # the most one file under $OUT may weigh to come back from the node
# smoke: the published layout at a CPU size (L_eff = 20, p = c = 2), bf16 autocast, Dynamo without code generation
SMOKE = (
    "model.d_model=64",
    "model.head_dim=16",
    "model.seq_len=32",
    "trainer.accelerator=cpu",
    "budget.batch_size=8",
    "budget.device_batch=4",
    "data.vocab_size=512",
)


class Check:
    """One run's settings: smoke or not, where it writes, the synthetic data, the card it plans for."""

    def __init__(self, smoke: bool, workdir: Path, backend: str | None = None, extra: tuple[str, ...] = ()):
        self.smoke, self.workdir, self.extra = smoke, workdir, extra
        self.cuda = torch.cuda.is_available() and not smoke
        self.name = torch.cuda.get_device_name() if self.cuda else "cpu"
        self.backend = backend or ("inductor" if self.cuda else "aot_eager")
        self.seq_len = 32 if smoke else 2048
        self.data = workdir / "data"

    def overrides(self, experiment: str, point: str, r: int, *extra: str) -> list[str]:
        return [
            f"experiment={experiment}",
            f"point={point}",
            f"model.r={r}",
            f"data.path={self.data}",
            "data.val_rows=16",
            "data.allow_repeat=true",  # any --steps: the rows are random ids, a second pass reads the same
            f"trainer.plan_device={H100}",  # the plan under test: the published device batches on an H100
            f"trainer.compile_backend={self.backend}",
            "trainer.progress=false",
            "trainer.val_every_steps=0",
            "trainer.log_every_steps=1000",  # no per-step logging: the probe below times the steps
            "sweep=gpu_check",
            *(SMOKE if self.smoke else ()),
            *self.extra,
            *extra,
        ]


def write_packed_set(root: Path, seq_len: int, rows: int = 1024, vocab: int = 32001) -> None:
    """A packed set in the published format (train-/val-*.parquet, one `tokens` list<uint16> of T + 1 ids per
    row): random ids, so the loss stays near log V; enough rows for every run here (5 steps x 128 rows)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", rows), ("val", 64)):
        ids = rng.integers(0, vocab, size=(n, seq_len + 1), dtype=np.uint16)
        column = pa.FixedSizeListArray.from_arrays(pa.array(ids.ravel()), seq_len + 1).cast(pa.list_(pa.uint16()))
        pq.write_table(pa.table({"tokens": column}), root / f"{split}-00000.parquet", row_group_size=256)


def _gib(value: float | None) -> float | None:
    return None if value is None else round(value / GIB, 3)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


# ------------------------------------------------------------------------------------------------ device
def section_device(check: Check) -> dict[str, Any]:
    import platform

    out: dict[str, Any] = {
        "device": check.name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "plan_device": H100,
        "cache_artifacts_api": hasattr(torch.compiler, "save_cache_artifacts"),
        "datasheet_bf16_flops": peak_flops(check.name) if check.cuda else None,
    }
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        out["triton"] = None
    if check.cuda:
        props = torch.cuda.get_device_properties(0)
        out.update(
            memory_gib=_gib(props.total_memory), sms=props.multi_processor_count, cc=f"{props.major}.{props.minor}"
        )
    out["measured_bf16_flops"] = _matmul_flops(check.cuda)
    out["compile_probe"] = _compile_probe(check)
    known = not check.cuda or (out["datasheet_bf16_flops"] is not None and check.name in (H100, H200))
    out["ok"] = known and out["compile_probe"]["ok"]
    return out


def _matmul_flops(cuda: bool) -> float:
    """The achieved bf16 FLOP/s of a large square product (mean of 10 after 3 warm-ups): MFU's second
    denominator, the peak this card really gives (the datasheet's 989 TFLOP/s is not reached)."""
    n, device = (MATMUL_N, "cuda") if cuda else (256, "cpu")
    a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        a @ b
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            a @ b
        end.record()
        torch.cuda.synchronize()
        seconds = start.elapsed_time(end) / 1e3
    else:
        t0 = time.perf_counter()
        for _ in range(10):
            a @ b
        seconds = time.perf_counter() - t0
    del a, b
    if cuda:
        torch.cuda.empty_cache()
    return 10 * 2 * n**3 / seconds


def _compile_probe(check: Check) -> dict[str, Any]:
    """Whether the configured backend builds and runs a kernel here (Inductor on the GPU: Triton and its
    C compiler); a failure is the reason production then runs eager."""
    device = "cuda" if check.cuda else "cpu"
    t0 = time.perf_counter()
    try:
        fn = torch.compile(lambda x: torch.relu(x @ x) + 1, backend=check.backend, dynamic=False)
        x = torch.randn(256, 256, device=device, dtype=torch.bfloat16)
        ok = bool(torch.allclose(fn(x).float(), (torch.relu(x @ x) + 1).float(), atol=1e-1, rtol=1e-2))
        return {"backend": check.backend, "ok": ok, "seconds": round(time.perf_counter() - t0, 2)}
    except Exception as err:
        return {"backend": check.backend, "ok": False, "error": f"{type(err).__name__}: {err}"[-1500:]}


# ------------------------------------------------------------------------------------------------ one point
class StepProbe(Callback):
    """A Lightning callback that times each optimizer step (after a device sync) and measures the memory
    terms of loopscale/model/memory.py as they appear: the model at train start, the gradients before the
    first optimizer step, the optimizer state after it, one micro-batch's saved activations before its
    backward; and writes the point's JSON after every step (`save`)."""

    def __init__(self, report: dict, save, cuda: bool, spawned_at: float):
        self.report, self.save, self.cuda, self.spawned_at = report, save, cuda, spawned_at
        self.step_s: list[float] = []
        self.bytes: dict[str, int] = {}
        self.last_step, self.t_prev, self.at_batch_start = 0, 0.0, 0

    def _allocated(self) -> int:
        return torch.cuda.memory_allocated() if self.cuda else 0

    def on_train_start(self, trainer, pl_module):
        self.t_prev = self.t_start = time.perf_counter()
        self.report["startup_s"] = round(time.time() - self.spawned_at, 2)
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
            self.bytes["model"] = self._allocated()
        self.report["status"] = "compiling"
        self.save()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.at_batch_start = self._allocated()

    def on_before_backward(self, trainer, pl_module, loss):
        if self.cuda:
            saved = self._allocated() - self.at_batch_start
            self.bytes["activations"] = max(self.bytes.get("activations", 0), saved)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        if self.cuda and "grads" not in self.bytes:  # the first step: no optimizer state yet
            self.bytes["grads"] = self._allocated() - self.bytes["model"]

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        if step == self.last_step:  # inside an accumulation
            return
        self.last_step = step
        if self.cuda:
            torch.cuda.synchronize()
        now = time.perf_counter()
        self.step_s.append(round(now - self.t_prev, 4))
        self.t_prev = now
        if step == 1:
            self.report["time_to_first_step_s"] = round(time.time() - self.spawned_at, 2)
            self.report["first_step_s"] = round(now - self.t_start, 2)
            if self.cuda:
                self.bytes["after_first_step"] = self._allocated()
        self.report.update(status="training", steps_done=step, step_s=self.step_s)
        self.report.update(_compile_stats())
        if self.cuda:
            self.bytes["peak_allocated"] = torch.cuda.max_memory_allocated()
            self.bytes["peak_reserved"] = torch.cuda.max_memory_reserved()
        self.save()


def _compile_stats() -> dict[str, Any]:
    """Dynamo's own timers and counters for this process: compile seconds (forward frames + backward,
    calculate_time_spent's total_wall_time, where this torch has it), graphs, graph breaks, and the compile
    caches' hits and misses (a warm run must hit: Inductor's FX graph cache, AOTAutograd's cache)."""
    from torch._dynamo import utils

    spent = utils.calculate_time_spent() if hasattr(utils, "calculate_time_spent") else {}
    caches = {f"{group}/{k}": v for group in ("inductor", "aot_autograd") for k, v in utils.counters[group].items()}
    return {
        "compile_s": round(spent.get("total_wall_time", 0.0), 2) if spent else None,
        "compile_phases_s": {k: round(v, 2) for k, v in spent.items() if v >= 0.01},
        "compiled_graphs": int(utils.counters["stats"]["unique_graphs"]),
        "graph_breaks": int(sum(utils.counters["graph_break"].values())),
        "cache_counters": {k: v for k, v in caches.items() if "cache" in k},
    }


def load_compile_cache(path: Path | None) -> dict[str, Any]:
    """Load a point's saved compile artifacts into this process's caches (before anything compiles)."""
    if path is None or not path.is_file():
        return {"cache": "cold"}
    if not hasattr(torch.compiler, "load_cache_artifacts"):
        return {"cache": "cold", "cache_note": f"torch {torch.__version__} has no load_cache_artifacts"}
    info = torch.compiler.load_cache_artifacts(zlib.decompress(path.read_bytes()))
    return {"cache": "warm", "cache_loaded": {"file": path.name, "mib": _mib(path.stat().st_size), **_counts(info)}}


def _counts(info) -> dict[str, dict[str, int]]:
    """torch's CacheInfo as {artifact type: how many} (inductor, aot_autograd, autotune, ...)."""
    return {"artifacts": {k: len(v) for k, v in getattr(info, "artifacts", {}).items()}}


def save_compile_cache(path: Path) -> dict[str, Any]:
    """Save what this process compiled (torch.compiler.save_cache_artifacts) as zlib to `path`."""
    if not hasattr(torch.compiler, "save_cache_artifacts"):
        return {"cache_saved": None, "cache_note": f"torch {torch.__version__} has no save_cache_artifacts"}
    artifacts = torch.compiler.save_cache_artifacts()
    if artifacts is None:  # nothing cacheable (a backend without code generation: aot_eager, eager)
        return {"cache_saved": None}
    path.write_bytes(zlib.compress(artifacts[0], 6))
    saved = {"file": path.name, "mib": _mib(path.stat().st_size), "raw_mib": _mib(len(artifacts[0]))}
    return {"cache_saved": {**saved, **_counts(artifacts[1])}}


def _mib(n: int) -> float:
    return round(n / 2**20, 2)


def run_point(check: Check, point: Point, args, save) -> dict[str, Any]:
    """One production point trained in this process (a child of the check): STEPS optimizer steps (or
    --steps), through the runner's Trainer without its checkpoint callback."""
    from loopscale.config.schema import with_vocab
    from loopscale.data.run_data import open_run_data
    from loopscale.train.batching import device_batching
    from loopscale.train.checkpoint import AtomicLastCheckpoint
    from loopscale.train.compiling import recompile_limit_hits
    from loopscale.train.plan import run_dir_of, to_train_config
    from loopscale.train.run_json import RunRecord
    from loopscale.train.runner import build_training

    report: dict[str, Any] = {"point": point.name, "why": point.why, "status": "starting"}
    save(report)
    report.update(load_compile_cache(args.load_cache))
    base = to_train_config(compose(check.overrides(point.experiment, point.point, point.r)))
    base = with_vocab(base, base.data.vocab_size)
    b = device_batching(base.budget, base.model, base.trainer, base.optim.optimizer)
    # --micro-batches 1 (the warm section): one micro-batch a step, the same compiled shapes
    batch = b.device_batch * args.micro_batches if args.micro_batches else b.batch_size
    extra = [f"budget.batch_size={batch}", f"budget.device_batch={b.device_batch}", "budget.mode=tokens"]
    extra += [f"budget.tokens={args.steps * batch * check.seq_len}", f"runs_dir={check.workdir / 'runs'}"]
    cfg = to_train_config(compose(check.overrides(point.experiment, point.point, point.r, *extra)))
    run_dir = run_dir_of(cfg) / f"{args.child}-{int(SPAWNED_AT)}"
    built = build_training(cfg, run_dir, open_run_data(cfg.data, cfg.model.seq_len), [], RunRecord())
    cfg, m = built.cfg, built.cfg.model
    report.update(
        run=cfg.run_name, d_model=m.d_model, n_layer=m.l_eff, r=m.r, compile=cfg.trainer.compile,
        backend=cfg.trainer.compile_backend, device_batch=b.device_batch, grad_accum=batch // b.device_batch,
        steps=args.steps, tokens_per_step=batch * check.seq_len, flops_per_token=built.plan.run.F,
        causal_flops_per_token=built.plan.run.F_causal,
    )  # fmt: skip
    probe = StepProbe(
        report, lambda: save(_finish(report, probe, cfg, b.device_batch, args)), check.cuda, args.spawned_at
    )
    # no checkpoint: the sweep's end-of-run save (~10 GiB at s34) is not what is measured here
    built.trainer.callbacks[:] = [c for c in built.trainer.callbacks if not isinstance(c, AtomicLastCheckpoint)]
    built.trainer.callbacks.append(probe)
    built.trainer.fit(built.module, datamodule=built.datamodule)
    report["status"] = "done"
    report["recompile_limit_hits"] = len(recompile_limit_hits())
    if args.save_cache:
        report.update(save_compile_cache(args.save_cache))
    return _finish(report, probe, cfg, b.device_batch, args)


def _finish(report: dict, probe: StepProbe, cfg, device_batch: int, args) -> dict[str, Any]:
    """The point's derived numbers and verdict from what the probe measured so far."""
    steady = probe.step_s[STEADY_FROM - 1 :]
    step_s = _median(steady)
    tokens_per_s = report["tokens_per_step"] / step_s if step_s else None
    report.update(steady_samples=len(steady), steady_step_s=step_s, tokens_per_s=tokens_per_s)
    F, causal = report.get("flops_per_token"), report.get("causal_flops_per_token")
    peaks = {"datasheet": args.datasheet_flops, "measured_peak": args.measured_flops}
    report["mfu"] = {
        f"{kind}{'_causal' if c else ''}": (tokens_per_s * flops / peak if tokens_per_s and flops and peak else None)
        for kind, peak in peaks.items()
        for c, flops in ((False, F), (True, causal))
    }
    report["memory"] = memory_terms(cfg, device_batch, probe.bytes, probe.cuda)
    problems = []
    if report["status"] != "done":
        problems.append(f"status {report['status']}")
    if args.child == "point" and len(steady) < 3:
        problems.append(f"{len(steady)} steady steps (3 needed)")
    if report.get("compile") and (report.get("compiled_graphs") or 0) == 0:
        problems.append("nothing compiled")
    if report.get("graph_breaks") or report.get("recompile_limit_hits"):
        problems.append("graph breaks or recompile-limit hits: part of the model ran eager")
    fits = report["memory"]["fits"]
    if probe.cuda and not fits[H100]["ok"]:
        problems.append(f"peak reserved over the H100's usable {fits[H100]['usable_gib']:.1f} GiB")
    report.update(problems=problems, ok=not problems)
    return report


def memory_terms(cfg, device_batch: int, measured: dict[str, int], cuda: bool) -> dict[str, Any]:
    """Each term of the memory model (loopscale/model/memory.py) next to its measurement, in GiB, and the
    peak against the H100's and the H200's usable memory."""
    est = estimate_memory(cfg.model, device_batch, cfg.trainer.compile, cfg.optim.optimizer, cuda)
    m = measured
    have = all(k in m for k in ("model", "grads", "after_first_step", "activations", "peak_allocated"))
    got: dict[str, int | None] = dict.fromkeys(("weights", "grads", "optimizer", "activations", "transient"))
    if have:  # after the first step: model + gradients + optimizer state; the peak adds activations + transient
        got.update(
            weights=m["model"], grads=m["grads"], optimizer=m["after_first_step"] - m["model"] - m["grads"],
            activations=m["activations"], transient=m["peak_allocated"] - m["after_first_step"] - m["activations"],
        )  # fmt: skip
    terms = {
        name: {
            "predicted_gib": _gib(getattr(est, name)),
            "measured_gib": _gib(got[name]),
            "ratio": round(got[name] / getattr(est, name), 3) if got[name] is not None and getattr(est, name) else None,
        }
        for name in got
    }
    peak_alloc, peak_res = m.get("peak_allocated"), m.get("peak_reserved")
    fits = {}
    for card in (H100, H200):
        usable = usable_memory(card)
        fits[card] = {
            "usable_gib": _gib(usable),
            "headroom_allocated_gib": _gib(usable - peak_alloc) if peak_alloc is not None else None,
            "headroom_reserved_gib": _gib(usable - peak_res) if peak_res is not None else None,
            # reserved on the roomier H200 bounds an H100's from above (its allocator frees its cache only on
            # a failed allocation), allocated from below: ok is the safe verdict, ok_allocated the hopeful one
            "ok": (peak_res <= usable) if peak_res is not None else None,
            "ok_allocated": (peak_alloc <= usable) if peak_alloc is not None else None,
        }
    d_tokens = cfg.model.d_model * device_batch * cfg.model.seq_len
    return {
        "terms": terms,
        "predicted_peak_gib": _gib(est.peak),
        "model_gib": _gib(m.get("model")),  # memory after the model is on the device
        "after_first_step_gib": _gib(m.get("after_first_step")),  # model + gradients + optimizer state
        "peak_allocated_gib": _gib(peak_alloc),
        "peak_reserved_gib": _gib(peak_res),
        "peak_ratio": round(peak_alloc / est.peak, 3) if peak_alloc else None,
        "reserved_ratio": round(peak_res / est.peak, 3) if peak_res else None,
        # the transient read as memory.BACKWARD_BYTES_PER_D (bytes per d per token), for calibration
        "implied_backward_bytes_per_d": round(got["transient"] / d_tokens, 1) if got["transient"] else None,
        "fits": fits,
    }


# ------------------------------------------------------------------------------------------------ resume
def run_resume(check: Check) -> dict[str, Any]:
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
        "status": "done",
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


# ------------------------------------------------------------------------------------------------ grid
def section_grid(check: Check, production: dict | None) -> dict[str, Any]:
    from loopscale.config.schema import with_vocab
    from loopscale.launch.sweep import expand
    from loopscale.train.batching import device_batching

    # the worst measured / predicted peak of production (reserved: what the allocator really holds)
    rows = [r for r in (production or {}).get("rows", []) if (r.get("memory") or {}).get("reserved_ratio")]
    ratio = max((r["memory"]["reserved_ratio"] for r in rows), default=None)
    heaviest, problems, over_calibrated, jobs = {}, [], [], 0
    for experiment in GRIDS:
        for job in expand([f"experiment={experiment}", f"trainer.plan_device={H100}"]):
            cfg = with_vocab(job.cfg, job.cfg.data.vocab_size)
            b = device_batching(cfg.budget, cfg.model, cfg.trainer, cfg.optim.optimizer)
            peak = estimate_memory(cfg.model, b.device_batch, cfg.trainer.compile, cfg.optim.optimizer).peak
            jobs += 1
            if b.world * b.device_batch * b.grad_accum * cfg.model.seq_len != STEP_TOKENS:
                problems.append(f"{cfg.run_name}: {b} is not {STEP_TOKENS} tokens per step")
            if peak > usable_memory(H100):
                problems.append(f"{cfg.run_name}: predicted {peak / GIB:.1f} GiB at device batch {b.device_batch}")
            if ratio and peak * ratio > usable_memory(H100):
                over_calibrated.append(f"{cfg.run_name} ({peak * ratio / GIB:.1f} GiB at {b.device_batch})")
            if peak > heaviest.get(b.device_batch, ("", 0))[1]:
                heaviest[b.device_batch] = (cfg.run_name, peak)
    return {
        "status": "done",
        "jobs": jobs,
        "card": H100,
        "usable_gib": usable_memory(H100) / GIB,
        "heaviest": {str(k): {"run": n, "predicted_gib": p / GIB} for k, (n, p) in sorted(heaviest.items())},
        "problems": problems,
        "calibrated": {"reserved_ratio": ratio, "jobs_over_usable": over_calibrated} if ratio else None,
        "ok": not problems and not over_calibrated and jobs == 308,
    }


# ------------------------------------------------------------------------------------------------ the parent
class Results:
    """The check's JSON: every section's result as it arrives, rewritten whole (atomically) each time."""

    def __init__(self, out: Path | None, meta: dict):
        self.out, self.meta, self.sections = out, meta, {}

    def put(self, name: str, result: dict) -> None:
        self.sections[name] = result
        if self.out:
            write_json_atomic(self.out, {**self.meta, "sections": self.sections})


def _tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def run_child(check: Check, args, kind: str, name: str, cap_s: float, extra: list[str], progress) -> dict:
    """`gpu_check.py --child KIND --name NAME` in a fresh process (its own CUDA peak, Dynamo state and compile
    cache dirs; a hang cannot take the rest), killed with its process group after `cap_s`. Its JSON, which it
    rewrites after every step, is read every few seconds (`progress`) and after it ends; a killed or failed
    child's result says so and keeps its log's tail."""
    out, log = check.workdir / f"{kind}-{name}.json", check.workdir / f"{kind}-{name}.log"
    out.unlink(missing_ok=True)
    cache_dir = check.workdir / f"compile-cache-{kind}-{name}"  # fresh: "cold" means cold
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache_dir), "TRITON_CACHE_DIR": str(cache_dir / "triton")}
    cmd = [sys.executable, __file__, "--child", kind, "--name", name, "--workdir", str(check.workdir)]
    cmd += ["--out", str(out), "--spawned-at", repr(time.time()), *(["--smoke"] if check.smoke else [])]
    cmd += ["--backend", check.backend, *(f"--set={o}" for o in check.extra), *extra]
    started = time.perf_counter()
    with log.open("w") as log_file:
        # its own process group (not a new session: whatever runs the check ends the group with it);
        # process_group needs no preexec_fn, which is unsafe once Inductor's compile threads run here
        group = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env, **group)
        _children.add(proc.pid)
        timed_out, last_read = False, started
        while proc.poll() is None:
            time.sleep(0.5)
            if time.perf_counter() - started > cap_s:
                os.killpg(proc.pid, signal.SIGKILL)  # Inductor's compile workers too
                proc.wait()
                timed_out = True
            elif time.perf_counter() - last_read > 5 and out.exists():
                last_read = time.perf_counter()
                progress(_read(out))
    _children.discard(proc.pid)
    result = {"point": name, **_read(out), "wall_s": round(time.perf_counter() - started, 1)}
    if timed_out:
        result.update(status="timeout", ok=False, error=f"killed after its cap of {cap_s:.0f} s")
    elif proc.returncode != 0 or result.get("status") != "done":
        result.update(ok=False, error=f"exit {proc.returncode} in status {result.get('status')}")
    if not result.get("ok"):
        result["log_tail"] = _tail(log)
    return result


_children: set[int] = set()  # the process groups of running children


def _stop(signum, frame) -> None:
    """SIGTERM / SIGINT of the check: its children's groups end with it (the JSON so far is on disk)."""
    for pid in _children:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    raise SystemExit(128 + signum)


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _left(args) -> float:
    return args.deadline_s - (time.perf_counter() - args.started)


def section_production(check: Check, args, results: Results, fallback: str | None) -> dict[str, Any]:
    rows: list[dict] = []
    for point in _selected_points(args):
        cap = min(args.point_cap_s, _left(args) - (GRID_RESERVE_S if "grid" in args.sections else 0))
        if cap < MIN_CHILD_S:
            rows.append({"point": point.name, "status": "skipped", "ok": False, "error": f"{cap:.0f} s left"})
            continue
        extra = ["--steps", str(args.steps)]
        extra += [
            f"--{k}-flops={v!r}"
            for k, v in (("measured", args.measured_flops), ("datasheet", args.datasheet_flops))
            if v
        ]
        if args.load_compile_cache:
            extra += ["--load-cache", str(args.load_compile_cache / f"compile-{point.name}.bin")]
        extra += ["--save-cache", str(check.workdir / f"compile-{point.name}.bin")]
        extra += ["--set=trainer.compile=false"] if fallback else []

        def progress(partial: dict, done=tuple(rows), name=point.name) -> None:
            results.put("production", {"rows": [*done, {"point": name, **partial}], "ok": False, "running": name})

        row = run_child(check, args, "point", point.name, cap, extra, progress)
        if fallback:
            row.update(ok=False, compile_fallback=fallback)
        _keep_cache(check, args, point, row)
        rows.append(row)
        results.put("production", {"rows": rows, "ok": False})
    return {"rows": rows, "ok": bool(rows) and all(r["ok"] for r in rows)}


def _keep_cache(check: Check, args, point: Point, row: dict) -> None:
    """Copy the point's compile cache to --save-compile-cache if it fits one file that comes back."""
    src = check.workdir / f"compile-{point.name}.bin"
    if not (args.save_compile_cache and src.exists()):
        return
    if src.stat().st_size > CACHE_FILE_LIMIT:
        row["cache_note"] = f"{_mib(src.stat().st_size)} MiB: over the {_mib(CACHE_FILE_LIMIT)} MiB a file may take"
        return
    args.save_compile_cache.mkdir(parents=True, exist_ok=True)
    (args.save_compile_cache / src.name).write_bytes(src.read_bytes())


def section_warm(check: Check, args, results: Results, production: dict | None) -> dict[str, Any]:
    """Each point whose production run saved a compile cache, again in a fresh process and a fresh cache dir
    with that cache loaded: one step of one micro-batch, its compile time next to the cold one."""
    cold = {r["point"]: r for r in (production or {}).get("rows", [])}
    rows = []
    for point in _selected_points(args):
        saved = check.workdir / f"compile-{point.name}.bin"  # this call's production, else a carried one
        if not saved.exists() and args.load_compile_cache:
            saved = args.load_compile_cache / saved.name
        cap = min(
            WARM_CAP_S if check.cuda else args.point_cap_s,
            _left(args) - (MIN_CHILD_S if "resume" in args.sections else 0),
        )
        if not saved.exists():
            rows.append({"point": point.name, "status": "skipped", "ok": True, "note": "no saved compile cache"})
            continue
        if cap < MIN_CHILD_S / 2:
            rows.append({"point": point.name, "status": "skipped", "ok": False, "error": f"{cap:.0f} s left"})
            continue
        extra = ["--steps", "1", "--micro-batches", "1", "--load-cache", str(saved)]
        row = run_child(check, args, "warm", point.name, cap, extra, lambda partial: None)
        before = cold.get(point.name, {})
        rows.append(
            {
                "point": point.name,
                "status": row.get("status"),
                "cache_loaded": row.get("cache_loaded"),
                "cache_counters": row.get("cache_counters"),
                "compile_s": {"cold": before.get("compile_s"), "warm": row.get("compile_s")},
                "first_step_s": {"cold": before.get("first_step_s"), "warm": row.get("first_step_s")},
                "time_to_first_step_s": {
                    "cold": before.get("time_to_first_step_s"),
                    "warm": row.get("time_to_first_step_s"),
                },
                "ok": row.get("status") == "done",
                **({"error": row.get("error"), "log_tail": row.get("log_tail")} if row.get("status") != "done" else {}),
            }
        )
        results.put("warm", {"rows": rows, "ok": False})
    return {"rows": rows, "ok": all(r["ok"] for r in rows)}


def section_resume(check: Check, args) -> dict[str, Any]:
    cap = min(RESUME_CAP_S if check.cuda else args.point_cap_s, _left(args))
    if cap < MIN_CHILD_S:
        return {"status": "skipped", "ok": False, "error": f"{cap:.0f} s left"}
    return run_child(check, args, "resume", "resume", cap, [], lambda partial: None)


def _selected_points(args) -> list[Point]:
    return [p for p in POINTS if p.name in args.points]


def _summary(name: str, result: dict[str, Any]) -> str:
    if name == "device":
        peak = result.get("measured_bf16_flops") or 0
        return f"{result.get('device')} torch {result.get('torch')}, matmul {peak / 1e12:.0f} TFLOP/s"
    if name == "grid":
        over = (result.get("calibrated") or {}).get("jobs_over_usable")
        return f"{result.get('jobs')} jobs on the H100" + (f", {len(over)} over it calibrated" if over else "")
    if name == "resume":
        resumed, straight = result.get("L_resumed"), result.get("L_uninterrupted")
        return f"resumed from {result.get('resumed_from_step')}, L {resumed} vs {straight} uninterrupted"
    if name == "warm":
        return "; ".join(f"{r['point']} {r.get('status')} compile {r.get('compile_s')} s" for r in result["rows"])
    return "; ".join(_point_summary(r) for r in result.get("rows", []))


def _point_summary(row: dict) -> str:
    """One production point in a line: status, tokens/s, MFU, peak reserved / predicted, the H100 verdict."""
    memory, mfu = row.get("memory") or {}, (row.get("mfu") or {}).get("datasheet")
    reserved = memory.get("peak_reserved_gib")
    fits = ((memory.get("fits") or {}).get(H100) or {}).get("ok")
    return (
        f"{row['point']} {row.get('status')} {row.get('tokens_per_s') or 0:,.0f} tok/s"
        + (f" MFU {mfu:.2f}" if mfu else "")
        + (
            f" {reserved:.1f}/{memory.get('predicted_peak_gib'):.1f} GiB, H100 {'fits' if fits else 'NO'}"
            if reserved
            else ""
        )
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on CPU: checks the script itself")
    parser.add_argument("--out", type=Path, help="the results as JSON, rewritten as they arrive")
    parser.add_argument("--workdir", type=Path, default=None, help="runs and synthetic data (default: a temp dir)")
    point_names = [p.name for p in POINTS]
    parser.add_argument("--sections", type=_names(SECTIONS), default=list(SECTIONS),
                        help=f"comma-separated, of {','.join(SECTIONS)} (device always runs)")  # fmt: skip
    parser.add_argument("--points", type=_names(point_names), default=point_names,
                        help=f"comma-separated, of {','.join(point_names)}")  # fmt: skip
    parser.add_argument(
        "--deadline-s", type=float, default=None, help=f"the whole check's time (GPU: {DEADLINE_S:.0f})"
    )
    parser.add_argument("--point-cap-s", type=float, default=None, help=f"one point's time (GPU: {POINT_CAP_S:.0f})")
    parser.add_argument("--steps", type=int, default=STEPS, help="optimizer steps per production point")
    parser.add_argument("--save-compile-cache", type=Path, help="write compile-<point>.bin here ($OUT on the node)")
    parser.add_argument("--load-compile-cache", type=Path, help="load compile-<point>.bin from here (a rerun)")
    parser.add_argument("--set", action="append", default=[], help="an override for every run (trainer.compile=false)")
    parser.add_argument("--backend", help="torch.compile backend (default: inductor on GPU, aot_eager on CPU)")
    # a child process: one point, or the resume check
    parser.add_argument("--child", choices=("point", "warm", "resume"), help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--spawned-at", type=float, default=SPAWNED_AT, help=argparse.SUPPRESS)
    parser.add_argument("--micro-batches", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--measured-flops", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--datasheet-flops", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--save-cache", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--load-cache", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps < STEADY_FROM + 2 and not args.child:
        parser.error(f"--steps must be at least {STEADY_FROM + 2} (3 steady steps after the compile)")
    return args


def _names(allowed):
    """An argparse type: a comma-separated list of names from `allowed` (an unknown one is a usage error)."""

    def parse(text: str) -> list[str]:
        names = [n for n in text.split(",") if n]
        unknown = [n for n in names if n not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"{', '.join(unknown)}: not one of {', '.join(allowed)}")
        return names

    return parse


def child_main(args) -> int:
    check = Check(args.smoke, args.workdir, args.backend, tuple(args.set))
    report: dict[str, Any] = {}

    def save(partial: dict) -> None:
        report.clear()
        report.update(partial)
        write_json_atomic(args.out, partial)

    try:
        if args.child == "resume":
            save(run_resume(check))
        else:
            point = next(p for p in POINTS if p.name == args.name)
            save(run_point(check, point, args, save))
    except BaseException as err:
        failed = {**report, "status": "failed", "ok": False, "error": traceback.format_exc()[-3000:]}
        if check.cuda:  # an out-of-memory error: how far it got
            failed["peak_at_failure_gib"] = {
                "allocated": _gib(torch.cuda.max_memory_allocated()),
                "reserved": _gib(torch.cuda.max_memory_reserved()),
            }
        save(failed)
        traceback.print_exc()  # into the log, whose tail the parent keeps
        raise SystemExit(1) from err
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child_main(args)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    args.started = time.perf_counter() - (time.time() - SPAWNED_AT)  # the deadline counts the imports too
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gpu_check-"))
    check = Check(args.smoke, workdir, args.backend, tuple(args.set))
    gpu = check.cuda
    args.deadline_s = args.deadline_s or (DEADLINE_S if gpu else 3600.0)
    args.point_cap_s = args.point_cap_s or (POINT_CAP_S if gpu else 900.0)
    write_packed_set(check.data, check.seq_len, vocab=512 if args.smoke else 32001)
    meta = {"smoke": args.smoke, "argv": sys.argv[1:], "sections_asked": args.sections, "points": args.points}
    results = Results(args.out, meta)

    def timed(name: str, section) -> dict:
        print(f"== {name} ({_left(args):.0f} s left)", flush=True)
        t0 = time.perf_counter()
        try:
            result = section()
        except Exception:  # one section's failure must not stop the others
            result = {"ok": False, "error": traceback.format_exc()}
        result["seconds"] = round(time.perf_counter() - t0, 1)
        results.put(name, result)
        print(json.dumps({k: v for k, v in result.items() if k != "rows"}, default=str)[:2000], flush=True)
        return result

    device = timed("device", lambda: section_device(check))
    args.measured_flops, args.datasheet_flops = device.get("measured_bf16_flops"), device.get("datasheet_bf16_flops")
    probe = device.get("compile_probe", {})
    fallback = None if probe.get("ok", True) else f"compile probe failed ({probe.get('error', 'wrong result')[:200]})"
    production = None
    if "production" in args.sections:
        production = timed("production", lambda: section_production(check, args, results, fallback))
    if "grid" in args.sections:
        timed("grid", lambda: section_grid(check, production))
    if "warm" in args.sections and not fallback:
        timed("warm", lambda: section_warm(check, args, results, production))
    if "resume" in args.sections:
        timed("resume", lambda: section_resume(check, args))
    print(f"\n{'section':<11} {'ok':<4} {'s':>6}  summary")
    for name, result in results.sections.items():
        summary = (
            result.get("error", "").strip().splitlines()[-1][:100] if "error" in result else _summary(name, result)
        )
        print(f"{name:<11} {'yes' if result['ok'] else 'NO':<4} {result['seconds']:>6.1f}  {summary}")
    return 0 if all(r["ok"] for r in results.sections.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
