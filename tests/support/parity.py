"""One model's accounting against the model itself: what every registered injection form, block form and recipe is
checked with (tests/unit/test_injections.py, test_blocks.py, test_recipes.py; docs/architecture.md, "How to add
a loop design"): parameters by accounting class, matmul FLOPs against FlopCounterMode, the memory model against
what autograd keeps, the MuonH state, gradients and pickling."""

from __future__ import annotations

import pickle

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from loopscale.blocks.registry import form as block_form
from loopscale.config.model import ModelConfig
from loopscale.injections import registry
from loopscale.injections.form import MATRIX, N_ONCE, N_PASS, N_REC
from loopscale.model.accounting import grad_passes, layer_plan, matmul_flops_per_token, param_counts
from loopscale.model.memory import activation_bytes, state_bytes
from loopscale.model.transformer import LoopedTransformer
from loopscale.train.optim.groups import MATRIX as MATRIX_GROUP
from loopscale.train.optim.groups import recipe_param_groups
from loopscale.train.optim.muonh import MuonH
from support.saved import kept_for_backward

B = 2  # sequences in the checks' batch
MEMORY_OVER = 0.3  # the memory model may over-count the forms' own bytes per token by this share (hyper: <= 14%)
MATRIX_PREFIXES = ("attn.q.", "attn.k.", "attn.v.", "attn.proj.", "mlp.fc.", "mlp.proj.")


def numel(*modules) -> int:
    return sum(p.numel() for m in modules if m is not None for p in m.parameters())


def layer_modules(model: LoopedTransformer) -> dict[str, list]:
    return {"prelude": list(model.prelude), "recurrent": list(model.recurrent), "coda": list(model.coda)}


def own_bytes_per_token(cfg: ModelConfig) -> int:
    """The bytes per token the forms' specs add to the pre-norm model: injection and block form."""
    block = block_form(cfg.block)
    layers = sum(n * block.saved_bytes_per_token(cfg, w, n_grad) for w, n, _, n_grad in layer_plan(cfg))
    return registry.form(cfg.injection).saved_bytes_per_token(cfg, grad_passes(cfg)) + layers


def assert_parity(cfg: ModelConfig) -> None:
    """The forms' specs against their modules inside a real model: parameters, FLOPs, memory, optimizer state,
    gradients and pickling."""
    form, block = registry.form(cfg.injection), block_form(cfg.block)
    torch.manual_seed(0)
    model = LoopedTransformer(cfg)
    # parameters: the specs' lists are the modules', name for name, and the accounting adds them up by class
    declared = [(p.name, p.shape) for p in form.params(cfg)]
    assert declared == [(n, tuple(p.shape)) for n, p in model.injection.named_parameters()]
    # a parameter that starts at zero says so (Param.zero_init: the config refuses optim=muonh for such a matrix)
    inits = dict(model.injection.named_parameters())
    assert {p.name for p in form.params(cfg) if not inits[p.name].any()} == {
        p.name for p in form.params(cfg) if p.zero_init
    }
    per_pass = {}
    for where, layers in layer_modules(model).items():
        own = block.params(cfg, where)
        per_pass[where] = sum(p.numel for p in own if p.counts_in == N_PASS) * len(layers)
        for layer in layers:
            found = [(n, tuple(p.shape)) for n, p in layer.named_parameters() if not n.startswith(MATRIX_PREFIXES)]
            assert sorted(found) == sorted((p.name, p.shape) for p in own), (where, found)
            zero = {n for n, p in layer.named_parameters() if not n.startswith(MATRIX_PREFIXES) and not p.any()}
            assert zero == {p.name for p in own if p.zero_init}, (where, zero)
    counts, inj = param_counts(cfg), form.counts(cfg)
    assert counts.N_rec == numel(model.recurrent) - per_pass["recurrent"] + inj[N_REC]
    norms = (model.embed_norm, model.pass_norm, model.final_norm)
    assert (
        counts.N_once == numel(model.prelude, model.coda, *norms) - per_pass["prelude"] - per_pass["coda"] + inj[N_ONCE]
    )
    assert counts.N_pass == sum(per_pass.values()) + inj[N_PASS]
    assert counts.total == sum(p.numel() for p in model.parameters())
    idx = torch.randint(0, cfg.vocab_size, (B, cfg.seq_len), generator=torch.Generator().manual_seed(1))
    # FLOPs: a forward + backward under SDPA's math backend, every matmul counted (accounting's docstring)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(idx, idx).backward()
    assert matmul_flops_per_token(cfg) == counter.get_total_flops() / (B * cfg.seq_len)
    first_grad_pass = cfg.r - grad_passes(cfg)
    for name, p in model.named_parameters():  # every parameter a gradient, but per-pass slices of truncated passes
        if p.grad is None:
            assert first_grad_pass > 0 and p.dim() == 3 and "adapters" in name, name
        else:
            assert p.grad.isfinite().all(), name
    # the modules pickle (trainer.strategy=ddp_spawn sends the model to its workers) as the same classes
    for module in (model.injection, *(layers[0] for layers in layer_modules(model).values() if layers)):
        restored = pickle.loads(pickle.dumps(module))
        assert type(restored) is type(module) and restored.state_dict().keys() == module.state_dict().keys()
    assert_memory_covers(cfg, model)
    # optimizer: one MuonH step allocates the state the memory model predicts from the forms' groups
    model.zero_grad()
    groups = [
        {"name": g, "params": ps, "lr": 1e-3, "adamw": g != MATRIX_GROUP}
        for g, ps in recipe_param_groups(model).items()
    ]
    opt = MuonH(groups, momentum=0.95, ortho_dtype="fp32", betas=(0.8, 0.95), eps=1e-10, weight_decay=0.0)
    model(idx, idx).backward()
    opt.step()
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
    assert state_bytes(cfg, "muonh", cuda=False)[2] == sum(t.numel() * t.element_size() for t in state)


def assert_memory_covers(cfg: ModelConfig, model: LoopedTransformer) -> None:
    """What autograd keeps (bf16 autocast, eager) at two batch sizes, split into bytes per token (the slope) and
    bytes per forward (the intercept), against the memory model; outside the forms both are exact at this size.
    Per token it never under-counts and over-counts at most MEMORY_OVER of the forms' own bytes; per forward it
    may miss a per-pass copy (a slice, a cast) of each parameter that is not a matrix."""
    form, T = registry.form(cfg.injection), cfg.seq_len
    ids = {b: torch.randint(0, cfg.vocab_size, (b, T), generator=torch.Generator().manual_seed(b)) for b in (2, 4)}
    torch.manual_seed(0)  # a form that draws in its forward (a random initial state) draws the same at both sizes
    measured = {b: kept_for_backward(model, ids[b]) for b in ids}
    predicted = {b: activation_bytes(cfg, b, False) for b in ids}
    slope = {k: (v[4] - v[2]) / (2 * T) for k, v in (("measured", measured), ("predicted", predicted))}
    own = own_bytes_per_token(cfg)
    assert 0 <= slope["predicted"] - slope["measured"] <= MEMORY_OVER * own, (slope, own)
    intercept = (predicted[2] - 2 * T * slope["predicted"]) - (measured[2] - 2 * T * slope["measured"])
    not_matrices = sum(p.numel for p in form.params(cfg) if p.group != MATRIX)
    assert abs(intercept) <= 4 * cfg.r * not_matrices + 64, intercept
