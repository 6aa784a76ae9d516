"""The first-GPU-run check: one prepared script that says whether loopscale's published runs will fit, train
at the expected precision and speed, and survive a kill. Offline (the embedded corpus; synthetic tokens for
the model-only sections), under 8 minutes on one H100/H200-class GPU.

    python benchmarks/gpu_check.py --out gpu_check.json          # on the GPU machine
    python benchmarks/gpu_check.py --smoke --out smoke.json      # tiny sizes on CPU (run by the test suite)

Sections (each guarded: one failure is recorded and the others still run; a summary table at the end):
  device      device name, its bf16 peak (loopscale/mfu.py; unknown -> no MFU)
  memory      peak memory of a train step + validation at (s16, B32), (s28, B16), (s34, B8) for r = 1 and
              r = 8 truncated, and whether (s6, B128) would fit (extrapolated from B = 8 and 16, not tried)
  dtypes      the dtypes each Block receives under autocast for r = 1, linear r = 4, hyper r = 4
  recompile   compiled graphs and recompile-limit hits over train -> partial validation -> train, and a
              second model (whole-model compile) in the same process
  throughput  tokens/s and MFU (accounting F and causal F) at (s6, B32) and (s22, B16) for r = 1 and 8,
              with FlopCounterMode's count against F
  optimizer   the optimizer's share of a step (MuonH when loopscale.muonh exists, else AdamW, said so)
  resume      an end-to-end `model=paper trainer=gpu` run with grad_accum 2, killed at step 7, resumed
Exit status 0 when every section passed its checks.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from loopscale.accounting import PAPER_DATA, data_vocab, flops_per_token  # noqa: E402
from loopscale.compiling import compile_model, recompile_limit_hits, watch_recompile_limit  # noqa: E402
from loopscale.config import TrainConfig, paper_width  # noqa: E402
from loopscale.mfu import causal_flops_per_token, peak_flops  # noqa: E402
from loopscale.model import Block, LoopedTransformer, param_groups  # noqa: E402
from loopscale.sweep import compose  # noqa: E402

PAPER_VOCAB = data_vocab(PAPER_DATA)  # 32,064: what `data=fineweb_edu_packed` trains the model with
GIB = 2**30


class Check:
    """Shared state of one run: the device, the sizes (full or smoke), the autocast dtype."""

    def __init__(self, smoke: bool, workdir: Path, compile_backend: str, data_dir: Path | None = None):
        self.smoke = smoke
        self.workdir = workdir
        self.data_dir = data_dir or workdir / "data"
        # a small model for the sections about behaviour rather than size (dtypes, recompiles)
        self.small = () if smoke else ("model.d_model=128", "model.head_dim=64", "model.seq_len=256")
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.cuda = self.device.type == "cuda"
        self.backend = compile_backend
        self.peak = peak_flops(torch.cuda.get_device_name()) if self.cuda else None

    def config(
        self, size: int, r: int, tbptt: bool = False, injection: str | None = None, extra: tuple[str, ...] = ()
    ) -> TrainConfig:
        """The published model at size s (smoke: width 64, T = 64, the same layout and r)."""
        overrides = ["model=paper", f"model.r={r}", f"model.vocab_size={256 if self.smoke else PAPER_VOCAB}"]
        overrides += ["model.recipe=tbptt"] if tbptt else []
        overrides += [f"model.injection={injection}"] if injection else []
        if self.smoke:  # L_eff = 10 (p = c = 1, 8 recurrent layers: r = 1, 2, 4, 8 all divide it)
            overrides += [
                "model.d_model=32",
                "model.head_dim=16",
                "model.seq_len=32",
                "model.depth=10",
                "model.n_prelude=1",
                "model.n_coda=1",
            ]
        else:
            overrides += [f"model.d_model={paper_width(size)}"]
        return OmegaConf.to_object(compose([*overrides, *extra]))

    def batch(self, B: int) -> int:
        return max(2, B // 16) if self.smoke else B

    def tokens(self, cfg: TrainConfig, B: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(0)
        idx = torch.randint(0, cfg.model.vocab_size, (B, cfg.model.seq_len + 1), generator=g).to(self.device)
        return idx[:, :-1], idx[:, 1:]

    def autocast(self):
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def free(self) -> None:
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()


def _train_step(check: Check, model, opt, x, y) -> torch.Tensor:
    with check.autocast():
        loss = model(x, y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def _adamw(model) -> torch.optim.Optimizer:
    return torch.optim.AdamW(param_groups(model, 0.0), lr=1e-4)


# ------------------------------------------------------------------------------------------------ sections
def section_device(check: Check) -> dict[str, Any]:
    name = torch.cuda.get_device_name() if check.cuda else "cpu"
    out = {"device": name, "peak_bf16_flops": check.peak, "torch": torch.__version__}
    if check.cuda:
        out["memory_gib"] = torch.cuda.get_device_properties(0).total_memory / GIB
    out["ok"] = check.peak is not None or not check.cuda  # a GPU without a known peak logs no MFU
    return out


def _peak_memory_gib(check: Check, cfg: TrainConfig, B: int) -> float | None:
    """Peak allocated memory of one train step (bf16 autocast, AdamW) then a validation forward at batch B."""
    if check.cuda:
        check.free()
        torch.cuda.reset_peak_memory_stats()
    model = LoopedTransformer(cfg.model).to(check.device)
    opt = _adamw(model)
    x, y = check.tokens(cfg, B)
    _train_step(check, model, opt, x, y)
    model.eval()
    with torch.no_grad(), check.autocast():
        model(x, y)
    check.sync()
    peak = torch.cuda.max_memory_allocated() / GIB if check.cuda else None
    del model, opt
    check.free()
    return peak


def section_memory(check: Check) -> dict[str, Any]:
    rows, ok = [], True
    for size, B in ((16, 32), (28, 16), (34, 8)):
        for r, tbptt in ((1, False), (8, True)):
            cfg = check.config(size, r, tbptt)
            label = f"s{size} B{B} r{r}{' tbptt' if tbptt else ''}"
            try:
                rows.append({"point": label, "peak_gib": _peak_memory_gib(check, cfg, check.batch(B))})
            except torch.cuda.OutOfMemoryError:
                ok = False
                rows.append({"point": label, "peak_gib": "OOM"})
                check.free()
    # (s6, B128): extrapolated from B = 8 and 16 (memory is affine in B), not tried: an OOM can wedge the run
    cfg = check.config(6, 1)
    small, large = _peak_memory_gib(check, cfg, check.batch(8)), _peak_memory_gib(check, cfg, check.batch(16))
    estimate = None
    if small is not None:
        estimate = large + (large - small) / 8 * (128 - 16)
    total = torch.cuda.get_device_properties(0).total_memory / GIB if check.cuda else None
    s6 = {"point": "s6 B128 r1 (estimated)", "peak_gib": estimate, "fits": None if total is None else estimate < total}
    return {
        "rows": rows,
        "s6_B128": s6,
        "device_gib": total,
        "ok": ok and (s6["fits"] is not True or check.smoke),
    }  # B = 128 must NOT fit: that was the bug


def section_dtypes(check: Check) -> dict[str, Any]:
    out, ok = {}, True
    for label, (r, injection) in {"r1": (1, None), "linear r4": (4, "linear"), "hyper r4": (4, "hyper")}.items():
        cfg = check.config(6, r, injection=injection, extra=check.small)
        model = LoopedTransformer(cfg.model).to(check.device)
        seen: set[str] = set()
        for module in model.modules():
            if isinstance(module, Block):
                module.register_forward_pre_hook(lambda mod, args, seen=seen: seen.add(str(args[0].dtype)))
        x, y = check.tokens(cfg, 2)
        with check.autocast():
            model(x, y).backward()
        out[label] = sorted(seen)
        ok &= seen == {"torch.float32"}
        del model
    return {**out, "ok": ok}


def _unique_graphs() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def section_recompile(check: Check) -> dict[str, Any]:
    """Train -> validation with a partial batch -> train for a blocks-compiled truncated-backprop model, then
    the same for a second, whole-model-compiled model: graphs compiled and limit hits. Dynamo's backend is
    "eager": its caching, guards and limits are those of any backend, without minutes of code generation."""
    watch_recompile_limit()
    hits_before, graphs_before = len(recompile_limit_hits()), _unique_graphs()
    phases = {}
    for name, (r, tbptt, mode) in {"first": (2, True, "blocks"), "second": (4, False, "model")}.items():
        cfg = check.config(6, r, tbptt, extra=check.small)
        model = LoopedTransformer(cfg.model).to(check.device)
        compile_model(model, mode, backend="eager")
        opt = _adamw(model)
        B = 4
        x, y = check.tokens(cfg, B)
        start = time.perf_counter()
        _train_step(check, model, opt, x, y)
        model.eval()
        with torch.no_grad(), check.autocast():
            model(x, y)
            model(x[: B - 1], y[: B - 1])  # the partial last validation batch
        model.train()
        _train_step(check, model, opt, x, y)
        check.sync()
        phases[name] = {
            "compile": mode,
            "r": r,
            "tbptt": tbptt,
            "graphs": _unique_graphs() - graphs_before,
            "seconds": time.perf_counter() - start,
        }
        graphs_before = _unique_graphs()
        del model, opt
        check.free()
    hits = recompile_limit_hits()[hits_before:]
    return {**phases, "limit_hits": hits, "ok": not hits}


def _flop_counter_flops(check: Check, cfg: TrainConfig) -> float:
    """FlopCounterMode's count of one forward + backward at batch 1, per token."""
    from torch.utils.flop_counter import FlopCounterMode

    model = LoopedTransformer(cfg.model).to(check.device)
    x, y = check.tokens(cfg, 1)
    with FlopCounterMode(display=False) as counter:
        with check.autocast():
            loss = model(x, y)
        loss.backward()
    del model
    return counter.get_total_flops() / cfg.model.seq_len


def section_throughput(check: Check) -> dict[str, Any]:
    steps, warmup = (2, 1) if check.smoke else (6, 3)
    rows = []
    for size, B in ((6, 32), (22, 16)):
        for r in (1, 8):
            cfg = check.config(size, r)
            F, F_causal = flops_per_token(cfg.model), causal_flops_per_token(cfg.model)
            counted = _flop_counter_flops(check, cfg)
            model = LoopedTransformer(cfg.model).to(check.device)
            compile_model(model, "blocks", backend=check.backend)
            opt = _adamw(model)
            x, y = check.tokens(cfg, check.batch(B))
            for _ in range(warmup):
                _train_step(check, model, opt, x, y)
            check.sync()
            start = time.perf_counter()
            for _ in range(steps):
                _train_step(check, model, opt, x, y)
            check.sync()
            tokens_per_s = steps * x.numel() / (time.perf_counter() - start)
            row = {
                "point": f"s{size} B{B} r{r}",
                "tokens_per_s": tokens_per_s,
                "F": F,
                "F_causal": F_causal,
                "flop_counter_per_token": counted,
                "flop_counter_over_F": counted / F,
            }
            if check.peak:
                row["mfu"] = tokens_per_s * F / check.peak
                row["mfu_causal"] = tokens_per_s * F_causal / check.peak
            rows.append(row)
            del model, opt
            check.free()
    return {"rows": rows, "compile": "blocks", "ok": True}


def section_optimizer(check: Check) -> dict[str, Any]:
    from loopscale.module import LoopedLM, StepAccounting

    steps = 2 if check.smoke else 5
    from loopscale.config_dirs import config_dir

    # both the optimizer and its config group (optim=muonh) of this checkout
    muonh = importlib.util.find_spec("loopscale.muonh") is not None and (config_dir() / "optim" / "muonh.yaml").exists()
    # the GPU trainer's settings (MuonH picks its orthogonalisation dtype from them), uncompiled: the optimizer
    # step is what is timed
    trainer = ("trainer=gpu", "trainer.compile=false") if check.cuda else ()
    cfg = check.config(6, 1, extra=(*trainer, *(("optim=muonh",) if muonh else ())))
    B = check.batch(32)
    accounting = StepAccounting(total_steps=1000, batch_tokens=B * cfg.model.seq_len, flops_per_token=1.0)
    module = LoopedLM(cfg.model, cfg.optim, cfg.trainer, accounting).to(check.device)
    opt = module.configure_optimizers()["optimizer"]
    x, y = check.tokens(cfg, B)
    fwd_bwd_s = opt_s = 0.0
    for step in range(steps + 1):
        check.sync()
        t0 = time.perf_counter()
        with check.autocast():
            loss = module.model(x, y)
        loss.backward()
        check.sync()
        t1 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        check.sync()
        if step:  # the first step builds optimizer state
            fwd_bwd_s += t1 - t0
            opt_s += time.perf_counter() - t1
    name = type(opt).__name__
    return {
        "optimizer": name,
        "muonh_available": muonh,
        "note": None if muonh else "loopscale.muonh / optim=muonh not in this checkout: timed AdamW instead",
        "step_s": (fwd_bwd_s + opt_s) / steps,
        "optimizer_share": opt_s / (fwd_bwd_s + opt_s),
        "ok": True,
    }


def section_resume(check: Check) -> dict[str, Any]:
    from loopscale.module import InjectedFailure
    from loopscale.train import run_training

    runs = check.workdir / "runs"
    if check.smoke:
        base = ["model=tiny", "trainer=cpu", "budget.batch_size=8", f"budget.tokens={10 * 8 * 64}"]
    else:
        base = ["model=paper", "trainer=gpu", "budget.batch_size=16", f"budget.tokens={10 * 16 * 2048}"]
    overrides = [
        *base,
        "budget.mode=tokens",
        "budget.grad_accum=2",
        "trainer.ckpt_every_steps=5",
        "trainer.progress=false",
        "data.val_tokens=16384",
        f"runs_dir={runs}",
        f"data.data_dir={check.data_dir}",
    ]
    start = time.perf_counter()
    killed = False
    try:
        run_training(compose([*overrides, "trainer.fail_at_step=7"]))
    except InjectedFailure:
        killed = True
    record = run_training(compose(overrides))
    return {
        "killed_at_step_7": killed,
        "resumed_from_step": record["resumed_from_step"],
        "status": record["status"],
        "L": record["L"],
        "grad_accum": record.get("grad_accum"),
        "device_batch": record.get("device_batch"),
        "seconds": time.perf_counter() - start,
        "ok": killed and record["status"] == "done" and record["resumed_from_step"] == 5,
    }


SECTIONS: dict[str, Callable[[Check], dict[str, Any]]] = {
    "device": section_device,
    "memory": section_memory,
    "dtypes": section_dtypes,
    "recompile": section_recompile,
    "throughput": section_throughput,
    "optimizer": section_optimizer,
    "resume": section_resume,
}


def _summary(name: str, result: dict[str, Any]) -> str:
    if "error" in result:
        return result["error"].splitlines()[-1][:100]
    if name == "device":
        return f"{result['device']}, peak {result['peak_bf16_flops']}"
    if name == "memory":
        cells = ", ".join(
            f"{r['point']}: {r['peak_gib'] if not isinstance(r['peak_gib'], float) else round(r['peak_gib'], 1)}"
            for r in result["rows"]
        )
        return f"{cells}; s6 B128 est {result['s6_B128']['peak_gib']} fits={result['s6_B128']['fits']}"
    if name == "dtypes":
        return ", ".join(f"{k}: {v}" for k, v in result.items() if k not in ("ok", "seconds"))
    if name == "recompile":
        return (
            f"graphs {result['first']['graphs']} + {result['second']['graphs']}, limit hits {len(result['limit_hits'])}"
        )
    if name == "throughput":
        return "; ".join(
            f"{r['point']} {r['tokens_per_s']:,.0f} tok/s mfu {r.get('mfu', float('nan')):.2f}"
            f"/{r.get('mfu_causal', float('nan')):.2f} FC/F {r['flop_counter_over_F']:.3f}"
            for r in result["rows"]
        )
    if name == "optimizer":
        return f"{result['optimizer']} {100 * result['optimizer_share']:.1f}% of a {result['step_s'] * 1e3:.0f} ms step"
    if name == "resume":
        return f"killed {result['killed_at_step_7']}, resumed from {result['resumed_from_step']}, {result['status']}"
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (CPU): checks the script itself")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {list(SECTIONS)}")
    parser.add_argument(
        "--compile-backend",
        default=None,
        help="torch.compile backend (default inductor; eager in --smoke: same Dynamo caching, no code generation)",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="runs of the resume section (default: a temp dir)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="data cache of the resume section (default: WORKDIR/data; the embedded corpus is tokenized there once)",
    )
    args = parser.parse_args(argv)
    unknown = set(args.sections.split(",")) - SECTIONS.keys()
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {list(SECTIONS)}")
    backend = args.compile_backend or ("eager" if args.smoke else "inductor")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gpu_check-"))
    check = Check(args.smoke, workdir, backend, args.data_dir)
    results: dict[str, dict[str, Any]] = {}
    for name in args.sections.split(","):
        start = time.perf_counter()
        print(f"== {name}", flush=True)
        try:
            result = SECTIONS[name](check)
        except Exception:  # one section's failure must not stop the others
            result = {"ok": False, "error": traceback.format_exc()}
            print(result["error"], file=sys.stderr, flush=True)
        result.setdefault("seconds", time.perf_counter() - start)
        results[name] = result
        print(json.dumps(result, default=str), flush=True)
    print(f"\n{'section':<11} {'ok':<4} {'s':>6}  summary")
    for name, result in results.items():
        print(f"{name:<11} {'yes' if result['ok'] else 'NO':<4} {result['seconds']:>6.1f}  {_summary(name, result)}")
    if args.out:
        args.out.write_text(json.dumps({"smoke": args.smoke, "sections": results}, indent=2, default=str))
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
