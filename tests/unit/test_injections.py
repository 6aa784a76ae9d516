"""loopscale/injections/: every registered form against its own module (parameters, FLOPs, the memory model, the
optimizer state, a forward and backward), a form added as one file (the worked example of docs/architecture.md),
and no injection-name comparison outside the forms' own files."""

from __future__ import annotations

import ast
import json
import pickle
import re
import sys
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

import loopscale
from loopscale import injections
from loopscale.config.model import ModelConfig
from loopscale.errors import ConfigError
from loopscale.injections import registry
from loopscale.injections.form import N_ONCE, N_PASS, N_REC, SCALAR, InjectionForm, Param
from loopscale.model.accounting import (
    accounting_report,
    cpu_model,
    flops_per_token,
    grad_passes,
    matmul_flops_per_token,
    param_counts,
)
from loopscale.model.memory import activation_bytes, state_bytes
from loopscale.model.transformer import LoopedTransformer
from loopscale.train.optim.groups import MATRIX, recipe_param_groups
from loopscale.train.optim.muonh import MuonH
from support.cli import run_cli
from support.saved import kept_for_backward
from support.train import tiny_model

PACKAGE = Path(loopscale.__file__).parent
DOCS = PACKAGE.parent / "docs" / "architecture.md"
B = 2  # sequences in the checks' batch
MEMORY_OVER = 0.3  # the memory model may over-count a form's own bytes per token by this share (hyper here: <= 14%)


def numel(*modules) -> int:
    return sum(p.numel() for m in modules if m is not None for p in m.parameters())


def form_configs(name: str) -> list[ModelConfig]:
    """The tiny CPU model with this form at every r it allows, truncated where it may be, its lanes varied where
    it has them, and once with the other layout options (tied head, SwiGLU)."""
    form = registry.form(name)
    configs = [tiny_model(r, injection=name) for r in (1, 2, 4) if r > 1 or not form.needs_loop]
    if form.truncatable:  # 2 passes under no_grad, then 2 with gradient (the first reads a detached s)
        configs.append(tiny_model(4, injection=name, bptt_k=2))
    if form.uses_lanes:
        configs.append(tiny_model(4, injection=name, hyper_lanes=3, hyper_dynamic=True))
    configs.append(tiny_model(2, injection=name, tie_embeddings=True, mlp="swiglu"))
    return configs


def assert_parity(cfg: ModelConfig) -> None:
    """The form's spec against its module inside a real model: parameters, FLOPs, memory, optimizer state and
    gradients (docs/architecture.md, "How to add a loop design")."""
    form = registry.form(cfg.injection)
    torch.manual_seed(0)
    model = LoopedTransformer(cfg)
    # parameters: the spec's list is the module's, name for name, and the accounting adds them up by class
    declared = [(p.name, p.shape) for p in form.params(cfg)]
    assert declared == [(n, tuple(p.shape)) for n, p in model.injection.named_parameters()]
    counts, own = param_counts(cfg), form.counts(cfg)
    assert counts.N_rec == numel(model.recurrent) + own[N_REC]
    norms = (model.embed_norm, model.pass_norm, model.final_norm)
    assert counts.N_once == numel(model.prelude, model.coda, *norms) + own[N_ONCE]
    assert counts.total == sum(p.numel() for p in model.parameters())
    idx = torch.randint(0, cfg.vocab_size, (B, cfg.seq_len), generator=torch.Generator().manual_seed(1))
    # FLOPs: a forward + backward under SDPA's math backend, every matmul counted (accounting's docstring)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(idx, idx).backward()
    assert matmul_flops_per_token(cfg) == counter.get_total_flops() / (B * cfg.seq_len)
    assert all(p.grad is not None and p.grad.isfinite().all() for p in model.injection.parameters())
    # the module pickles (trainer.strategy=ddp_spawn sends the model to its workers) as the same class
    restored = pickle.loads(pickle.dumps(model.injection))
    assert (
        type(restored) is type(model.injection) and restored.state_dict().keys() == model.injection.state_dict().keys()
    )
    assert_memory_covers(cfg, model)
    # optimizer: one MuonH step allocates the state the memory model predicts from the form's groups
    model.zero_grad()
    groups = [
        {"name": g, "params": ps, "lr": 1e-3, "adamw": g != MATRIX} for g, ps in recipe_param_groups(model).items()
    ]
    opt = MuonH(groups, momentum=0.95, ortho_dtype="fp32", betas=(0.8, 0.95), eps=1e-10, weight_decay=0.0)
    model(idx, idx).backward()
    opt.step()
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
    assert state_bytes(cfg, "muonh", cuda=False)[2] == sum(t.numel() * t.element_size() for t in state)


def assert_memory_covers(cfg: ModelConfig, model: LoopedTransformer) -> None:
    """What autograd keeps (bf16 autocast, eager) at two batch sizes, split into bytes per token (the slope) and
    bytes per forward (the intercept), against the memory model; outside the injection both are exact at this
    size. Per token it never under-counts and over-counts at most MEMORY_OVER of the form's own bytes; per
    forward it may miss a per-pass copy (a slice, a cast) of each parameter that is not a matrix."""
    form, T = registry.form(cfg.injection), cfg.seq_len
    ids = {b: torch.randint(0, cfg.vocab_size, (b, T), generator=torch.Generator().manual_seed(b)) for b in (2, 4)}
    measured = {b: kept_for_backward(model, ids[b]) for b in ids}
    predicted = {b: activation_bytes(cfg, b, False) for b in ids}
    slope = {k: (v[4] - v[2]) / (2 * T) for k, v in (("measured", measured), ("predicted", predicted))}
    own = form.saved_bytes_per_token(cfg, grad_passes(cfg))
    assert 0 <= slope["predicted"] - slope["measured"] <= MEMORY_OVER * own, (slope, own)
    intercept = (predicted[2] - 2 * T * slope["predicted"]) - (measured[2] - 2 * T * slope["measured"])
    not_matrices = sum(p.numel for p in form.params(cfg) if p.group != MATRIX)
    assert abs(intercept) <= 4 * cfg.r * not_matrices + 64, intercept


PARITY_CASES = [cfg for name in registry.names() for cfg in form_configs(name)]


@pytest.mark.parametrize(
    "cfg", PARITY_CASES, ids=[f"{c.injection}-r{c.r}-k{c.bptt_k}-{c.mlp}-K{c.hyper_lanes}" for c in PARITY_CASES]
)
def test_every_registered_form_equals_its_module(cfg):
    assert_parity(cfg)


def test_the_registry_is_the_forms_folder():
    """Every module of loopscale/injections/ but the spec and the registry is a form named after its file."""
    files = {p.stem for p in (PACKAGE / "injections").glob("*.py")} - {"__init__", "form", "registry"}
    assert set(registry.names()) == files >= {"passthrough", "additive", "linear", "concat", "hyper"}
    assert registry.names(needs_loop=True) == ("hyper",) and "hyper" not in registry.names(looped_injection=True)
    assert registry.names(truncatable=False) == ("hyper", "passthrough")


# ------------------------------------------------------------------------------------------- a form in one file


def docs_example() -> str:
    """The worked example of docs/architecture.md, "How to add a loop design": its one Python block."""
    section = DOCS.read_text().split("## How to add a loop design", 1)[1]
    return re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)


@pytest.fixture
def gated_form(tmp_path, monkeypatch):
    """The docs' gated form as the one file it would be in the package's folder (the folder searched is
    extended to tmp_path, nothing of the package edited); the registry forgets it afterwards."""
    (tmp_path / "gated.py").write_text(docs_example())
    monkeypatch.setattr(injections, "__path__", [*injections.__path__, str(tmp_path)])
    registry.forms.cache_clear()
    yield registry.form("gated")
    sys.modules.pop("loopscale.injections.gated", None)
    registry.forms.cache_clear()


def test_a_form_added_as_one_file_runs_everywhere(gated_form):
    assert "gated" in registry.names() and gated_form.name == "gated"
    for cfg in form_configs("gated"):
        assert_parity(cfg)
    # the config (its label, injection=auto through looped_injection) and `loopscale params` take it by name
    gated, additive = tiny_model(4, injection="gated"), tiny_model(4, injection="additive")
    assert (gated.recipe, ModelConfig(r=4, looped_injection="gated").injection) == ("gated", "gated")
    out = run_cli(["params", "--injection", "gated", "--r", "4"])
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report == json.loads(json.dumps(accounting_report(cpu_model(128, 4, injection="gated"))))
    assert param_counts(gated).N_once - param_counts(additive).N_once == gated.d_model  # the gain g
    # F counts the gate like a norm gain: d a pass, 6x with gradient and 2x in a truncated pass
    assert flops_per_token(gated) - flops_per_token(additive) == 6 * 4 * gated.d_model
    truncated = [tiny_model(4, injection=name, bptt_k=1) for name in ("gated", "additive")]
    assert flops_per_token(truncated[0]) - flops_per_token(truncated[1]) == (6 + 2 * 3) * gated.d_model


def test_a_form_file_must_name_its_form(tmp_path, monkeypatch):
    (tmp_path / "gates.py").write_text(docs_example())  # FORM.name is "gated", the file "gates"
    monkeypatch.setattr(injections, "__path__", [*injections.__path__, str(tmp_path)])
    registry.forms.cache_clear()
    try:
        with pytest.raises(
            TypeError, match="loopscale.injections.gates must set FORM to an InjectionForm named 'gates'"
        ):
            registry.forms()
    finally:
        sys.modules.pop("loopscale.injections.gates", None)
        registry.forms.cache_clear()


class PerPassForm(InjectionForm):
    """A loop-index embedding's parameters (one row of [r, d] per pass): the third accounting class."""

    name = "per_pass"

    def params(self, cfg):
        return (Param("index", (cfg.r, cfg.d_model), SCALAR, N_PASS),)


def test_parameters_used_once_per_pass_are_refused_until_the_law_takes_them(monkeypatch):
    monkeypatch.setitem(registry.forms(), "per_pass", PerPassForm())
    cfg = tiny_model(4, injection="per_pass")
    assert PerPassForm().counts(cfg) == {N_ONCE: 0, N_REC: 0, N_PASS: 4 * 64}
    with pytest.raises(ConfigError, match=r"injection='per_pass' has parameters used once per pass \(N_pass\)"):
        param_counts(cfg)


# ---------------------------------------------------------------------------------- no name outside its form


def name_uses(source: str, names: tuple[str, ...]) -> list[str]:
    """Comparisons of something about an injection (its source mentions `injection`) with a form's name, and
    imports of a form's own module (the way to its module class, for an isinstance): the form should be asked,
    through the registry, instead."""
    forms = {f"loopscale.injections.{n}" for n in names}
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            literals = {c.value for side in sides for c in ast.walk(side) if isinstance(c, ast.Constant)}
            if literals & set(names) and any("injection" in ast.unparse(side) for side in sides):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.ImportFrom):
            modules = {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            found += [ast.unparse(node)] if modules & forms else []
        elif isinstance(node, ast.Import) and {a.name for a in node.names} & forms:
            found.append(ast.unparse(node))
    return found


def test_the_detector_finds_name_uses():
    names = registry.names()
    planted = (
        'if cfg.injection == "hyper":\n    pass\n'
        'x = m.injection in ("linear", "concat")\n'
        "from loopscale.injections.hyper import hyper_module\n"
        "from loopscale.injections import concat\n"
    )
    assert len(name_uses(planted, names)) == 4
    innocent = (
        'if optim.schedule == "linear":\n    pass\nz = cfg.recipe == "hyper"\nw = cfg.injection == name\n'
        "from loopscale.injections.registry import form\n"
    )
    assert name_uses(innocent, names) == []


def test_no_injection_name_comparison_outside_the_forms():
    names = registry.names()
    found = {
        str(path.relative_to(PACKAGE)): hits
        for path in PACKAGE.rglob("*.py")
        if path.parent.name != "injections" and (hits := name_uses(path.read_text(), names))
    }
    assert found == {}
