"""Every optimizer's parameter groups, by the role of the module a parameter belongs to (one place for both recipes).

optim=muonh (the published recipe; lr_transfer.py gives each group's lr):
    matrix     every 2-D weight of the prelude, recurrent and coda blocks and of the injection (MuonH)
    head       lm_head.*                                  (AdamW)
    embedding  embed.* (also the head when it is tied)    (AdamW)
    norm       1-D gains (RMSNorm weights)                (AdamW)
    hyper      every hyper-connection scalar, injection.* when the injection is HyperConnections (AdamW)
optim=adamw: decay (weight matrices), no_decay (norm gains, embeddings, other 1-D parameters) and hyper
(hyper-connection scalars, never decayed).
"""

from __future__ import annotations

from torch import nn

from loopscale.model.hyper import HyperConnections

MATRIX, HEAD, EMBEDDING, NORM, HYPER = "matrix", "head", "embedding", "norm", "hyper"
BLOCK_PREFIXES = ("prelude.", "recurrent.", "coda.", "injection.")


def param_role(name: str, param: nn.Parameter, hyper_injection: bool) -> str:
    """The recipe's group of one named parameter of LoopedTransformer (see the module docstring).

    Works for either injection form: two d x d matrices (from_e / from_s) or one Linear(2d -> d), since both
    are 2-D weights under `injection.`."""
    if name.startswith("lm_head."):
        return HEAD
    if name.startswith("embed."):
        return EMBEDDING
    if name.startswith("injection.") and hyper_injection:
        return HYPER  # alpha [r, K] and M [r, K, K] are "2-D or more" but are mixing scalars, not matrices
    if param.dim() == 1:
        return NORM
    if param.dim() == 2 and name.startswith(BLOCK_PREFIXES):
        return MATRIX
    raise ValueError(
        f"parameter {name!r} of shape {tuple(param.shape)} has no group in the MuonH recipe: "
        f"groups are 2-D matrices under {', '.join(BLOCK_PREFIXES)}, lm_head., embed., 1-D norm "
        "gains and hyper-connection scalars"
    )


def recipe_param_groups(model: nn.Module) -> dict[str, list[nn.Parameter]]:
    """{group: parameters} of a LoopedTransformer, matrix first; empty groups left out."""
    hyper = isinstance(getattr(model, "injection", None), HyperConnections)
    groups: dict[str, list[nn.Parameter]] = {MATRIX: [], HEAD: [], EMBEDDING: [], NORM: [], HYPER: []}
    for name, p in model.named_parameters():  # a tied head is the embedding: listed once
        if p.requires_grad:
            groups[param_role(name, p, hyper)].append(p)
    return {k: v for k, v in groups.items() if v}


def adamw_param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups: decay on weight matrices; none on norm gains, embeddings, hyper-connection
    coefficients (all of `injection` when it is HyperConnections) and any other 1-D parameter."""
    groups = {"decay": [], "no_decay": [], "hyper": []}
    hyper = isinstance(model.injection, HyperConnections)
    for name, p in model.named_parameters():  # a tied head is the embedding: listed once
        if not p.requires_grad:
            continue
        if hyper and name.startswith("injection."):
            groups["hyper"].append(p)
        elif p.dim() < 2 or name.startswith("embed."):
            groups["no_decay"].append(p)
        else:
            groups["decay"].append(p)
    decay = {"decay": weight_decay, "no_decay": 0.0, "hyper": 0.0}
    return [{"name": k, "params": v, "weight_decay": decay[k]} for k, v in groups.items() if v]
