"""The published recipe's learning rates (docs/design.md, "The published recipe"); a run's are worked out once,
by its plan (`peak_lrs` from loopscale/train/plan.py's plan_training).

The groups (matrix, head, embedding, norm, hyper) are defined in loopscale/train/optim/groups.py.

Learning rates (`lrs_for`), with B the global tokens per step and D the run's target tokens (C / F before
rounding to whole batches, as the published code takes it; RunPlan.D_target):
    matrix           lr x (B / B_ref)^0.558 x (D / D_ref)^-0.32
    loop             the matrix lr x optim.lr_loop (a group only when lr_loop != 1; groups.py)
    head, embedding  lr_<group> x (d / d_ref)^-0.5 x (B / B_ref)^0.558
    norm, hyper      lr_<group> x (d / d_ref)^-0.5                     (the batch factor is not applied)
with B_ref = 2^18, d_ref = 640 (the paper width of the reference size 10), and D_ref = 10 x the effective
parameters of the reference model: prelude + coda + norms + r x (recurrent block + injection), embeddings
excluded, for size 10 with the run's r, in the 0-20-0 layout at r = 1 and the 2-4-2 layout with the concat
injection otherwise, whatever the run's recipe (as the authors' code builds it: at r = 2 or 8 the reference
is not the run's own layout, and a hyper run's reference has the concat matrix, not lanes). Base lrs: matrix
0.014, head 0.004, embedding 0.3, norm 0.005, hyper 0.01 (loopscale/conf/optim/muonh.yaml).

`optim.transfer=none` uses the base lrs as given: for CPU toy models, whose batch and D are thousands of
times below the reference's, the published transfer extrapolates far outside where it was fitted.
"""

from __future__ import annotations

from loopscale.blocks.form import WHERE
from loopscale.blocks.registry import form as block_form
from loopscale.config.model import ModelConfig
from loopscale.config.naming import paper_width
from loopscale.config.schema import OptimConfig
from loopscale.errors import ConfigError
from loopscale.injections.form import SCALAR
from loopscale.injections.registry import form as injection_form
from loopscale.train.optim.groups import EMBEDDING, HEAD, HYPER, LOOP, MATRIX, NORM

BATCH_EXPONENT = 0.558  # lr ~ B^0.558
DATA_EXPONENT = -0.32  # matrix lr ~ (D / D_ref)^-0.32
WIDTH_EXPONENT = -0.5  # AdamW lrs ~ (d / d_ref)^-0.5


# ----------------------------------------------------------------------------------------------------
# learning rates


def lrs_for(cfg: ModelConfig, batch_tokens: int, D_tokens: int, optim: OptimConfig, D_ref: float) -> dict[str, float]:
    """Peak lr of every group this model has (the schedule multiplies them all alike); D_ref of the reference model
    at optim.transfer_ref_size (`accounting.d_ref_tokens`)."""
    for name, value in (("batch_tokens", batch_tokens), ("D_tokens", D_tokens)):
        if not value > 0:
            raise ConfigError(f"{name}={value!r} must be > 0")
    base = {
        MATRIX: optim.lr,
        HEAD: optim.lr_head,
        EMBEDDING: optim.lr_embedding,
        NORM: optim.lr_norm,
        HYPER: optim.lr_hyper,
    }
    if cfg.tie_embeddings:
        del base[HEAD]
    block = block_form(cfg.block)
    declared = [*injection_form(cfg.injection).params(cfg), *(p for w in WHERE for p in block.params(cfg, w))]
    if SCALAR not in {p.group for p in declared}:  # HYPER: the forms' scalars (lanes, per-pass adapters, ...)
        del base[HYPER]
    if optim.lr_loop != 1.0:  # the per-pass matrices in a group of their own, transferred as the other matrices
        base[LOOP] = optim.lr * optim.lr_loop
    if optim.transfer == "none":
        return base
    batch = (batch_tokens / optim.transfer_ref_batch_tokens) ** BATCH_EXPONENT
    width = (cfg.d_model / paper_width(optim.transfer_ref_size)) ** WIDTH_EXPONENT
    data = (D_tokens / D_ref) ** DATA_EXPONENT
    factors = {
        MATRIX: batch * data,
        LOOP: batch * data,
        HEAD: width * batch,
        EMBEDDING: width * batch,
        NORM: width,  # published: the norm and hyper lrs are scaled with width only
        HYPER: width,
    }
    return {group: lr * factors[group] for group, lr in base.items()}


def adamw_lrs(cfg: ModelConfig, optim: OptimConfig) -> dict[str, float]:
    """The plain AdamW recipe's lrs by loopscale.model.transformer.param_groups name: muP width scaling, when asked, of
    the decayed matrices (none are decayed when weight_decay = 0, so then nothing is scaled)."""
    scale = optim.base_width / cfg.d_model if optim.width_scaling and optim.weight_decay > 0 else 1.0
    return {"decay": optim.lr * scale, "no_decay": optim.lr, "hyper": optim.lr}


def peak_lrs(cfg: ModelConfig, optim: OptimConfig, batch_tokens: int, D_tokens: int, D_ref: float) -> dict[str, float]:
    """The peak lr of every parameter group of optim.optimizer: MuonH's recipe groups (`lrs_for`, at the global
    tokens per step, the run's target tokens and D_ref) or plain AdamW's (`adamw_lrs`)."""
    lrs = adamw_lrs(cfg, optim) if optim.optimizer == "adamw" else lrs_for(cfg, batch_tokens, D_tokens, optim, D_ref)
    # the experiment's tuned rule (`loopscale tune`) and an lr grid's multiplier on top of it (1 and 1 by default)
    return {group: lr * optim.lr_rule * optim.lr_scale for group, lr in lrs.items()}
