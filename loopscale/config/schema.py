"""Typed configuration schema.

Every dataclass here validates itself in `__post_init__` and raises `ConfigError` (a ValueError) naming the field
and the allowed values, so a bad sweep point fails at start, not an hour into training. `dirs.register_configs()` puts
the schema into Hydra's ConfigStore so YAML under `loopscale/conf/` is type-checked against it.

The model's config lives in model.py (ModelConfig, the iso-depth layer plan), the run and point names in
naming.py, the OmegaConf resolvers in resolvers.py, the field checks in checks.py; import each name from its
module.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Optional

from loopscale.config.checks import check_choice, check_finite, check_positive, check_r_eval
from loopscale.config.model import ModelConfig, check_optimizer_reaches
from loopscale.config.naming import check_name
from loopscale.errors import ConfigError

# The checks' names from when they were defined here (older callers import them from loopscale.config.schema).
_check_choice, _check_positive, _check_finite = check_choice, check_positive, check_finite


@dataclass
class DataConfig:
    """Where tokens come from and how they are cut (see loopscale/data/windows.py)."""

    source: str = "shakespeare"  # shakespeare | text | hf
    path: Optional[str] = None  # text: a .txt/.jsonl/.parquet file or folder
    hf_name: Optional[str] = None  # hf: hub dataset name, e.g. HuggingFaceFW/fineweb-edu
    hf_config: Optional[str] = None
    hf_split: str = "train"
    text_column: str = "text"
    streaming: bool = False
    max_documents: Optional[int] = None  # cap for hub corpora (streaming takes the first N)
    tokenizer: str = "bpe"  # bpe (trained on the corpus) | gpt2 | path/to/tokenizer.json
    vocab_size: int = 2048  # for tokenizer=bpe
    token_dtype: str = "auto"  # auto (uint16 if the vocab fits, else uint32) | uint16 | uint32
    val_fraction: float = 0.05  # share of documents held out for validation
    split_seed: int = 0
    data_dir: str = "data/cache"
    num_proc: int = 2
    val_tokens: int = 65536  # size of the fixed validation set
    # How training reads the tokens: windows (random windows of the token shards, loopscale/data/windows.py) or
    # packed (BOS-prepended best-fit rows of T + 1 tokens, each read once; loopscale/data/packed_parquet.py, rows.py).
    # source=packed reads a ready packed set: data.path (a local folder) or hf_name (a hub dataset repo).
    format: str = "windows"  # windows | packed
    val_rows: Optional[int] = None  # packed: the first val_rows rows of the val split (published: 34560); None = all
    allow_repeat: bool = False  # packed: wrap around (a second epoch) when D needs more rows than the set holds
    # How `data pack` fills rows: best_fit (every token kept, a row's free end padded and masked) or published
    # (every row full, documents cropped, as the published set was built; loopscale/data/document_packing.py)
    packing: str = "best_fit"

    def __post_init__(self) -> None:
        check_choice("source", self.source, ("shakespeare", "text", "hf", "packed"))
        check_choice("format", self.format, ("windows", "packed"))
        check_choice("packing", self.packing, ("best_fit", "published"))
        if self.source == "packed":
            if self.format != "packed":
                raise ConfigError("source='packed' reads a packed-rows set; it needs format='packed'")
            if not (self.path or self.hf_name):
                raise ConfigError(
                    "source='packed' needs path (a folder of train-*.parquet / val-*.parquet) "
                    "or hf_name (a hub dataset repo of them)"
                )
        if self.val_rows is not None:
            check_positive("val_rows", self.val_rows)
        if self.source == "text" and not self.path:
            raise ConfigError("source='text' needs path (a .txt/.jsonl/.parquet file or folder)")
        if self.source == "hf" and not self.hf_name:
            raise ConfigError("source='hf' needs hf_name (a hub dataset name)")
        check_positive("vocab_size", self.vocab_size)
        check_positive("val_tokens", self.val_tokens)
        check_positive("num_proc", self.num_proc)
        check_choice("token_dtype", self.token_dtype, ("auto", "uint16", "uint32"))
        if self.max_documents is not None:
            check_positive("max_documents", self.max_documents)
        if not 0.0 < self.val_fraction < 1.0:
            raise ConfigError(f"val_fraction={self.val_fraction!r} must be in (0, 1)")


SCHEDULES = ("linear", "wsd", "constant")
OPTIMIZERS = ("adamw", "muonh")


@dataclass
class OptimConfig:
    """AdamW (or MuonH + AdamW, optimizer=muonh) with warmup then decay. `linear`: warmup, then linear decay
    to final_lr_frac (the published
    recipe decays to 10%). `wsd`: warmup, stable at peak, then a cooldown over the last decay_frac of steps."""

    lr: float = 3e-3
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    schedule: str = "linear"  # linear | wsd | constant
    warmup_frac: float = 0.05  # share of steps spent warming up
    # Warmup in absolute optimizer steps (overrides warmup_frac). Forked WSD sweeps need it: every branch
    # must share the parent's warmup, whatever its own length (budget.mode=forks fills it in when unset).
    warmup_steps: Optional[int] = None
    final_lr_frac: float = 0.1  # lr at the end, as a fraction of the peak
    decay_frac: float = 0.2  # wsd: share of steps in the cooldown (also the cooldown of forked branches)
    decay_shape: str = "linear"  # wsd cooldown shape: linear | sqrt (1 - sqrt)
    grad_clip: float = 1.0  # max global grad norm; 0 disables clipping
    width_scaling: bool = False  # muP-style lr * base_width / d_model for matrices
    base_width: int = 128
    # optimizer=muonh (the published recipe, loopscale/conf/optim/muonh.yaml; loopscale/train/optim/muonh.py,
    # loopscale/train/optim/lr_transfer.py):
    # MuonH on the block and injection matrices at lr (the matrix base lr), AdamW (beta1, beta2, eps) on the rest
    # at the lr_* base lrs. transfer=published scales them with width, batch and D; none uses them as given.
    optimizer: str = "adamw"  # adamw | muonh
    momentum: float = 0.95  # MuonH Nesterov momentum
    ortho_dtype: str = "auto"  # MuonH orthogonalisation: auto (bf16 on CUDA as published, fp32 on CPU) | bf16 | fp32
    lr_head: float = 0.004
    lr_embedding: float = 0.3
    lr_norm: float = 0.005
    lr_hyper: float = 0.01
    transfer: str = "published"  # published | none
    transfer_ref_size: int = 10  # paper size s of the reference model (d = 640) the lrs were tuned at
    transfer_ref_batch_tokens: int = 262144  # B_ref = 2^18 tokens per step
    # Every group's peak lr times this (after the transfer): 1 in a sweep's grid, the multipliers of its lr grid
    # (hydra/sweeper=lr_grid, loopscale/launch/lr_grid.py) elsewhere; run names carry it (`naming.lr_tag`).
    lr_scale: float = 1.0
    # The experiment's tuned lr rule (`loopscale tune`, loopscale/config/lr_rule.py): every group's peak lr times
    # this multiplier of the run's recipe and r, read from sweeps/lr_rules/<experiment>.yaml by the experiment's
    # `${ls.lr_rule:...}`; 1 where no rule is tuned (the published transfer, or the base lrs as given). Run names
    # carry it (`naming.lr_rule_tag`). An lr grid's lr_scale multiplies on top of it.
    lr_rule: float = 1.0
    # optimizer=muonh: the peak lr of the matrices applied at every pass (the recurrent block's and the injection's
    # MuonH matrices, groups.LOOP) times this, relative to the other matrices; 1 keeps them in one group. A looped
    # block's update acts on every one of its r passes, so its best lr may differ from the once-applied layers'
    # (docs/results.md, "A learning rate for the loop's own matrices"). Run names carry it (`naming.lr_tag`).
    lr_loop: float = 1.0

    def __post_init__(self) -> None:
        check_positive("lr", self.lr)
        check_positive("lr_scale", self.lr_scale)
        check_positive("lr_rule", self.lr_rule)
        check_positive("lr_loop", self.lr_loop)
        for name in ("weight_decay", "beta1", "beta2", "eps", "grad_clip"):
            check_finite(name, getattr(self, name))
        check_choice("schedule", self.schedule, SCHEDULES)
        check_choice("decay_shape", self.decay_shape, ("linear", "sqrt"))
        for name in ("warmup_frac", "final_lr_frac", "decay_frac"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name}={getattr(self, name)!r} must be in [0, 1]")
        if self.grad_clip < 0:
            raise ConfigError(f"grad_clip={self.grad_clip!r} must be >= 0")
        if self.warmup_steps is not None and self.warmup_steps < 0:
            raise ConfigError(f"warmup_steps={self.warmup_steps!r} must be >= 0 (or None to use warmup_frac)")
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        if self.lr_loop != 1.0 and self.optimizer != "muonh":
            raise ConfigError(
                f"lr_loop={self.lr_loop!r} needs optimizer=muonh: its matrix groups are the ones split into the loop's "
                f"and the rest's (optimizer={self.optimizer!r} has no loop group); set optim.lr_loop=1"
            )
        check_choice("ortho_dtype", self.ortho_dtype, ("auto", "bf16", "fp32"))
        check_choice("transfer", self.transfer, ("published", "none"))
        for name in (
            "lr_head",
            "lr_embedding",
            "lr_norm",
            "lr_hyper",
            "transfer_ref_size",
            "transfer_ref_batch_tokens",
        ):
            check_positive(name, getattr(self, name))
        if not 0.0 <= self.momentum < 1.0:
            raise ConfigError(f"momentum={self.momentum!r} must be in [0, 1)")
        if self.optimizer == "muonh":
            # the hyperball fixes every matrix's norm and the recipe has no decay anywhere; muP width scaling is
            # AdamW's rule, the recipe transfers lrs by optim.transfer instead
            if self.weight_decay != 0:
                raise ConfigError(f"weight_decay={self.weight_decay!r}: optimizer='muonh' has no weight decay; set 0")
            if self.width_scaling:
                raise ConfigError(
                    "width_scaling=True is AdamW's muP rule; optimizer='muonh' scales lrs by "
                    "transfer='published' (or use transfer='none' with explicit lrs)"
                )


BUDGET_MODES = ("flops", "tokens", "ratio", "forks")


@dataclass
class BudgetConfig:
    """How long to train. `flops`: compute budget C -> D = C / F tokens; `tokens`: D directly; `ratio`: D =
    tokens_per_param * N. D is rounded to whole batches of batch_size * seq_len tokens.

    `forks`: one warmup-stable-decay run per model gives a point per entry of fork_flops (budgets C_i) or
    fork_tokens (D_i): a stable-lr parent checkpoints at each fork step and each branch cools down over the
    last optim.decay_frac of its own D_i (loopscale/train/forks.py). fork_stage picks what this job runs: all
    (parent, then every branch), parent, or one branch by its tag (e.g. C2.5e11) once its fork exists."""

    mode: str = "flops"  # flops | tokens | ratio | forks
    compute_flops: Optional[float] = 3e13
    tokens: Optional[int] = None
    tokens_per_param: Optional[float] = None
    fork_flops: Optional[list[float]] = None  # forks: one branch per compute budget C_i
    fork_tokens: Optional[list[int]] = None  # forks: one branch per token count D_i
    fork_stage: str = "all"  # forks: all | parent | a branch tag
    batch_size: int = 16  # global batch in sequences (split over devices and accumulation)
    # Sequences per device per micro-batch: auto (the published 32 / 16 from s = 18 / 8 from s = 30, capped at
    # each device's share of batch_size) or an int; accumulation makes up the rest (loopscale/train/batching.py).
    device_batch: Any = "auto"
    grad_accum: Optional[int] = None  # set instead of device_batch to fix the accumulation; None: derived

    def __post_init__(self) -> None:
        check_choice("mode", self.mode, BUDGET_MODES)
        if self.mode == "forks":
            given = [name for name in ("fork_flops", "fork_tokens") if getattr(self, name)]
            if len(given) != 1:
                raise ConfigError(
                    "budget.mode=forks needs exactly one of fork_flops (budgets) or fork_tokens "
                    f"(token counts) as a non-empty list; got {given or 'neither'}"
                )
            values = getattr(self, given[0])
            if any(v is None or v <= 0 for v in values):
                raise ConfigError(f"{given[0]}={list(values)!r}: every entry must be > 0")
        else:
            needed = {"flops": "compute_flops", "tokens": "tokens", "ratio": "tokens_per_param"}[self.mode]
            check_positive(needed, getattr(self, needed))
        check_positive("batch_size", self.batch_size)
        if self.device_batch != "auto" and (
            isinstance(self.device_batch, bool) or not isinstance(self.device_batch, int) or self.device_batch <= 0
        ):
            raise ConfigError(f"device_batch={self.device_batch!r} must be 'auto' or an int > 0")
        if self.grad_accum is not None:
            check_positive("grad_accum", self.grad_accum)


@dataclass
class TrainerConfig:
    """Lightning Trainer settings. CPU fp32 by default (bf16 is ~10x slower on this CPU); on CUDA use
    precision=bf16-mixed and compile=blocks (each layer compiled, the recurrence loop stays in Python) or
    compile=model (the whole forward, loop unrolled: one graph per shape)."""

    accelerator: str = "cpu"  # cpu | gpu | auto
    devices: int = 1
    num_nodes: int = 1
    # auto | ddp | ddp_spawn. No fsdp: Lightning's FSDP precision plugin cannot clip gradients by norm
    # (optim.grad_clip), and every model of the published grid fits one GPU with DDP.
    strategy: str = "auto"
    precision: str = "32-true"  # 32-true | bf16-mixed
    # false | blocks (true means blocks) | model | auto (on CPU: model when it pays for its compile, counting the
    # compiled-graph cache; loopscale/train/compile_choice.py)
    compile: Any = False
    # torch.compile backend: inductor (code generation); eager / aot_eager keep Dynamo's graphs, guards and
    # limits without generating code (quick checks of the compiled path on CPU, e.g. gpu_check --smoke)
    compile_backend: str = "inductor"
    val_every_steps: int = 0  # optimizer steps between validations; 0: only the final validation
    # share of the final validation set the intermediate validations read (its first rows / windows); the
    # final validation reads all of it, once (loopscale/data/heldout.py)
    val_subset: float = 0.05
    # passes each finished model is also scored at on the final validation set (train/testtime_eval.py): auto is
    # {1, 2, r/2, r, 2r, 4r} (whole numbers >= 1, each once); a list of whole numbers; off (or an empty list): none
    r_eval: Any = "auto"
    # passes each evaluation of the loss curve is also scored at (train/testtime_eval.py, curve_scores): off (the
    # default; also null or an empty list): the trained r only; auto: r_eval's default set; whole numbers. Each
    # extra r_eval costs its own forward FLOPs within curve_share (train/plan.py, curve_evaluations)
    curve_r_eval: Any = "off"
    # the loss curve (issue 55): after this many optimizer steps, half log-spaced and half regular, plus the
    # schedule's corners (warmup's end, cooldown's start, fork steps) and the last step, the val_subset share is
    # evaluated and recorded (run.json's `curve`); fewer when they would cost more than curve_share of the
    # run's training FLOPs (loopscale/data/heldout.py, curve_steps). 0: no curve.
    curve_points: int = 24
    curve_share: float = 0.05
    ckpt_every_steps: int = 50
    ckpt_every_minutes: float = 0.0  # also checkpoint when this much wall time passed since the last; 0: off
    # Launch estimates (loopscale/launch/estimate.py): GPU hours = F x D / (assumed_mfu x peak bf16 FLOP/s).
    assumed_mfu: float = 0.4
    plan_device: str = "NVIDIA H100 80GB HBM3"  # the device launch estimates assume (a name in loopscale/train/mfu.py)
    # refuse at submission a GPU job predicted not to fit plan_device's memory or the launcher's time limits
    check_limits: bool = True
    log_every_steps: int = 10
    progress: bool = True
    num_threads: int = 0  # torch intra-op threads on CPU; 0 leaves torch's default
    # Fault injection for tests (never set in real sweeps): raise after this step / make loss non-finite.
    fail_at_step: Optional[int] = None
    nan_at_step: Optional[int] = None

    def __post_init__(self) -> None:
        check_choice("strategy", self.strategy, ("auto", "ddp", "ddp_spawn"))
        check_positive("num_nodes", self.num_nodes)
        check_choice("precision", self.precision, ("32-true", "bf16-mixed", "16-mixed", "bf16-true"))
        check_positive("devices", self.devices)
        check_positive("ckpt_every_steps", self.ckpt_every_steps)
        check_positive("log_every_steps", self.log_every_steps)
        compile_modes = {
            False: False,
            "false": False,
            "off": False,
            True: "blocks",
            "true": "blocks",
            "blocks": "blocks",
            "model": "model",
            "auto": "auto",
        }
        if not isinstance(self.compile, (bool, str)) or self.compile not in compile_modes:
            raise ConfigError(
                f"compile={self.compile!r} is not allowed; choose one of false, 'blocks', 'model', 'auto'"
            )
        self.compile = compile_modes[self.compile]
        check_choice("compile_backend", self.compile_backend, ("inductor", "eager", "aot_eager"))
        if self.val_every_steps < 0 or self.ckpt_every_minutes < 0:
            raise ConfigError(
                f"val_every_steps={self.val_every_steps!r} and ckpt_every_minutes="
                f"{self.ckpt_every_minutes!r} must be >= 0"
            )
        if not 0.0 < self.assumed_mfu <= 1.0:
            raise ConfigError(f"assumed_mfu={self.assumed_mfu!r} must be in (0, 1]")
        if not 0.0 < self.val_subset <= 1.0:
            raise ConfigError(f"val_subset={self.val_subset!r} must be in (0, 1] (a share of the final validation set)")
        self.r_eval = check_r_eval(self.r_eval)
        self.curve_r_eval = check_r_eval(self.curve_r_eval, "curve_r_eval")
        if self.curve_points < 0 or not 0.0 < self.curve_share <= 1.0:
            raise ConfigError(
                f"curve_points={self.curve_points!r} must be >= 0 and curve_share={self.curve_share!r} in (0, 1]"
            )


@dataclass
class LoggerConfig:
    """CSV metrics always (run dir/metrics.csv); W&B offline unless mode=online is asked for."""

    wandb: bool = False
    wandb_mode: str = "offline"  # offline | online
    wandb_project: str = "loopscale"
    wandb_entity: Optional[str] = None

    def __post_init__(self) -> None:
        check_choice("wandb_mode", self.wandb_mode, ("offline", "online"))


@dataclass
class TrainConfig:
    """One training run. The run directory is runs_dir/sweep/run_name; a finished run there is never redone."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    seed: int = 0
    sweep: str = "default"
    run_name: str = "run"
    runs_dir: str = "runs"
    point: Optional[str] = (
        None  # grid point label "C<budget>-d<width>" set by sweeps (see docs/design.md, "The published recipe")
    )
    # A run dir belongs to one config (loopscale/train/identity.py): a relaunch whose config differs is an error,
    # unless restart=true, which deletes that run's files and starts it over.
    restart: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.seed < 2**32:  # what numpy and Lightning accept as a seed
            raise ConfigError(f"seed={self.seed!r} must be in [0, 2**32 - 1]")
        check_name("sweep", self.sweep)
        check_name("run_name", self.run_name)
        if self.point is not None:
            check_name("point", self.point)
        check_optimizer_reaches(self.model, self.optim.optimizer)  # no matrix the optimizer cannot move


def with_vocab(cfg: TrainConfig, vocab_size: int) -> TrainConfig:
    """`cfg` with the model's vocabulary set to the tokenizer's (known only once the data is prepared)."""
    return replace(cfg, model=replace(cfg.model, vocab_size=vocab_size))
