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
tokens/s at d = 64).
"""

from __future__ import annotations

import logging

import torch._dynamo
from torch import nn

from loopscale.errors import ConfigError

# Per compiled unit: 2 grad modes x 2 precisions x train / eval x a partial batch x a few model shapes in a
# process (benchmarks, sweeps run in-process), with room to spare; torch's own default is 8. Process-wide:
# Dynamo has one such setting, not one per function.
RECOMPILE_LIMIT = 64
COMPILE_MODES = (False, "blocks", "model")
_DYNAMO_LOGGER = "torch._dynamo.convert_frame"  # where Dynamo logs "hit config.recompile_limit"


class _LimitHits(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "recompile_limit" in message:  # recompile_limit or accumulated_recompile_limit
            self.messages.append(message.splitlines()[0] + " " + " ".join(message.splitlines()[1:3]))


_hits = _LimitHits()


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


def compile_model(model: nn.Module, mode, recompile_limit: int = RECOMPILE_LIMIT, backend: str = "inductor") -> None:
    """Compile `model` (a LoopedTransformer) in place: mode False | "blocks" | "model" (trainer.compile).
    State-dict keys are unchanged (nn.Module.compile, not a wrapper module). backend="eager" keeps Dynamo's
    tracing and caching without code generation (quick checks of the caching on CPU)."""
    if mode not in COMPILE_MODES:
        raise ConfigError(f"compile={mode!r} is not allowed; choose one of false, 'blocks', 'model'")
    if not mode:
        return
    watch_recompile_limit()
    raise_recompile_limit(recompile_limit)
    units = [model] if mode == "model" else [*model.prelude, *model.recurrent, *model.coda]
    for unit in units:
        unit.compile(backend=backend, dynamic=False)  # only torch 2.11's keywords (module docstring)
