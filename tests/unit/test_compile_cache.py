"""The compiled-graph cache and the compile rule (loopscale/train/compile_cache.py, compile_choice.py,
loopscale/launch/compile_order.py): one folder per model and torch, never shared by another shape or torch; a
compile only where it pays; each model's first job started before its other seeds."""

from __future__ import annotations

import dataclasses
import os

from loopscale.config.model import ModelConfig
from loopscale.launch.compile_order import compile_first_order
from loopscale.train.compile_cache import INDUCTOR_ENV, KEY_FILE, activate, compile_key, graph_dir, is_warm
from loopscale.train.compile_choice import (
    COLD_COMPILE_S,
    COMPILED_MODE,
    WARM_COMPILE_S,
    choose_compile,
    choose_for_sweep,
)

MODEL = ModelConfig(vocab_size=512, d_model=16, head_dim=8, n_prelude=1, n_coda=1, depth=10, r=4, seq_len=64)


def test_a_changed_model_or_torch_never_finds_the_graphs_of_another(tmp_path):
    base = graph_dir(compile_key(MODEL, "model"), tmp_path)
    wider = graph_dir(compile_key(dataclasses.replace(MODEL, d_model=24), "model"), tmp_path)
    deeper = graph_dir(compile_key(dataclasses.replace(MODEL, r=8), "model"), tmp_path)
    other_torch = graph_dir(compile_key(MODEL, "model", torch_version="2.11.0"), tmp_path)
    other_mode = graph_dir(compile_key(MODEL, "blocks"), tmp_path)
    assert len({base, wider, deeper, other_torch, other_mode}) == 5
    # the same model (a seed or a budget is not part of it) and the same torch: the same folder
    assert graph_dir(compile_key(dataclasses.replace(MODEL), "model"), tmp_path) == base


def test_activate_points_inductor_at_the_key_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(INDUCTOR_ENV, raising=False)
    key = compile_key(MODEL, "model")
    folder = activate(key, tmp_path)
    assert folder == graph_dir(key, tmp_path) and os.environ[INDUCTOR_ENV] == str(folder)
    assert (folder / KEY_FILE).exists() and not is_warm(key, tmp_path)
    (folder / "fxgraph" / "ab").mkdir(parents=True)  # what Inductor writes once it compiled a graph
    assert is_warm(key, tmp_path)
    other = compile_key(dataclasses.replace(MODEL, d_model=24), "model")
    assert not is_warm(other, tmp_path)


def test_an_unwritable_cache_leaves_inductor_alone(tmp_path, monkeypatch):
    monkeypatch.delenv(INDUCTOR_ENV, raising=False)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert activate(compile_key(MODEL, "model"), blocker) is None
    assert INDUCTOR_ENV not in os.environ


def test_a_job_compiles_only_when_its_saving_pays_for_the_compile():
    assert choose_compile(WARM_COMPILE_S + 1, warm=True).compile == COMPILED_MODE
    assert not choose_compile(WARM_COMPILE_S - 1, warm=True).compile
    assert not choose_compile(COLD_COMPILE_S - 1, warm=False).compile
    assert choose_compile(COLD_COMPILE_S + 1, warm=False).compile == COMPILED_MODE
    # cold, too short alone, but two later seeds load its graphs: together they pay
    saving = COLD_COMPILE_S / 2
    assert not choose_compile(saving, warm=False).compile
    assert choose_compile(saving, warm=False, later_savings_s=(saving, saving)).compile == COMPILED_MODE


def test_a_sweep_compiles_each_model_once():
    saving = COLD_COMPILE_S / 2
    choices = choose_for_sweep(["a", "b", "a", "a", "b"], [saving] * 5, [False] * 5)
    assert [c.label for c in choices] == ["compiles", "eager", "cached", "cached", "eager"]
    assert choices[0].compile_s == COLD_COMPILE_S and choices[2].compile_s == WARM_COMPILE_S


def test_the_first_seed_of_each_shape_starts_first():
    # jobs in Hydra's order: shape-major, seeds fastest; tokens: the d48 shape is the longest
    keys = ["d16", "d16", "d16", "d48", "d48", "d48"]
    tokens = [100, 100, 100, 300, 300, 300]
    order = compile_first_order(keys, tokens)
    assert order == [3, 0, 4, 5, 1, 2]
    assert [keys[i] for i in order[:2]] == ["d48", "d16"]  # every shape's first job before any second one


def test_a_shapes_longest_job_compiles_its_graphs():
    """One model at three budgets (Hydra's order: shortest first): the longest job leads, the others follow it
    longest first, so a pool stopped early has trained the longest jobs (tests/system/test_local_pool.py)."""
    assert compile_first_order(["d16"] * 3, [1_024_000, 3_072_000, 2_048_000]) == [1, 2, 0]
    assert compile_first_order(["a", "b", "a", "b"], [1, 2, 5, 3]) == [2, 3, 1, 0]


def test_later_seeds_start_after_every_first_seed():
    """With as many shapes as workers, no two jobs of one shape start together (a cold compile each)."""
    keys = [f"s{i // 3}" for i in range(12)]  # 4 shapes x 3 seeds
    order = compile_first_order(keys, [1] * 12)
    started = [keys[i] for i in order[:4]]
    assert len(set(started)) == 4 and order[:2] == [0, 3]


def test_a_seed_sweep_starts_every_models_first_seed_first():
    """schedule() on a real sweep (2 widths x 3 seeds, in Hydra's order: seeds vary fastest): both widths'
    seed 0 first, longest first, then the other seeds; trainer.compile=auto resolved in every job."""
    from loopscale.launch.compile_order import schedule
    from loopscale.launch.sweep import expand
    from loopscale.train.job_plan import plan_job

    jobs = expand(["experiment=isodepth_cpu_demo", "model.r=1", "point=C2.5e11-d16,C2.5e11-d48", "seed=0,1,2"])
    cfgs = [job.cfg for job in jobs]
    assert [c.seed for c in cfgs] == [0, 1, 2, 0, 1, 2] and {c.trainer.compile for c in cfgs} == {"auto"}
    tokens = [plan_job(c).tokens for c in cfgs]
    started = schedule(cfgs, tokens)
    assert [c.seed for c in started[:2]] == [0, 0] and {c.model.d_model for c in started[:2]} == {16, 48}
    assert started[0].model.d_model == (16 if tokens[0] > tokens[3] else 48)
    assert all(c.trainer.compile in (False, "model") for c in started)


def test_auto_compiles_a_long_cpu_job_and_not_a_short_one(tmp_path, monkeypatch):
    """trainer.compile=auto in one process (compiling.resolve_compile): a job whose saving pays for a cold
    compile compiles, a short one stays eager, a cached one needs less; GPUs compile; explicit modes stay."""
    from loopscale.train.compile_choice import EAGER_CPU_FLOPS_PER_WIDTH, SPEEDUP
    from loopscale.train.compiling import resolve_compile

    monkeypatch.setenv("LOOPSCALE_CACHE", str(tmp_path))
    step_tokens, F = 1024, 1e6
    model = dataclasses.replace(MODEL, d_model=32)  # a key no other test compiles in this process
    step_s = step_tokens * F / (EAGER_CPU_FLOPS_PER_WIDTH * 32)  # a narrow model: below the GEMMs' rate
    steps_paying = int(COLD_COMPILE_S / (step_s * (1 - 1 / SPEEDUP))) + 10  # just over the cold compile

    def resolve(steps, device="cpu", mode="auto"):
        return resolve_compile(mode, model, steps, step_tokens, F, "inductor", device)

    assert resolve(steps_paying) == COMPILED_MODE
    assert resolve(steps_paying // 4) is False
    (graph_dir(compile_key(model, COMPILED_MODE)) / "fxgraph" / "ab").mkdir(parents=True)  # cached now
    assert resolve(steps_paying // 4) == COMPILED_MODE  # a cached compile costs only WARM_COMPILE_S
    assert resolve(1) is False
    assert resolve(1, device="cuda") == COMPILED_MODE
    assert resolve(1, mode="blocks") == "blocks" and resolve(10**9, mode=False) is False


def test_an_unprobed_wide_job_is_priced_at_its_width_and_a_short_one_stays_eager(tmp_path, monkeypatch):
    """Without a probe the eager step comes from the FLOPs at a rate that grows with the width up to the GEMMs'
    own (compile_choice.eager_cpu_flops): model=cpu (d 128) trains ~0.8 s steps, so 100 steps save ~23 s, far
    under a cold compile (at the former single 4e9 FLOP/s they were priced at ~9 s each and compiled)."""
    from loopscale.config.dirs import train_config
    from loopscale.config.schema import with_vocab
    from loopscale.train.compile_choice import EAGER_CPU_PEAK_FLOPS, eager_cpu_flops, eager_step_s_from_flops
    from loopscale.train.compiling import resolve_compile
    from loopscale.train.plan import plan_run

    monkeypatch.setenv("LOOPSCALE_CACHE", str(tmp_path))
    assert eager_cpu_flops(16) < eager_cpu_flops(48) < eager_cpu_flops(128) == EAGER_CPU_PEAK_FLOPS
    cfg = train_config(["model=cpu"])
    cfg = with_vocab(cfg, cfg.data.vocab_size)
    step_tokens, F = cfg.budget.batch_size * cfg.model.seq_len, plan_run(cfg).F
    assert 0.5 < eager_step_s_from_flops(step_tokens, F, cfg.model.d_model) < 1.5

    def resolve(steps):
        return resolve_compile("auto", cfg.model, steps, step_tokens, F, "inductor", "cpu")

    assert resolve(100) is False and resolve(2000) == COMPILED_MODE


def test_the_key_holds_the_runs_precision_batch_and_optimizer(tmp_path):
    """Issue 57: the key ignored precision, batch and optimizer, so `is_warm` priced a bf16 run of a model cached
    in fp32 as cached (the graphs themselves were never mixed up: Inductor's own keys hash them)."""
    from loopscale.train.compile_cache import run_context

    fp32 = compile_key(MODEL, "model", run=run_context("32-true", 16, "adamw"))
    (graph_dir(fp32, tmp_path) / "fxgraph" / "ab").mkdir(parents=True)
    assert is_warm(fp32, tmp_path)
    for other in (run_context("bf16-mixed", 16, "adamw"), run_context("32-true", 32, "adamw"),
                  run_context("32-true", 16, "muonh")):  # fmt: skip
        assert not is_warm(compile_key(MODEL, "model", run=other), tmp_path), other
    assert is_warm(compile_key(MODEL, "model", run=run_context("32-true", 16, "adamw")), tmp_path)


def test_a_backend_python_or_machine_has_its_own_folder(tmp_path):
    """docs/operations.md: one folder per model config, compile mode, backend, torch, Python and machine (key.json
    says which): a graph Dynamo's eager backend cached is never found by an Inductor run of the same model."""
    key = compile_key(MODEL, "model")
    assert {"model", "compile", "backend", "run", "torch", "python", "machine"} <= set(key)
    inductor = graph_dir(key, tmp_path)
    assert graph_dir(compile_key(MODEL, "model", backend="eager"), tmp_path) != inductor
    assert graph_dir({**key, "python": "3.10.0"}, tmp_path) != inductor
    assert graph_dir({**key, "machine": "aarch64"}, tmp_path) != inductor
    (graph_dir(compile_key(MODEL, "model", backend="eager"), tmp_path) / "fxgraph" / "ab").mkdir(parents=True)
    assert not is_warm(key, tmp_path)


def test_later_jobs_count_only_what_they_save_beyond_loading_the_graphs():
    """The rule (compile_choice.py): a cold job compiles when its saving plus sum over later jobs of the key of
    (saving - WARM_COMPILE_S)^+ beats COLD_COMPILE_S: each later job still pays its load from the cache."""
    own, later = COLD_COMPILE_S / 2, COLD_COMPILE_S * 0.3
    assert own + 2 * later > COLD_COMPILE_S > own + 2 * (later - WARM_COMPILE_S)  # gross pays, net does not
    assert not choose_compile(own, warm=False, later_savings_s=(later, later)).compile
    # later jobs saving less than their own load add nothing, however many
    short = WARM_COMPILE_S - 1
    assert not choose_compile(COLD_COMPILE_S - 1, warm=False, later_savings_s=(short,) * 10).compile
    # one second of net saving past the compile tips it
    assert choose_compile(own, warm=False, later_savings_s=(COLD_COMPILE_S - own + 1 + WARM_COMPILE_S,)).compile


def test_every_corrupt_folder_is_kept_aside_under_its_own_number(tmp_path, monkeypatch):
    """docs/operations.md: a key's folder that fails to load is moved to compile/<key>.corrupt-<n>/ (kept for a look,
    never read again) and the run compiles afresh; a model corrupted again later is set aside again, beside the
    first, and the key's own folder is empty each time."""
    from loopscale.train.compile_cache import set_aside

    monkeypatch.delenv(INDUCTOR_ENV, raising=False)  # activate sets it: restored after the test
    key = compile_key(MODEL, "model")
    folder = graph_dir(key, tmp_path)
    for n in range(3):
        assert activate(key, tmp_path) == folder
        (folder / "fxgraph" / f"kernel{n}").mkdir(parents=True)
        assert is_warm(key, tmp_path)
        assert set_aside(folder) == folder.with_name(f"{folder.name}.corrupt-{n}")
        assert not folder.exists() and not is_warm(key, tmp_path)
    for n in range(3):  # each one as it was, with its own kernel
        assert [p.name for p in (folder.parent / f"{folder.name}.corrupt-{n}" / "fxgraph").iterdir()] == [f"kernel{n}"]
