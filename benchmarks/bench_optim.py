"""MuonH (optim=muonh, the published recipe) vs the AdamW recipe (optim=adamw) at equal FLOPs on CPU grid
points, and MuonH's share of the training step time.

    .venv/bin/python benchmarks/bench_optim.py [--points C1.25e11-d64:1 C1.25e11-d64:4] [--runs runs/bench_optim]

Each point (budget-width:r of experiment=isodepth_cpu) is trained once per recipe: the same model, data,
budget and so the same steps and FLOPs; printed are the final val losses. The recipes: `adamw` (lr 3e-3,
weight decay 0.1, 5% warmup, clipping 1.0), `muonh` (published transfer: lrs scaled to this batch, width and
D) and `muonh-none` (the base lrs as given, optim.transfer=none). Then, per model, the time of forward +
backward and of optimizer.step() over `--time-steps` steps (after 3 warm-up steps), one thread: MuonH's share
of the step, next to AdamW's. First, the singular-value band of MuonH's orthogonalised update on the model's
real first gradients (`--band-only` prints just that). Runs are sequential, one torch thread; on a shared CPU
the absolute times move
with the load, the shares less so.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from step_timing import step_times

from loopscale.config.dirs import train_config
from loopscale.config.schema import with_vocab
from loopscale.data.shards import prepare
from loopscale.data.windows import batch_at
from loopscale.train.entry import run_training

REPO_ROOT = Path(__file__).resolve().parents[1]

RECIPES = {"adamw": ["optim=adamw"], "muonh": ["optim=muonh"], "muonh-none": ["optim=muonh", "optim.transfer=none"]}


def point_config(point: str, r: int, recipe: str, runs: Path, data_dir: Path):
    return train_config(
        [
            "experiment=isodepth_cpu",
            f"point={point}",
            f"model.r={r}",
            *RECIPES[recipe],
            "trainer.progress=false",
            "trainer.num_threads=1",
            f"runs_dir={runs / recipe}",
            f"data.data_dir={data_dir}",
        ]
    )


def singular_value_band(cfg, rel_floor: float = 1e-3) -> tuple[float, float, float]:
    """Over every MuonH matrix of this model at its first gradient: the band [min, max] of the singular
    values of the orthogonalised gradient (before the rescale), counting those whose input singular value is
    at least rel_floor x the matrix's largest, and the share of all singular values below that floor."""
    from loopscale.model.transformer import LoopedTransformer
    from loopscale.train.optim.groups import MATRIX, recipe_param_groups
    from loopscale.train.optim.muonh import polar_express

    prepared = prepare(cfg.data, progress=False)
    cfg = with_vocab(cfg, prepared.vocab_size)
    torch.manual_seed(0)
    model = LoopedTransformer(cfg.model)
    x, y = batch_at(prepared, 0, 0, 0, cfg.budget.batch_size, cfg.model.seq_len)
    model(x, y).backward()
    lo, hi, small, total = float("inf"), 0.0, 0, 0
    for p in recipe_param_groups(model)[MATRIX]:
        s_in = torch.linalg.svdvals(p.grad)
        s_out = torch.linalg.svdvals(polar_express(p.grad))
        kept = s_out[s_in >= rel_floor * s_in[0]]  # both sorted largest first
        lo, hi = min(lo, float(kept.min())), max(hi, float(kept.max()))
        small += len(s_in) - len(kept)
        total += len(s_in)
    return lo, hi, small / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--points", nargs="+", default=["C1.25e11-d64:1", "C1.25e11-d64:4"], help="point:r of experiment=isodepth_cpu"
    )
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--runs", type=Path, default=Path("runs/bench_optim"))
    parser.add_argument("--data-dir", type=Path, default=Path("data/cache"))
    parser.add_argument("--time-steps", type=int, default=10)
    parser.add_argument("--band-only", action="store_true", help="only the singular-value band on real gradients")
    args = parser.parse_args()
    torch.set_num_threads(1)

    for spec in args.points:
        point, r = spec.split(":")
        for floor in (1e-2, 1e-3):
            lo, hi, small = singular_value_band(point_config(point, int(r), "muonh", args.runs, args.data_dir), floor)
            print(
                f"{point} r={r}: orthogonalised first gradients, singular values in [{lo:.3f}, {hi:.3f}] for "
                f"inputs >= {floor:g} x the largest ({small:.1%} of all singular values are under that floor)"
            )
    if args.band_only:
        return

    print(
        f"{'point':16s} {'r':>2s} {'steps':>5s} "
        + " ".join(f"{name:>11s}" for name in args.recipes)
        + "   (final val loss, nats)"
    )
    for spec in args.points:
        point, r = spec.split(":")
        losses, steps = [], None
        for recipe in args.recipes:
            record = run_training(point_config(point, int(r), recipe, args.runs, args.data_dir))
            losses.append(record["L"])
            steps = record["steps"]
        print(f"{point:16s} {r:>2s} {steps:5d} " + " ".join(f"{loss:11.4f}" for loss in losses), flush=True)

    print(f"\n{'point':16s} {'r':>2s} {'recipe':>10s} {'fwd+bwd ms':>11s} {'opt ms':>8s} {'opt share':>9s}")
    for spec in args.points:
        point, r = spec.split(":")
        for recipe in ("adamw", "muonh"):
            fb, opt, _ = step_times(point_config(point, int(r), recipe, args.runs, args.data_dir), args.time_steps)
            print(
                f"{point:16s} {r:>2s} {recipe:>10s} {1e3 * fb:11.1f} {1e3 * opt:8.1f} {opt / (fb + opt):9.1%}",
                flush=True,
            )


if __name__ == "__main__":
    main()
