"""What loopscale knows about one injection form, from a ModelConfig alone and without torch.

A form is one module of loopscale/injections/ named after it, with `FORM = <an InjectionForm>` (registry.py finds
it; docs/architecture.md, "How to add a loop design", builds one). The spec states, for the config `cfg`:

    params(cfg)                             its parameters: name under `injection.`, shape, group, class
    matmul_flops_per_token(cfg, n_grad)     its matrix multiplies in one forward + backward (FlopCounterMode's count)
    elementwise_flops_per_token(cfg, n_grad)  its parameters that multiply elementwise: in F, not in the matmuls
    forward_flops_per_token(cfg)            one forward (the launch estimate's validation cost)
    saved_bytes_per_token(cfg, n_grad)      activations autograd keeps for its backward (the memory model)
    weight_copy_bytes(cfg)                  bf16 copies of its weights that autocast keeps for backward
    check(cfg)                              a ConfigError for a model it cannot train
    build(cfg)                              its nn.Module

Options a form reads (a rank, a scale) come from `cfg.options` (ModelConfig.options, {} by default) through
`option(cfg, key, default)`; which recipe picks a form is the recipe's business (loopscale/recipes/).

with n_grad the passes run with gradient (the last bptt_k of r, or all). FLOPs follow docs/design.md, "FLOPs per
token": 2 per multiply-add forward, 4 more backward, so a multiply in a pass with gradient costs 6x its
multiply-adds and one in a pass under no_grad (truncated backprop) 2x (`pass_flops`).

The module has the four methods the loop drives (loopscale/model/transformer.py) and its init:

    state = inj.start(e)                 before the first pass
    u, state = inj.read(state, e, i)     the block input of pass i (0-based; under no_grad in a truncated pass)
    state = inj.update(state, s, i)      after the pass, s = RMSNorm(block(u)); always in the autograd graph
    x = inj.finish(state)                the coda's input
    inj.reset_parameters()               its init, after the model's own (which leaves `injection.*` alone)
    inj.evaluation_metrics()             optional: {name: float} logged at every evaluation (Parcae's decay)

A form's module class is defined on first use inside a function of its file decorated with `module_class`, so
that `import torch` runs only when a model is built: the config, the accounting, `loopscale params` and `--help`
read the spec above it. The file's `__getattr__ = <that function>.find` makes the class an attribute of the file,
where pickle looks for it (trainer.strategy=ddp_spawn sends the model to its workers).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

# Where a parameter counts in the law L(N_once, N_rec, r, D) (docs/design.md, "Parameter accounting"):
N_ONCE = "N_once"  # counted once, whether it acts once or in every pass (the published injection counts here)
N_REC = "N_rec"  # with the recurrent block: its r passes make it worth r^phi
N_PASS = "N_pass"  # a slice used in one pass only (per-pass adapters): N_once + N_pass + r^phi N_rec (looped-pass)
ACCOUNTING_CLASSES = (N_ONCE, N_REC, N_PASS)

# The optimizer group of a parameter (loopscale/train/optim/groups.py). optim=muonh: matrix -> MuonH, scalar -> AdamW
# at lr_hyper, norm -> AdamW at lr_norm. optim=adamw: matrix -> weight-decayed, scalar and norm -> never decayed.
MATRIX = "matrix"
SCALAR = "scalar"
NORM = "norm"
GROUPS = (MATRIX, SCALAR, NORM)


@dataclass(frozen=True)
class Param:
    """One parameter of a form's module: `name` as in module.named_parameters() (the model's is `injection.<name>`)."""

    name: str
    shape: tuple[int, ...]
    group: str = MATRIX
    counts_in: str = N_ONCE
    # weight decay under optim=adamw (MuonH decays nothing): only MATRIX parameters are ever decayed, and one
    # with decay=False is not (Parcae's B: "no weight decay on A_log, dt, B")
    decay: bool = True
    # starts at exactly zero (its reset_parameters); a MATRIX one never trains under optim=muonh, which keeps each
    # matrix on the sphere of its initial norm (loopscale/train/optim/muonh.py): the config refuses the pair
    # (loopscale/config/model.py, `muonh_frozen`); tests/unit/test_injections.py checks the flag against the init
    zero_init: bool = False

    def __post_init__(self) -> None:
        if self.group not in GROUPS or self.counts_in not in ACCOUNTING_CLASSES:
            raise ValueError(
                f"Param {self.name!r}: group must be one of {GROUPS}, counts_in one of {ACCOUNTING_CLASSES}"
            )

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def decayed(self) -> bool:
        """Weight-decayed under optim=adamw: a matrix not marked decay=False."""
        return self.group == MATRIX and self.decay


def option(cfg, key: str, default):
    """A form option from ModelConfig.options (`model.options.<key>=...`), else `default` (the form's own)."""
    value = (getattr(cfg, "options", None) or {}).get(key, default)
    return type(default)(value) if default is not None else value


def pass_flops(cfg, n_grad: int, macs: int) -> int:
    """FLOPs of `macs` multiply-adds a token run in every pass: 6x in the n_grad passes with gradient, 2x in the
    r - n_grad passes under no_grad."""
    return (6 * n_grad + 2 * (cfg.r - n_grad)) * macs


def truncated(cfg) -> bool:
    """Truncated backprop: fewer than r passes with gradient."""
    return cfg.bptt_k is not None and cfg.bptt_k < cfg.r


class InjectionForm:
    """The torch-free spec of one form; a form overrides what differs from these defaults (no parameters, no
    FLOPs, nothing saved)."""

    name: str = ""
    # states read by the config (loopscale/config/model.py) and the accounting
    needs_loop = False  # refused at r = 1
    truncatable = True  # trains under bptt_k < r: e reaches the passes with gradient through read()
    looped_injection = True  # model.looped_injection may name it: what injection=auto becomes at r > 1
    options: tuple[str, ...] = ()  # the keys of ModelConfig.options it reads

    def params(self, cfg) -> tuple[Param, ...]:
        return ()

    def matmul_flops_per_token(self, cfg, n_grad: int) -> int:
        return 0

    def elementwise_flops_per_token(self, cfg, n_grad: int) -> int:
        """Parameters that multiply elementwise, counted like the norm gains in F (the published convention:
        6x a use with gradient, 2x without); FlopCounterMode does not see them."""
        return 0

    def forward_flops_per_token(self, cfg) -> int:
        """One forward, every pass: the launch estimate's convention counts each matrix-group parameter once a
        pass (exact for concat; linear's W_e e runs once, so it counts (r - 1) d^2 multiply-adds too many)."""
        return 2 * cfg.r * self.matrix_params(cfg)

    def saved_bytes_per_token(self, cfg, n_grad: int) -> int:
        return 0

    def weight_copy_bytes(self, cfg) -> int:
        """The bf16 copy autocast makes of each matrix for its matmul, kept for backward once per forward."""
        return 2 * self.matrix_params(cfg)

    def check(self, cfg) -> None:
        """Raise ConfigError for a config this form cannot train (called by ModelConfig after its own checks)."""

    def build(self, cfg):
        raise NotImplementedError(f"injection form {self.name!r} defines no module (build)")

    # ------------------------------------------------------------------------------------------------
    def matrix_params(self, cfg) -> int:
        return sum(p.numel for p in self.params(cfg) if p.group == MATRIX)

    def counts(self, cfg) -> dict[str, int]:
        """Parameters per accounting class."""
        found = dict.fromkeys(ACCOUNTING_CLASSES, 0)
        for p in self.params(cfg):
            found[p.counts_in] += p.numel
        return found


def module_class(name: str):
    """Decorate the function that defines a form's module class `name` (importing torch there): it runs once, on
    first use, and its class is `<form file>.<name>` for pickle through the file's `__getattr__ = <function>.find`."""

    def decorate(define):
        @functools.cache
        def defined():
            cls = define()
            if cls.__name__ != name:
                raise TypeError(f"{define.__module__}.{define.__name__} defines {cls.__name__}, not {name}")
            cls.__qualname__ = name  # not "<function>.<locals>.<name>": pickle finds it as an attribute of the file
            return cls

        def find(attribute: str):
            if attribute == name:
                return defined()
            raise AttributeError(f"module {define.__module__!r} has no attribute {attribute!r}")

        defined.find = find
        return defined

    return decorate


def like_init_state(e, std: float, generator=None):
    """A random initial state shaped like e: truncated normal, mean 0, `std`, cut at +-3 std ("like-init" of
    seal-rg/recurrent-pretraining recpre/raven_modeling_minimal.py, initialize_state; Parcae's state_init), drawn
    from `generator` (a torch.Generator on e's device). Drawn in every forward, training and evaluation alike, as
    there; a form's module draws it through RandomStart below, from generators of its own."""
    import torch  # on first use: this file is read without torch

    x = torch.empty_like(e)
    return torch.nn.init.trunc_normal_(x, mean=0.0, std=std, a=-3 * std, b=3 * std, generator=generator)


# The training stream's seed is the run's seed (torch.initial_seed(): what seed_everything set before the model
# was built) mixed with this constant, so s_0 is not the very numbers the weights' init drew from the global RNG;
# the evaluation stream's is the next one.
DRAW_SEED_SALT = 0x9E3779B97F4A7C15
_SEED_MOD = 2**64


@functools.cache
def random_start():
    """The mixin of a form's module whose initial state s_0 is random (Huginn, Parcae): every draw comes from a
    generator the module owns, never torch's global RNG, so

      training     one stream, seeded from the run's seed when the module is built, advanced by every training
                   forward and saved in the checkpoint as the module's extra state (state_dict()
                   ['injection._extra_state']): a killed run resumes on the very states it would have drawn
      evaluation   (module.eval()) a second stream, restarted from its own seed at every eval(): every
                   validation draws the same states for the same batches, and none moves the training stream
      `draw_generator`  when set (a torch.Generator on e's device), every draw comes from it: a scorer's own
    The draw runs outside torch.compile's graph (torch.compiler.disable: one graph break in a compiled model),
    since Dynamo does not trace a generator. Defined on first use: this file is read without torch."""
    import torch  # on first use: this file is read without torch (a form's spec is checked torch-free)

    class RandomStart:
        draw_generator = None  # an override for every draw (evaluation with a stream of one's own)

        def seed_draws(self, seed: int) -> None:
            """Both streams restart from `seed` (the training stream's; the evaluation stream's is seed + 1)."""
            self._draw_seed = (int(seed) ^ DRAW_SEED_SALT) % _SEED_MOD
            self._streams: dict[str, torch.Generator] = {}
            self._saved_stream: tuple[str, torch.Tensor] | None = None  # a loaded state, for the first draw

        def train(self, mode: bool = True):
            if not mode:
                self._streams.pop("eval", None)  # every evaluation starts its stream afresh
            return super().train(mode)

        def _stream(self, device) -> torch.Generator:
            name = "train" if self.training else "eval"
            stream = self._streams.get(name)
            if stream is None or stream.device != device:
                stream = torch.Generator(device=device).manual_seed((self._draw_seed + (name == "eval")) % _SEED_MOD)
                if name == "train" and self._saved_stream is not None and self._saved_stream[0] == device.type:
                    stream.set_state(self._saved_stream[1])
                    self._saved_stream = None
                self._streams[name] = stream
            return stream

        @torch.compiler.disable
        def initial_state(self, e, std: float):
            """s_0 ~ like-init of `std`, shaped like e, from this module's stream (class docstring)."""
            own = self.draw_generator is None
            return like_init_state(e, std, self._stream(e.device) if own else self.draw_generator)

        def get_extra_state(self) -> dict:
            """The training stream's seed and state, saved with the weights (tensors and plain values: checkpoints
            load with weights_only=True)."""
            stream = self._streams.get("train")
            saved = (stream.device.type, stream.get_state()) if stream is not None else self._saved_stream
            device, state = saved or ("", torch.empty(0, dtype=torch.uint8))
            return {"seed": self._draw_seed, "device": device, "state": state}

        def set_extra_state(self, saved: dict) -> None:
            self._draw_seed = int(saved["seed"])
            self._streams = {}
            self._saved_stream = (saved["device"], saved["state"]) if saved["device"] else None

    return RandomStart


class SingleStream:
    """start / update / finish of a form whose state is the stream s itself (s_0 = e): a mixin for its module."""

    def start(self, e):
        return e

    def update(self, state, s, i: int):
        return s

    def finish(self, s):
        return s
