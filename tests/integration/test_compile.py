"""torch.compile never falls back to eager silently: every compiled unit has a recompile limit sized for the
variants one process meets, and every limit hit is counted and reported (loopscale/train/compiling.py)."""

from __future__ import annotations

import pytest
import torch

from loopscale.train.compiling import recompile_limit_hits, watch_recompile_limit
from loopscale.train.entry import run_training
from support.train import TINY, tiny_model, train_config

pytestmark = pytest.mark.torch_floor  # `make test-torch-floor` runs these on the lowest supported torch too

# what torch.compile / nn.Module.compile accept in torch 2.11, the lowest supported torch (pyproject.toml)
TORCH_2_11_COMPILE_KEYWORDS = {"fullgraph", "dynamic", "backend", "mode", "options", "disable"}


@pytest.fixture
def torch_2_11_compile(monkeypatch):
    """torch.compile and nn.Module.compile refusing every keyword torch 2.11 does not have, as it would."""
    real_compile, real_module_compile = torch.compile, torch.nn.Module.compile

    def check(kwargs):
        extra = set(kwargs) - TORCH_2_11_COMPILE_KEYWORDS
        if extra:
            raise TypeError(f"compile() got an unexpected keyword argument {sorted(extra)[0]!r}")

    def compile_(model=None, **kwargs):
        check(kwargs)
        return real_compile(model, **kwargs)

    def module_compile(self, *args, **kwargs):
        check(kwargs)
        return real_module_compile(self, *args, **kwargs)

    monkeypatch.setattr(torch, "compile", compile_)
    monkeypatch.setattr(torch.nn.Module, "compile", module_compile)


def test_a_recompile_limit_hit_is_detected():
    watch_recompile_limit()
    before = len(recompile_limit_hits())

    def double(x):
        return 2 * x

    compiled = torch.compile(double, backend="eager")
    with torch._dynamo.config.patch(recompile_limit=1):  # torch 2.11 has no recompile_limit keyword
        compiled(torch.ones(2))
        compiled(torch.ones(2, dtype=torch.float64))  # a second variant: over the limit of 1, runs eagerly
    hits = recompile_limit_hits()[before:]
    assert len(hits) == 1 and "double" in hits[0]


@pytest.mark.parametrize("mode", ["blocks", "model"])
def test_compiled_training_uses_only_torch_2_11_compile_keywords(mode, torch_2_11_compile, tmp_path, data_dir):
    """compile=blocks and compile=model build and train with torch.compile restricted to torch 2.11's keywords
    (Dynamo's aot_eager backend: the graphs without code generation; the slow test below compiles for real)."""
    record = run_training(
        train_config(
            [
                *TINY,
                f"data.data_dir={data_dir}",
                f"runs_dir={tmp_path}",
                "budget.tokens=3072",  # 3 steps
                "data.val_tokens=1040",  # one validation batch
                f"trainer.compile={mode}",
                "trainer.compile_backend=aot_eager",
            ]
        )
    )
    assert record["status"] == "done" and record["recompile_limit_hits"] == 0
    assert record["compile"] == mode


def test_auto_trains_a_short_cpu_run_eagerly_and_records_it(tmp_path, data_dir):
    """trainer.compile=auto (trainer=cpu's default): three steps never pay for a compile; run.json says what the
    run trained with."""
    record = run_training(
        train_config(
            [
                *TINY,
                f"data.data_dir={data_dir}",
                f"runs_dir={tmp_path}",
                "budget.tokens=3072",
                "data.val_tokens=1040",
                "trainer.compile=auto",
            ]
        )
    )
    assert record["status"] == "done" and record["compile"] is False


@pytest.mark.parametrize(("mode", "backend"), [(False, None), ("blocks", "inductor"), ("model", "aot_eager")])
def test_a_compiled_model_compiles_its_head_with_its_backend(mode, backend):
    """The head (outside the model's graph) runs its chunk math through torch.compile with the model's backend
    exactly when the model is compiled; an eager model's head stays eager."""
    from loopscale.model.transformer import LoopedTransformer
    from loopscale.train.compiling import compile_model

    model = LoopedTransformer(
        tiny_model(2, d_model=32, head_dim=16, vocab_size=64, seq_len=16, n_prelude=1, n_coda=1, depth=6)
    )
    assert model.head_backend is None
    compile_model(model, mode, backend=backend or "inductor")
    assert model.head_backend == backend


def test_invalid_compile_mode_is_rejected():
    with pytest.raises(ValueError, match="compile"):
        train_config(["trainer.compile=graph"])
    assert train_config(["trainer.compile=true"]).trainer.compile == "blocks"


def _train_validate_train(model, vocab: int, T: int, autocast: bool) -> None:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, vocab, (4, T))
    for phase in ("train", "validate", "train"):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            if phase == "validate":
                model.eval()
                with torch.no_grad():
                    model(x, x)
                    model(x[:3], x[:3])  # the partial last validation batch
                model.train()
            else:
                model(x, x).backward()
                opt.step()
                opt.zero_grad()


def test_two_compiled_models_in_one_process_stay_compiled():
    """Every variant a process meets: fp32 and bf16, train and eval, with and without grad (truncated
    backprop), a partial batch, two models with different compile modes. Dynamo's eager backend keeps its
    caching and limits without code generation (the slow test below runs the real thing)."""
    from loopscale.model.transformer import LoopedTransformer
    from loopscale.train.compiling import compile_model

    watch_recompile_limit()
    before = len(recompile_limit_hits())
    for r, bptt_k, mode in ((2, 1, "blocks"), (4, None, "model")):
        cfg = tiny_model(
            r, d_model=32, head_dim=16, vocab_size=64, seq_len=16, n_prelude=1, n_coda=1, depth=6, bptt_k=bptt_k
        )
        model = LoopedTransformer(cfg)
        compile_model(model, mode, backend="eager")
        for autocast in (False, True):
            _train_validate_train(model, cfg.vocab_size, cfg.seq_len, autocast)
    assert recompile_limit_hits()[before:] == []


@pytest.mark.slow
def test_two_compiled_runs_in_one_process_never_hit_the_recompile_limit(tmp_path, data_dir):
    """Train (truncated backprop: passes with and without grad) -> validation with a partial last batch ->
    train -> final validation, then a second, whole-model-compiled run in the same process. Under torch's
    default limit of 8 per code object the shared Block.forward cache overflowed here."""
    watch_recompile_limit()
    before = len(recompile_limit_hits())
    common = [
        *TINY,
        f"data.data_dir={data_dir}",
        "budget.tokens=10240",
        "trainer.val_every_steps=5",
        "data.val_tokens=1300",
    ]  # 1300 // 65 = 20 windows: a last validation batch of 4 of 16
    first = run_training(
        train_config(
            [*common, f"runs_dir={tmp_path / 'a'}", "model.r=2", "model.recipe=tbptt", "trainer.compile=blocks"]
        )
    )
    second = run_training(train_config([*common, f"runs_dir={tmp_path / 'b'}", "model.r=4", "trainer.compile=model"]))
    assert recompile_limit_hits()[before:] == []
    assert first["recompile_limit_hits"] == second["recompile_limit_hits"] == 0
    assert first["status"] == second["status"] == "done"


def test_training_compiles_into_the_folder_the_sweep_planned(tmp_path, data_dir, monkeypatch):
    """The pool and `plan` decide from a job's graph key before the data is open (compile_order.graph_key);
    training writes its graphs under the key of the model it really builds (the tokenizer's vocabulary): the
    two must name the same folder, or a warm cache would never be seen."""
    from loopscale.cache_home import cache_dir
    from loopscale.launch.compile_order import graph_key
    from loopscale.train.compile_cache import GRAPHS_DIR, KEY_FILE

    monkeypatch.setenv("LOOPSCALE_CACHE", str(tmp_path / "cache"))
    cfg = train_config(
        [
            *TINY,
            f"data.data_dir={data_dir}",
            f"runs_dir={tmp_path}",
            "budget.tokens=3072",
            "data.val_tokens=1040",
            "trainer.compile=model",
            "trainer.compile_backend=aot_eager",
            "model.vocab_size=4096",  # as configured; training takes the tokenizer's (data.vocab_size)
        ]
    )
    assert run_training(cfg)["status"] == "done"
    folders = list((cache_dir() / GRAPHS_DIR).iterdir())
    assert [f.name for f in folders] == [graph_key(cfg)] and (folders[0] / KEY_FILE).exists()
