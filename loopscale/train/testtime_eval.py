"""Every finished model scored across r (docs/design.md, "Test-time depth"): the final validation set run again at
each r_eval of `trainer.r_eval`, recorded in run.json (`r_eval_scores`: r_eval, val_loss, forward FLOPs per token at
that r, the plan's `accounting.eval_flops_at`), and the long-form test-time table `loopscale collect` writes beside the
runs table (one row per run and r_eval), which `loopscale fit --law testtime` reads.

The model is the trained one, unchanged: `LoopedTransformer.forward(..., r=r_eval)` runs r_eval passes, a pass
past the trained r reusing the last pass's own parameters (hyper-connection scalars, loop-index embeddings,
per-pass adapters: model/transformer.py). The scoring runs in eval mode, so a random initial state (Huginn,
Parcae) is drawn as at any evaluation. The score at the trained r is the run's own L (not validated twice).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from loopscale.train.run_json import REvalScore, RunRecord, TableRow, read_record_or_none

# the test-time table's columns, in order (`testtime_rows`); `loopscale fit --law testtime` reads model, r_eval,
# r_train (the trained r; a sampled-r run's mean), r_sampling (its scheme: fixed, or the distribution) and L
TESTTIME_COLUMNS = [
    *("model", "r_eval", "L", "r_train", "r_sampling", "flops_per_token_eval", "recipe", "N_once", "N_rec"),
    *("N_pass", "D", "C", "width", "seed", "run_dir"),
]


def score_r_eval(trainer, module, datamodule, L_at_r: float | None) -> list[REvalScore]:
    """`score_rows` of each r_eval of the module's plan (trainer.r_eval: `RunPlan.r_evals`): Lightning's validate
    on the final set with the module's eval_r set (its validation_step passes it to the model), the run's L at its
    own r."""
    losses: dict[int, float] = {}
    for r in module.plan.run.r_evals:
        if r == module.model_cfg.r and L_at_r is not None:
            losses[r] = L_at_r
            continue
        module.eval_r = r
        try:
            losses[r] = trainer.validate(module, datamodule=datamodule, verbose=False)[0][f"testtime/val_loss_r{r}"]
        finally:
            module.eval_r = None
    return score_rows(losses, module.plan.run.eval_flops)


def score_rows(losses: dict[int, float], eval_flops: dict[int, float]) -> list[REvalScore]:
    """The loss at each pass count, in increasing r_eval, and the forward FLOPs per token there (the plan's
    `eval_flops`: `accounting.eval_flops_at`), as run.json records a score (the finished model's r_eval_scores, each
    curve point's: lightning_module.evaluate_curve_point)."""
    return [
        REvalScore(r_eval=int(r), val_loss=float(loss), flops_per_token_eval=eval_flops[r])
        for r, loss in sorted(losses.items())
    ]


def testtime_rows(rows: list[TableRow]) -> pd.DataFrame:
    """The long-form test-time table of a sweep's finished runs (collect's rows): one row per run and r_eval, read
    from each run's record (`r_eval_scores`); the model label is the run name (the run dir where two share one).
    Empty (with its columns) when no run was scored."""
    names = [row.get("run_name") for row in rows]
    out = []
    for row in rows:
        record = read_record_or_none(Path(row["run_dir"]) / "run.json") or RunRecord()
        label = row["run_name"] if names.count(row.get("run_name")) == 1 else row["run_dir"]
        sampling = record.get("r_sampling") or "fixed"
        for score in record.r_eval_scores or []:
            out.append(
                {
                    "model": label,
                    "r_eval": score["r_eval"],
                    "L": score["val_loss"],
                    "r_train": row.get("r"),
                    "r_sampling": sampling,
                    "flops_per_token_eval": score["flops_per_token_eval"],
                    **{k: row.get(k) for k in ("recipe", "N_once", "N_rec", "N_pass", "D", "C", "width", "seed")},
                    "run_dir": row["run_dir"],
                }
            )
    return pd.DataFrame(out, columns=TESTTIME_COLUMNS)
