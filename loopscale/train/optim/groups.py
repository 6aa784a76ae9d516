"""Every optimizer's parameter groups, by the role of the module a parameter belongs to (one place for both recipes).

optim=muonh (the published recipe; lr_transfer.py gives each group's lr):
    matrix     every 2-D weight of the prelude, recurrent and coda blocks; the injection's matrix-group ones (MuonH)
    head       lm_head.*                                  (AdamW)
    embedding  embed.* (also the head when it is tied)    (AdamW)
    norm       1-D gains (RMSNorm weights); the injection's norm-group ones (AdamW)
    hyper      the forms' scalar-group parameters: the hyper-connection coefficients, per-pass adapters, ... (AdamW)
    loop       only when optim.lr_loop != 1: the matrices applied at every pass, split off `matrix` (MuonH): the
               recurrent block's 2-D weights and the injection's matrix-group ones
optim=adamw: decay (weight matrices), no_decay (norm gains, embeddings, other 1-D parameters, a form's matrix
declared decay=False: Parcae's B) and hyper (the forms' scalars, never decayed).
The injection's and the block form's own parameters are in the group their form declares (loopscale/injections/,
loopscale/blocks/, `Param.group`): alpha [r, K] and M [r, K, K] of hyper-connections and the per-pass adapters
[r, rank, in] are "2-D or more" but are scalars to the optimizer, not matrices.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopscale.blocks.registry import form as block_form
from loopscale.injections import form as forms
from loopscale.injections.registry import form as injection_form

if TYPE_CHECKING:  # annotations only: the group names are read torch-free (lr_transfer, the run plan)
    from torch import nn

MATRIX, HEAD, EMBEDDING, NORM, HYPER, LOOP = "matrix", "head", "embedding", "norm", "hyper", "loop"
MUON_GROUPS = (MATRIX, LOOP)  # the groups MuonH updates; the rest are AdamW's
BLOCK_PREFIXES = ("prelude.", "recurrent.", "coda.", "injection.")
RECIPE_GROUP = {forms.MATRIX: MATRIX, forms.SCALAR: HYPER, forms.NORM: NORM}  # a form's group -> MuonH recipe's


def form_params(model: nn.Module) -> dict[str, forms.Param]:
    """{full name: Param} of the parameters the injection form and the block form declare in a LoopedTransformer
    (`injection.<name>`, `<prelude|recurrent|coda>.<i>.<name>`), from its config; empty for a model without a
    config (its 2-D `injection.*` weights are matrices)."""
    cfg = getattr(model, "cfg", None)
    if cfg is None:
        return {}
    found = {f"injection.{p.name}": p for p in injection_form(cfg.injection).params(cfg)}
    block = block_form(cfg.block)
    for where, layers in (("prelude", cfg.n_prelude), ("recurrent", cfg.n_rec), ("coda", cfg.n_coda)):
        own = block.params(cfg, where)
        found.update({f"{where}.{i}.{p.name}": p for i in range(layers) for p in own})
    return found


def form_groups(model: nn.Module) -> dict[str, str]:
    """{full name: form group} of every parameter a form declares (`form_params`)."""
    return {name: p.group for name, p in form_params(model).items()}


def param_role(name: str, param: nn.Parameter, injection: dict[str, str], loop_group: bool = False) -> str:
    """The recipe's group of one named parameter of LoopedTransformer (see the module docstring); `injection`
    maps the forms' parameters to their groups (`form_groups`); `loop_group` splits the per-pass matrices off."""
    if name.startswith("lm_head."):
        return HEAD
    if name.startswith("embed."):
        return EMBEDDING
    per_pass = loop_group and name.startswith(("recurrent.", "injection."))
    if name in injection:
        role = RECIPE_GROUP[injection[name]]
        return LOOP if per_pass and role == MATRIX else role
    if param.dim() == 1:
        return NORM
    if param.dim() == 2 and name.startswith(BLOCK_PREFIXES):
        return LOOP if per_pass else MATRIX
    raise ValueError(
        f"parameter {name!r} of shape {tuple(param.shape)} has no group in the MuonH recipe: "
        f"groups are 2-D matrices under {', '.join(BLOCK_PREFIXES)}, lm_head., embed., 1-D norm "
        "gains and hyper-connection scalars"
    )


def recipe_param_groups(model: nn.Module, loop_group: bool = False) -> dict[str, list[nn.Parameter]]:
    """{group: parameters} of a LoopedTransformer, matrix first; empty groups left out; `loop_group`: the per-pass
    matrices in a group of their own (optim.lr_loop != 1)."""
    injection = form_groups(model)
    groups: dict[str, list[nn.Parameter]] = {MATRIX: [], LOOP: [], HEAD: [], EMBEDDING: [], NORM: [], HYPER: []}
    for name, p in model.named_parameters():  # a tied head is the embedding: listed once
        if p.requires_grad:
            groups[param_role(name, p, injection, loop_group)].append(p)
    return {k: v for k, v in groups.items() if v}


def adamw_param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups: decay on weight matrices; none on norm gains, embeddings, the injection's scalars
    (hyper-connection coefficients) and any other 1-D parameter."""
    groups = {"decay": [], "no_decay": [], "hyper": []}
    declared = form_params(model)
    for name, p in model.named_parameters():  # a tied head is the embedding: listed once
        if not p.requires_grad:
            continue
        spec = declared.get(name)
        if spec is not None and spec.group == forms.SCALAR:
            groups["hyper"].append(p)
        elif p.dim() < 2 or name.startswith("embed.") or (spec is not None and not spec.decayed):
            groups["no_decay"].append(p)
        else:
            groups["decay"].append(p)
    decay = {"decay": weight_decay, "no_decay": 0.0, "hyper": 0.0}
    return [{"name": k, "params": v, "weight_decay": decay[k]} for k, v in groups.items() if v]
