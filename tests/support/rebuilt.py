"""A trained model's layout built again at another pass count with its weights copied: what scoring at r_eval
must equal (test_testtime_eval.py for every recipe; test_curve_r_eval.py at each point of a loss curve)."""

from __future__ import annotations

import copy

import torch

from loopscale.model.transformer import LoopedTransformer


def rebuilt_at(model: LoopedTransformer, r_eval: int) -> LoopedTransformer:
    """The trained model's layout built again for r_eval passes, its weights copied: a per-pass tensor (first
    dimension r_train here, r_eval there) takes pass min(i, r_train - 1)'s slice for its pass i (the documented
    rule), every other tensor as it is; stable residual scaling keeps the trained scale lambda / (r_train sqrt k)."""
    cfg = copy.copy(model.cfg)  # the layout kept, only the pass count changed (accounting.eval_flops_at does so)
    cfg.r = r_eval
    if "residual_lambda" in model.cfg.options or cfg.block == "scaled_residual":
        lam = model.cfg.options.get("residual_lambda", 1.0)
        cfg.options = {**model.cfg.options, "residual_lambda": lam * r_eval / model.cfg.r}
    other = LoopedTransformer(cfg)
    state = model.state_dict()
    own = other.state_dict()
    for name, tensor in own.items():
        source = state[name]
        if torch.is_tensor(source) and source.shape != tensor.shape:  # per pass: [r_train, ...] -> [r_eval, ...]
            index = torch.clamp(torch.arange(r_eval), max=model.cfg.r - 1)
            source = source[index]
        own[name] = source
    other.load_state_dict(own)
    return other
