"""How one optimizer step's sequences are split over devices and gradient accumulation.

The global batch (budget.batch_size sequences of T tokens, 262,144 tokens in the published runs) is what
the budget and the learning rate see; the device batch is what fits in memory. The published runs use a
device batch of 32 sequences, 16 from size s = 18 and 8 from s = 30 (s = d_model / 64; docs/design.md,
"The published recipe", Batch), and accumulate gradients over the rest:

    grad_accum = batch_size / (world x device_batch),   world = devices x num_nodes

budget.device_batch=auto on a GPU trainer takes the largest published-compatible device batch (the published
one, or it halved until it fits) whose predicted peak (loopscale/model/memory.py) fits trainer.plan_device's usable
memory; on CPU it takes the published one. Either way it is capped at each process's share of the batch.

Everything that needs the split (`loopscale sweep`, the launch checks) asks `device_batching` here; a run's
plan asks `split_and_memory`, which also gives the predicted memory at that split, worked out once.
"""

from __future__ import annotations

from dataclasses import dataclass

from loopscale.config.model import ModelConfig
from loopscale.config.schema import BudgetConfig, TrainerConfig
from loopscale.errors import ConfigError
from loopscale.model.memory import MemoryEstimate, estimate_memory, usable_memory

# (smallest size s, device batch in sequences): the published rule, largest size first
PUBLISHED_DEVICE_BATCH = ((30, 8), (18, 16), (0, 32))
SIZE_WIDTH = 64  # the published grid: d_model = 64 s (rounded up to a multiple of 128)
GPU_ACCELERATORS = ("gpu", "cuda")


@dataclass(frozen=True)
class Batching:
    world: int  # processes (GPUs) that each take a device batch per micro-batch
    device_batch: int  # sequences per process per micro-batch
    grad_accum: int  # micro-batches per optimizer step
    batch_size: int  # sequences per optimizer step = world x device_batch x grad_accum


def published_device_batch(d_model: int) -> int:
    """The published device batch for a model of width d_model (size s = d_model / 64, rounded up)."""
    size = -(-d_model // SIZE_WIDTH)
    return next(batch for min_size, batch in PUBLISHED_DEVICE_BATCH if size >= min_size)


def on_gpu(trainer: TrainerConfig) -> bool:
    return trainer.accelerator in GPU_ACCELERATORS


def candidate_device_batches(model: ModelConfig, per_process: int) -> list[int]:
    """Published-compatible device batches, largest first: the published one (capped at the process's
    share) and its halvings that still divide the share, down to 1."""
    first = min(published_device_batch(model.d_model), per_process)
    candidates = [first]
    while candidates[-1] % 2 == 0 and per_process % (candidates[-1] // 2) == 0:
        candidates.append(candidates[-1] // 2)
    return candidates


def auto_device_batch(
    model: ModelConfig, trainer: TrainerConfig, per_process: int, optimizer: str
) -> tuple[int, MemoryEstimate | None]:
    """budget.device_batch=auto (module docstring): the largest candidate predicted to fit the plan device
    on a GPU trainer (the smallest when none does: the launch check then refuses the job), with its predicted
    memory; the published one on CPU, with None."""
    candidates = candidate_device_batches(model, per_process)
    if not on_gpu(trainer):
        return candidates[0], None
    usable, world = usable_memory(trainer.plan_device), trainer.devices * trainer.num_nodes
    for device_batch in candidates:
        estimate = estimate_memory(model, device_batch, trainer.compile, optimizer, True, world)
        if estimate.peak <= usable or device_batch == candidates[-1]:
            return device_batch, estimate


def device_batching(
    budget: BudgetConfig, model: ModelConfig, trainer: TrainerConfig, optimizer: str = "adamw"
) -> Batching:
    """The split of budget.batch_size into world x device_batch x grad_accum (`split_and_memory`)."""
    return split_and_memory(budget, model, trainer, optimizer)[0]


def split_and_memory(
    budget: BudgetConfig, model: ModelConfig, trainer: TrainerConfig, optimizer: str = "adamw"
) -> tuple[Batching, MemoryEstimate | None]:
    """The split of budget.batch_size into world x device_batch x grad_accum, and the predicted memory per
    device at that device batch on a GPU trainer (None on CPU), worked out once.

    budget.device_batch='auto' takes `auto_device_batch` (`optimizer`, optim.optimizer, sizes its state:
    AdamW's, the default, is the larger); an int sets it; budget.grad_accum (when set) fixes the
    accumulation instead and the device batch follows. Raises ValueError naming the numbers when they do
    not divide."""
    world, gpu = trainer.devices * trainer.num_nodes, on_gpu(trainer)
    per_process, rest = divmod(budget.batch_size, world)
    if rest or per_process == 0:
        raise ConfigError(
            f"budget.batch_size={budget.batch_size} sequences must be a multiple of the world size "
            f"devices x num_nodes = {world}"
        )
    memory = None
    if budget.grad_accum is not None:
        if budget.device_batch != "auto":
            raise ConfigError(
                f"set one of budget.device_batch={budget.device_batch!r} and "
                f"budget.grad_accum={budget.grad_accum}, not both"
            )
        device_batch, rest = divmod(per_process, budget.grad_accum)
        if rest or device_batch == 0:
            raise ConfigError(
                f"budget.batch_size={budget.batch_size} sequences do not split into world {world} x "
                f"budget.grad_accum={budget.grad_accum} equal device batches"
            )
    elif budget.device_batch == "auto":
        device_batch, memory = auto_device_batch(model, trainer, per_process, optimizer)
    else:
        device_batch = int(budget.device_batch)
    grad_accum, rest = divmod(per_process, device_batch)
    if rest or grad_accum == 0:
        raise ConfigError(
            f"budget.batch_size={budget.batch_size} sequences x T={model.seq_len} = "
            f"{budget.batch_size * model.seq_len} tokens per step do not divide into world {world} x device batch "
            f"{device_batch} x T={model.seq_len} = {world * device_batch * model.seq_len} tokens per micro-batch; "
            f"set budget.device_batch to a divisor of {per_process} (or budget.grad_accum)"
        )
    if gpu and memory is None:  # the predicted memory per device at this split (loopscale/model/memory.py)
        memory = estimate_memory(model, device_batch, trainer.compile, optimizer, True, world)
    return Batching(world, device_batch, grad_accum, budget.batch_size), memory
