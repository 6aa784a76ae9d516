"""loopscale/injections/: every registered form against its own module (parameters, FLOPs, the memory model, the
optimizer state, a forward and backward), a form added as one file (the worked example of docs/architecture.md),
and no injection-name comparison outside the forms' own files."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

import loopscale
from loopscale import injections
from loopscale.config.model import ModelConfig
from loopscale.injections import registry
from loopscale.injections.form import N_ONCE, N_PASS, N_REC, SCALAR, InjectionForm, Param
from loopscale.model.accounting import accounting_report, cpu_model, flops_per_token, param_counts
from support.cli import run_cli
from support.parity import assert_parity
from support.train import tiny_model

PACKAGE = Path(loopscale.__file__).parent
DOCS = PACKAGE.parent / "docs" / "architecture.md"


def form_configs(name: str) -> list[ModelConfig]:
    """The tiny CPU model with this form at every r it allows, truncated where it may be, its lanes varied where
    it has them, and once with the other layout options (tied head, SwiGLU)."""
    form = registry.form(name)
    configs = [tiny_model(r, injection=name) for r in (1, 2, 4) if r > 1 or not form.needs_loop]
    if form.truncatable:  # 2 passes under no_grad, then 2 with gradient (the first reads a detached s)
        configs.append(tiny_model(4, injection=name, bptt_k=2))
    if "hyper_lanes" in form.options:
        configs.append(tiny_model(4, injection=name, options={"hyper_lanes": 3, "hyper_dynamic": True}))
    configs.append(tiny_model(2, injection=name, tie_embeddings=True, mlp="swiglu"))
    return configs


PARITY_CASES = [cfg for name in registry.names() for cfg in form_configs(name)]


@pytest.mark.parametrize(
    "cfg",
    PARITY_CASES,
    ids=[f"{c.injection}-r{c.r}-k{c.bptt_k}-{c.mlp}-K{c.options.get('hyper_lanes', 2)}" for c in PARITY_CASES],
)
def test_every_registered_form_equals_its_module(cfg):
    assert_parity(cfg)


def test_the_registry_is_the_forms_folder():
    """Every module of loopscale/injections/ but the spec and the registry is a form named after its file."""
    files = {p.stem for p in (PACKAGE / "injections").glob("*.py")} - {"__init__", "form", "registry"}
    assert set(registry.names()) == files >= {"passthrough", "additive", "linear", "concat", "hyper"}
    assert registry.names(needs_loop=True) == ("hyper",)
    assert not {"hyper", "loop_index"} & set(registry.names(looped_injection=True))
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


def test_parameters_used_once_per_pass_count_in_n_pass(monkeypatch):
    monkeypatch.setitem(registry.forms(), "per_pass", PerPassForm())
    cfg = tiny_model(4, injection="per_pass")
    assert PerPassForm().counts(cfg) == {N_ONCE: 0, N_REC: 0, N_PASS: 4 * 64}
    counts, additive = param_counts(cfg), param_counts(tiny_model(4, injection="additive"))
    assert (counts.N_pass, counts.N_once, counts.N_rec) == (4 * 64, additive.N_once, additive.N_rec)
    assert counts.N == counts.N_once + counts.N_pass + counts.N_rec


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


@pytest.mark.parametrize("recipe", ["huginn", "parcae"])
def test_a_random_initial_state_comes_from_the_models_own_streams(recipe):
    """Huginn's and Parcae's s_0: never torch's global RNG; the training stream is in the state dict (a model loaded
    from it continues on the very draws), evaluation draws the same states at every eval() without moving the
    training stream, and `initial_states_from` hands the draws to a generator of one's own."""
    import torch

    from loopscale.model.transformer import LoopedTransformer

    torch.manual_seed(0)
    model = LoopedTransformer(tiny_model(2, recipe))
    idx = torch.randint(0, 200, (2, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        global_rng = torch.get_rng_state()
        model(idx, idx)  # a training forward advances the training stream
        assert torch.equal(torch.get_rng_state(), global_rng)  # ... and nothing of the global RNG
        saved = {k: v.clone() if torch.is_tensor(v) else v for k, v in model.state_dict().items()}
        model.eval()
        evaluated = model(idx, idx)
        model.eval()  # a second evaluation draws the same states
        assert torch.equal(model(idx, idx), evaluated)
        with model.initial_states_from(torch.Generator().manual_seed(5)):
            assert not torch.equal(model(idx, idx), evaluated)
        model.train()
        following = model(idx, idx)  # the training stream where it was before the evaluations
        torch.manual_seed(7)  # another run's seed: its own streams, replaced by the loaded ones
        other = LoopedTransformer(tiny_model(2, recipe))
        other.load_state_dict(saved)
        assert torch.equal(other(idx, idx), following)
        assert not torch.equal(model(idx, idx), following)  # the stream moved on
