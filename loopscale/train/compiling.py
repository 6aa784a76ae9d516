"""torch.compile for training runs, without the silent fall back to eager.

TorchDynamo caches compiled graphs per code object: every Block shares the cache of `Block.forward`, the
whole model that of `LoopedTransformer.forward`. One truncated-backprop run already fills it with variants
(with / without grad, fp32 / bf16 autocast, train / eval, the partial last validation batch), another model
in the same process adds its own, and at torch's default limit of 8 entries Dynamo stops compiling that
code and runs it eagerly, logging one warning. Here the process's limit is raised to one sized for the
variants a process can meet (RECOMPILE_LIMIT), and every hit of any limit is counted (`recompile_limit_hits`)
so a run can report it instead of quietly training at eager speed.

Only what the lowest supported torch (pyproject.toml) has is called: `torch.compile` / `nn.Module.compile`
take fullgraph, dynamic, backend, mode, options and disable there (a `recompile_limit` keyword exists only
from torch 2.13), so the limit is set on `torch._dynamo.config` instead, under whichever name this torch has.
Shapes are compiled static (dynamic=False): a new shape (the partial last validation batch) gets a graph of
its own instead of turning the training graph into a slower one over symbolic sizes.

Modes (trainer.compile): False (eager), "blocks" (each layer compiled, the loop over passes stays in
Python: one small graph per variant, shared by all layers), "model" (the whole forward, the loop unrolled:
one graph per variant and r; the published runs compile the whole model, and on this CPU it measured +84%
tokens/s at d = 64), "auto" (`resolve_compile`: on CPU "model" when it pays for its compile, by the rule of
loopscale/train/compile_choice.py, else eager; "model" on GPUs).

Compiled graphs go to loopscale's compiled-graph cache (loopscale/train/compile_cache.py), one folder per model
and torch, so the next run of the same model (a seed, a branch, a relaunch) loads them instead of compiling.
On CPU the validation runs eagerly (`eager_on_cpu`): a few no-grad batches (and a partial last one) would each
need graphs of their own, compiled for longer than they run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from pathlib import Path

import torch
import torch._dynamo
from torch import nn

from loopscale.errors import ConfigError, exception_chain
from loopscale.train.compile_cache import activate, compile_key, is_warm, key_hash, set_aside
from loopscale.train.compile_choice import COMPILED_MODE, choose_compile, eager_step_s_from_flops, saving_s

# Per compiled unit: 2 grad modes x 2 precisions x train / eval x a partial batch x a few model shapes in a
# process (benchmarks, sweeps run in-process), with room to spare; torch's own default is 8. Process-wide:
# Dynamo has one such setting, not one per function.
RECOMPILE_LIMIT = 64
COMPILE_MODES = (False, "blocks", "model")  # what compile_model takes; "auto" is resolved first
_DYNAMO_LOGGER = "torch._dynamo.convert_frame"  # where Dynamo logs "hit config.recompile_limit"
log = logging.getLogger("loopscale.train.entry")  # the training log
# what loading a corrupt cached kernel raises (an emptied .py has no `call`; a garbage .so fails dlopen), wrapped
# by Dynamo in BackendCompilerFailed
_LOAD_ERRORS = (AttributeError, ImportError, OSError, SyntaxError, EOFError, ValueError)


class _LimitHits(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "recompile_limit" in message:  # recompile_limit or accumulated_recompile_limit
            self.messages.append(message.splitlines()[0] + " " + " ".join(message.splitlines()[1:3]))


_hits = _LimitHits()
_compiled_here: set[str] = set()  # graph keys (compile_cache.key_hash) this process compiled a model for


def watch_recompile_limit() -> None:
    """Start counting Dynamo's recompile-limit hits in this process (idempotent)."""
    logger = logging.getLogger(_DYNAMO_LOGGER)
    if _hits not in logger.handlers:
        logger.addHandler(_hits)


def recompile_limit_hits() -> list[str]:
    """Dynamo's message for each time a compiled function fell back to eager in this process since the
    watch started: which limit, which function, why."""
    return list(_hits.messages)


def raise_recompile_limit(limit: int = RECOMPILE_LIMIT) -> int:
    """Dynamo's per-code-object recompile limit raised to at least `limit` for this process (never lowered);
    returns the limit now in force. `recompile_limit` is the name from torch 2.6 on, `cache_size_limit`
    before."""
    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, max(int(getattr(config, name)), limit))
    return getattr(config, name)


def resolve_compile(
    mode,
    model_cfg,
    steps: int,
    step_tokens: int,
    flops_per_token: float,
    backend: str,
    device_type: str,
    run: dict | None = None,
):
    """trainer.compile as compile_model takes it: "auto" on CPU is COMPILED_MODE when this job alone pays for
    the compile (its graphs cached or not: loopscale/train/compile_choice.py), else False; "model" elsewhere.
    A sweep decides with its other jobs of the same model in view and passes the result (compile_order.py). run:
    the run's precision, device batch and optimizer (compile_cache.run_context), part of the graphs' key."""
    if mode != "auto":
        return mode
    if device_type != "cpu":
        return COMPILED_MODE
    key = compile_key(model_cfg, COMPILED_MODE, backend, run=run)
    if key_hash(key) in _compiled_here:  # a forked branch after its parent: Dynamo holds the graphs in memory
        return COMPILED_MODE
    warm = is_warm(key)
    own = saving_s(steps, eager_step_s_from_flops(step_tokens, flops_per_token, model_cfg.d_model))
    return choose_compile(own, warm).compile


def eager_on_cpu(device_type: str):
    """A context in which compiled code runs eagerly on CPU (validation: module docstring), nothing on GPUs.
    torch.compiler.set_stance exists from torch 2.6; without it the compiled code runs."""
    if device_type == "cpu" and hasattr(torch.compiler, "set_stance"):
        return torch.compiler.set_stance("force_eager")
    return contextlib.nullcontext()


def compile_model(
    model: nn.Module, mode, recompile_limit: int = RECOMPILE_LIMIT, backend: str = "inductor", run: dict | None = None
) -> None:
    """Compile `model` (a LoopedTransformer) in place: mode False | "blocks" | "model" (trainer.compile, "auto"
    resolved by resolve_compile). State-dict keys are unchanged (nn.Module.compile, not a wrapper module).
    backend="eager" keeps Dynamo's tracing and caching without code generation (quick checks of the caching on
    CPU); with "inductor" the graphs go to the model's folder of the compiled-graph cache."""
    if mode not in COMPILE_MODES:
        raise ConfigError(f"compile={mode!r} is not allowed; choose one of false, 'blocks', 'model', 'auto'")
    if not mode:
        return
    if hasattr(model, "cfg"):
        key = compile_key(model.cfg, mode, backend, run=run)  # run: compile_cache.run_context
        _compiled_here.add(key_hash(key))
        warm = is_warm(key)
        folder = activate(key)  # other backends than inductor write nothing there but key.json
        model.graph_cache = GraphCache(key, folder, warm)
    watch_recompile_limit()
    raise_recompile_limit(recompile_limit)
    units = [model] if mode == "model" else [*model.prelude, *model.recurrent, *model.coda]
    for unit in units:
        unit.compile(backend=backend, dynamic=False)  # only torch 2.11's keywords (module docstring)
    if hasattr(model, "head_backend"):
        model.head_backend = backend  # the head's chunk math, outside the model's graph, compiled too (head_loss.py)


@dataclasses.dataclass
class GraphCache:
    """The compiled-graph cache folder a model's graphs load from (compile_cache.activate), whether it held graphs
    when the model was compiled, and whether a corrupt entry was already set aside in this process."""

    key: dict
    folder: Path | None
    warm: bool
    recovered: bool = False


def corrupt_entry(err: BaseException) -> BaseException | None:
    """The error behind a compiled call that failed to load a cached graph (Dynamo's BackendCompilerFailed around
    a load error), or None."""
    chain = list(exception_chain(err))
    if not any(type(e).__name__ == "BackendCompilerFailed" for e in chain):
        return None
    return next((e for e in chain if isinstance(e, _LOAD_ERRORS)), chain[-1])


def forward_recovering(model: nn.Module, *args, **kwargs):
    """model(*args, **kwargs). When a compiled model's call fails while its graphs load from a warm cache folder
    (a corrupt kernel: an emptied or garbage .py or .so), the folder is moved aside (compile_cache.set_aside),
    Dynamo and Inductor forget what they loaded, and the call compiles afresh into an empty folder, once a process,
    said in one line. A cold folder's failure is a real compile error and is raised as it is (no silent eager run)."""
    try:
        return model(*args, **kwargs)
    except Exception as err:
        cache = getattr(model, "graph_cache", None)
        cause = corrupt_entry(err)
        if cache is None or cache.folder is None or not cache.warm or cache.recovered or cause is None:
            raise
        moved = set_aside(cache.folder)
        first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
        log.warning(
            "compiled-graph cache: an entry of %s cannot be loaded (%s: %s); moved aside to %s, compiling afresh",
            cache.folder,
            type(cause).__name__,
            first[:200],
            moved,
        )
        torch._dynamo.reset()  # Dynamo's compiled code, and Inductor's loaded modules, forgotten
        from torch._inductor.utils import clear_inductor_caches  # only on a recovery: it loads Inductor

        clear_inductor_caches()
        cache.folder, cache.recovered = activate(cache.key), True
        return model(*args, **kwargs)
