"""The model's typed configuration: ModelConfig, the iso-depth layer plan and the vocabulary padding.

Names follow the literature: d_model, n_layer; r = recurrence count; p / k / c = prelude / recurrent-block
/ coda depth in layers, so effective depth L_eff = p + k * r + c (docs/design.md, "Iso-depth").
ModelConfig resolves the sweep conveniences (depth, recipe, injection="auto", dense_layout) in
`__post_init__`, so the model code only sees concrete values. Importable from loopscale.config.schema too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from loopscale.blocks import registry as blocks
from loopscale.config.checks import check_choice, check_positive, check_r_sampling
from loopscale.config.naming import check_name
from loopscale.errors import ConfigError, UnknownName, closest
from loopscale.injections.form import MATRIX, option
from loopscale.injections.registry import form as injection_form
from loopscale.injections.registry import names
from loopscale.recipes import registry as recipes

INITS = ("gpt2", "paper")
DENSE_LAYOUTS = ("same", "plain")
MLPS = ("relu2", "swiglu")
SWIGLU_MULTIPLE = 64  # SwiGLU hidden width is rounded to this multiple
PRECISIONS = ("fp32_stream", "published")
VOCAB_MULTIPLE = 64  # the model pads its vocabulary to this multiple (tensor-core friendly shapes)
# fields that became form options (model.options.<key>), with the defaults they had as fields
MOVED_TO_OPTIONS = {"hyper_lanes": 2, "hyper_dynamic": False}


def with_moved_fields(model: dict) -> dict:
    """A ModelConfig as a dict (asdict) with the options that were fields back as those fields: what a run's
    identity (train/identity.py) and its compiled-graph key (train/compile_cache.py) hold, so run dirs and
    cached graphs from before the move keep theirs."""
    options = dict(model.get("options") or {})
    fields = {key: options.pop(key, model.get(key, default)) for key, default in MOVED_TO_OPTIONS.items()}
    return {**model, "options": options, **fields}


def recorded_model(fields: dict) -> ModelConfig:
    """The ModelConfig of a recorded config (run.json's `config["model"]`): a record from before the move holds
    hyper_lanes / hyper_dynamic as fields (every design's, at their defaults unless it was hyper), read here as
    the hyper form's options they are now; a default is left out, as no option is the default."""
    rest = {key: value for key, value in fields.items() if key not in MOVED_TO_OPTIONS}
    moved = {key: fields[key] for key, default in MOVED_TO_OPTIONS.items() if fields.get(key, default) != default}
    return ModelConfig(**{**rest, "options": {**moved, **(rest.get("options") or {})}})


def check_moved_overrides(overrides) -> None:
    """A ConfigError with the new key for an override of a field that became a form option (model.hyper_lanes=3:
    model.options.hyper_lanes=3), instead of Hydra's "not in ModelConfig"."""
    for override in overrides:
        key = str(override).split("=", 1)[0].lstrip("+~")
        if key.removeprefix("model.") in MOVED_TO_OPTIONS and key.startswith("model."):
            new = key.replace("model.", "+model.options.", 1)
            raise ConfigError(f"{key} is a form option now (hyper-connections are configured as options): {new}=...")


def pad_vocab(vocab_size: int, multiple: int = VOCAB_MULTIPLE) -> int:
    """Smallest multiple of `multiple` that holds `vocab_size` tokens."""
    return -(-vocab_size // multiple) * multiple


def layer_plan(l_eff: int, r: int, n_prelude: int = 2, n_coda: int = 2) -> tuple[int, int, int]:
    """(p, k, c) with p + k * r + c = l_eff (iso-depth, docs/design.md): the recurrent block gets the depth
    left after prelude and coda. The one place the plan is computed: ModelConfig(depth=...) calls it."""
    if r < 1:
        raise ConfigError(f"r={r!r} must be >= 1")
    if n_prelude < 0 or n_coda < 0:
        raise ConfigError(f"n_prelude={n_prelude!r} and n_coda={n_coda!r} must be >= 0")
    rec_depth = l_eff - n_prelude - n_coda
    if rec_depth < 1:
        raise ConfigError(f"l_eff={l_eff} leaves no recurrent layers after n_prelude={n_prelude} and n_coda={n_coda}")
    if rec_depth % r != 0:
        allowed = [d for d in range(1, rec_depth + 1) if rec_depth % d == 0]
        raise ConfigError(
            f"l_eff - n_prelude - n_coda = {l_eff} - {n_prelude} - {n_coda} = {rec_depth} is not divisible "
            f"by r={r}; allowed r for this depth: {', '.join(map(str, allowed))}"
        )
    return n_prelude, rec_depth // r, n_coda


@dataclass
class ModelConfig:
    """One looped transformer. Embedding -> RMSNorm -> prelude (p layers, once) -> recurrent block
    (k layers, r times, with injection of the prelude output e) -> coda (c layers, once) -> RMSNorm -> head."""

    vocab_size: int = 2048  # tokenizer vocabulary; the model uses padded_vocab_size
    d_model: int = 128
    head_dim: int = 64  # n_head = d_model // head_dim
    n_prelude: int = 2  # p
    n_rec: int = 8  # k, layers in the recurrent block
    n_coda: int = 2  # c
    r: int = 1  # recurrence count: passes through the recurrent block
    # auto (the recipe's form; else passthrough at r = 1 and looped_injection at r > 1) or a form of
    # loopscale/injections/: additive | concat | huginn | hyper | linear | loop_index | parcae | passthrough | ...
    injection: str = "auto"
    # auto (the recipe's; else prenorm) or a form of loopscale/blocks/: what one layer is (prenorm | sandwich |
    # lora | scaled_residual). Left out of a run's identity while prenorm (train/identity.py).
    block: str = "auto"
    # Options of the injection and block forms (lora_rank, residual_lambda, parcae_state_std, hyper_lanes,
    # hyper_dynamic): the form's own
    # default for a key not given, the recipe's defaults under it. Empty for every earlier design, so it adds
    # nothing to their identity.
    options: dict[str, Any] = field(default_factory=dict)
    bptt_k: Optional[int] = None  # truncated backprop: only the last k of r passes get gradient; None = all
    # Variable-depth training (loopscale/model/r_sampling.py; docs/design.md, "Variable-depth training"): fixed
    # (every step r passes) | poisson-lognormal (Huginn: n = Poisson(lambda) + 1, lambda ~ LogNormal(ln r -
    # sigma^2 / 2, sigma)) | uniform (over r_set). Per optimizer step, or per sequence (Parcae). The model's
    # parameters are those of r passes whatever is drawn (N_rec unchanged; a per-pass design repeats its last).
    r_sampling: str = "fixed"
    r_sampling_per: str = "step"  # step | sequence
    r_sigma: float = 0.5  # poisson-lognormal: sigma of ln lambda
    r_set: Optional[list] = None  # uniform: the pass counts drawn from, each equally likely
    r_max: Optional[int] = None  # draws above it run r_max passes (default 4 r): a finite, exact distribution
    r_grad: str = "bptt"  # bptt: the last bptt_k passes of each draw get gradient (all: None) | half: ceil(n / 2)
    mlp: str = "relu2"  # relu2 (hidden = mlp_ratio * d) | swiglu (hidden = 2/3 * mlp_ratio * d, rounded)
    mlp_ratio: int = 4
    seq_len: int = 256  # T, the context length (also the RoPE table length)
    tie_embeddings: bool = False
    logit_softcap: Optional[float] = None  # soft-cap c: logits -> c * tanh(logits / c)
    rope_base: float = 10000.0
    norm_eps: float = 1e-6
    init_std: float = 0.02  # init="gpt2" only
    # Dtypes under bf16 autocast (docs/design.md, "Precision"). fp32_stream: the residual stream, the injection's
    # output and the hyper lanes stay fp32 at every r, as the single stream at r = 1 (so r does not change the
    # stream's precision). published: the published code's dtypes: RoPE tables stored in bf16, the stream in
    # autocast's dtype from the injection on, the embedding stored in bf16 on CUDA. Logits, soft-cap and loss
    # are fp32 in both.
    precision: str = "fp32_stream"
    # gpt2: N(0, init_std) matrices, residual writes scaled by 1/sqrt(2 L_eff), as GPT-2.
    # paper: the published init (embedding N(0, 1), head N(0, 1e-3), block matrices uniform with
    # std 1/sqrt(fan_in)); see loopscale/model/transformer.py
    init: str = "gpt2"
    # The injection injection="auto" resolves to for r > 1 (baseline / tbptt recipes): linear (two d x d
    # matrices W_e e + W_s s) | concat (one Linear(2d -> d) on [e; s], the published form) | additive | passthrough
    looped_injection: str = "linear"
    # The layout at r = 1: same (p, k, c as for r > 1, e.g. 2-16-2) | plain (one stack of p + k + c layers,
    # no prelude or coda: the published 0-20-0). Resolved in __post_init__; r > 1 is never changed.
    dense_layout: str = "same"
    # Sweep conveniences, resolved in __post_init__ so the model code only sees concrete values:
    depth: Optional[int] = None  # target L_eff; when set, n_rec = (depth - p - c) / r (iso-depth)
    # The design's label, in run names, runs tables, joint fits and figures: a recipe of loopscale/recipes/, whose
    # conventions are applied when r > 1 (and at r = 1 for a design that changes the dense model) — baseline,
    # tbptt, hyper (the paper's), parcae, huginn, whole_stack, loop_index, lora, stable_residual — or a name of
    # your own for a design the other fields define (e.g. my_additive).
    # auto: the recipe the fields describe, else a name made from them (e.g. additive, hyper-dynamic)
    recipe: str = "auto"

    def __post_init__(self) -> None:
        if self.recipe != "auto":
            check_name("recipe", self.recipe)
        check_choice("init", self.init, INITS)
        check_choice("looped_injection", self.looped_injection, names(looped_injection=True))
        check_choice("dense_layout", self.dense_layout, DENSE_LAYOUTS)
        check_positive("r", self.r)
        self.options = dict(self.options or {})  # a plain dict (Hydra passes a DictConfig)
        if self.r == 1 and self.dense_layout == "plain":
            # one plain stack: the prelude and coda layers join the block (idempotent, so replace() is safe)
            if self.depth is None:
                self.n_rec += self.n_prelude + self.n_coda
            self.n_prelude = self.n_coda = 0
        apply_recipe(self, recipes.find(self.recipe))
        if self.depth is not None:
            self.n_rec = layer_plan(self.depth, self.r, self.n_prelude, self.n_coda)[1]
        for name in ("vocab_size", "d_model", "head_dim", "n_rec", "r", "seq_len", "mlp_ratio"):
            check_positive(name, getattr(self, name))
        for name in ("n_prelude", "n_coda"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}={getattr(self, name)!r} must be >= 0")
        form = injection_form(self.injection)
        block = blocks.form(self.block)
        check_choice("mlp", self.mlp, MLPS)
        check_choice("precision", self.precision, PRECISIONS)
        if self.d_model % self.head_dim != 0:
            raise ConfigError(f"d_model={self.d_model} must be a multiple of head_dim={self.head_dim}")
        if self.head_dim % 2 != 0:
            raise ConfigError(f"head_dim={self.head_dim} must be even (RoPE rotates pairs)")
        if self.bptt_k is not None and not (1 <= self.bptt_k <= self.r):
            raise ConfigError(f"bptt_k={self.bptt_k!r} must be between 1 and r={self.r} (or None for full backprop)")
        if form.needs_loop and self.r == 1:
            allowed = ", ".join(map(repr, names(needs_loop=False)))
            raise ConfigError(f"injection={self.injection!r} needs r > 1; allowed for r = 1: {allowed}")
        check_r_sampling(self)
        form.check(self)  # the form's own refusals (hyper: one lane, truncated backprop)
        block.check(self)
        check_options(self, form.options + block.options)
        if self.logit_softcap is not None:
            check_positive("logit_softcap", self.logit_softcap)
        recipe = recipes.find(self.recipe)
        if self.recipe == "auto":
            self.recipe = recipes.label_of(self) or (design_name(self) if self.r > 1 else "baseline")
        elif recipe is not None and not recipe.applies(self.r):
            self.recipe = "baseline"  # the same dense model: one run (one name, one identity) shared by the recipes
        check_recipe_label(self)

    @property
    def n_head(self) -> int:
        return self.d_model // self.head_dim

    @property
    def padded_vocab_size(self) -> int:
        return pad_vocab(self.vocab_size)

    @property
    def l_eff(self) -> int:
        """Layer passes per token: p + k * r + c."""
        return self.n_prelude + self.n_rec * self.r + self.n_coda

    @property
    def mlp_hidden(self) -> int:
        """MLP hidden width h. ReLU^2: mlp_ratio * d. SwiGLU: 2/3 of that (so 3 d h ~ 8 d^2 at ratio 4),
        rounded to the nearest multiple of 64."""
        if self.mlp == "relu2":
            return self.mlp_ratio * self.d_model
        h = 2 * self.mlp_ratio * self.d_model / 3
        return max(SWIGLU_MULTIPLE, SWIGLU_MULTIPLE * round(h / SWIGLU_MULTIPLE))


def apply_recipe(cfg: ModelConfig, recipe) -> None:
    """Resolve injection=auto and block=auto and fill the conventions of `recipe` (a registered Recipe, or None for
    auto and a name of the user's own) where they shape the model (loopscale/recipes/recipe.py): its forms, its
    option defaults under the user's, bptt_k = ceil(r/2) when it truncates, p = c = 0 when it loops the whole
    stack. Idempotent: a resolved config resolves to itself (dataclasses.replace runs this again)."""
    applies = recipe is not None and recipe.applies(cfg.r)
    if applies and recipe.whole_stack and (cfg.n_prelude or cfg.n_coda):
        # the prelude and coda layers leave the model; the block keeps its depth (k = (depth - p - c) / r)
        if cfg.depth is not None:
            cfg.depth -= cfg.n_prelude + cfg.n_coda
        cfg.n_prelude = cfg.n_coda = 0
    if applies and recipe.truncated and cfg.r > 1 and cfg.bptt_k is None:
        cfg.bptt_k = -(-cfg.r // 2)  # ceil(r / 2), the published probe
    if cfg.injection == "auto":
        fallback = recipes.find("baseline")  # the published looped injection at r > 1, passthrough at r = 1
        cfg.injection = (recipe if applies else fallback).injection(cfg.r, cfg.looped_injection)
    if cfg.block == "auto":
        cfg.block = recipe.block if applies else blocks.DEFAULT
    if applies:
        cfg.options = {**recipe.options, **cfg.options}


def muonh_frozen(cfg: ModelConfig) -> list[str]:
    """The model's matrices that MuonH can never move: a MATRIX-group parameter of its injection or block form that
    starts at exactly zero (Param.zero_init). MuonH keeps each matrix on the sphere of its initial Frobenius norm
    (loopscale/train/optim/muonh.py), and a sphere of radius 0 is one point: the parameter stays 0 for the whole run
    (linear's W_s: its loop would read no state, r passes being one pass)."""
    own = [(f"injection.{p.name}", p) for p in injection_form(cfg.injection).params(cfg)]
    block = blocks.form(cfg.block)
    own += [(f"{where}.*.{p.name}", p) for where in ("prelude", "recurrent", "coda") for p in block.params(cfg, where)]
    return sorted({name for name, p in own if p.group == MATRIX and p.zero_init})


def check_optimizer_reaches(cfg: ModelConfig, optimizer: str) -> None:
    """ConfigError for optim=muonh with a matrix it can never train (`muonh_frozen`), naming the fix: the published
    concat injection ([I | 0], one matrix of norm sqrt(d)) or optim=adamw."""
    frozen = muonh_frozen(cfg) if optimizer == "muonh" else []
    if frozen:
        field_ = "looped_injection" if cfg.injection == cfg.looped_injection else "injection"
        raise ConfigError(
            f"model.{field_}={cfg.injection} with optim=muonh: {', '.join(frozen)} starts at zero and MuonH keeps each "
            f"matrix at its initial norm, so it would never train (the loop would read no state); set "
            f"model.{field_}=concat (the published form) or optim=adamw"
        )


def check_options(cfg: ModelConfig, known: tuple[str, ...]) -> None:
    """Every key of model.options is one the model's injection or block form reads (a typo is an error)."""
    unknown = sorted(set(cfg.options) - set(known))
    if unknown:
        allowed = ", ".join(known) or "none"
        near = closest(unknown[0], known)
        raise UnknownName(
            f"model.options has {', '.join(map(repr, unknown))}, which injection={cfg.injection!r} and "
            f"block={cfg.block!r} do not read (they read: {allowed})" + (f" (did you mean {near!r}?)" if near else "")
        )


def design_name(cfg: ModelConfig) -> str:
    """The label recipe=auto gives a design of its own: its injection, then what sets it apart (the block when it is
    not the pre-norm layer, or when the name would otherwise be a recipe's that the model is not: huginn-prenorm)."""
    parts = [cfg.injection]
    if cfg.bptt_k is not None and cfg.bptt_k < cfg.r:
        parts.append(f"bptt{cfg.bptt_k}")
    if option(cfg, "hyper_dynamic", False):  # the hyper form's option (injections/hyper.py)
        parts.append("dynamic")
    if cfg.block != blocks.DEFAULT or recipes.find("-".join(parts)) is not None:
        parts.insert(1, cfg.block)
    return "-".join(parts)


NEAR_MISS = 0.8  # difflib's ratio from which a name of one's own reads as a typo of a recipe's ('lora2' 0.89)


def check_own_label(cfg: ModelConfig) -> None:
    """A recipe name that is not registered (check_recipe_label says when it may label a design of its own)."""
    dense = cfg.r == 1 and cfg.injection == recipes.recipe("baseline").injection(1, cfg.looped_injection)
    described = recipes.label_of(cfg) or ("baseline" if dense and cfg.block == blocks.DEFAULT else None)
    # a near miss: a character or two off a registered name (hugin, parcea, baselin); not a name that holds one
    # whole (r1_baseline, lora2: a variant's label) nor the label auto gave
    near = None if cfg.recipe == design_name(cfg) else closest(cfg.recipe, recipes.names(), NEAR_MISS)
    near = None if near is not None and near in cfg.recipe else near
    if near is None and described is None:
        return
    why = (
        f"the model's fields describe the '{described}' recipe"
        if near is None
        else f"did you mean '{near}'? A name of your own must not be a recipe's near miss"
    )
    raise UnknownName(
        f"model.recipe={cfg.recipe!r} is not a registered recipe ({why}); choose one of "
        f"{', '.join(recipes.names())}, or a name of your own for a design set by model.injection / model.block"
    )


def check_recipe_label(cfg: ModelConfig) -> None:
    """A registered recipe's name must describe the model where its conventions apply (at r = 1 every recipe but
    those with a dense model of their own is the same dense model): otherwise a design set up by its fields alone
    would be labelled, tabled and fitted as that recipe. A name of your own labels a design its other fields set
    (model.injection, model.block, ...); it is refused when it is a registered name's near miss (`hugin`) or when
    the fields describe a registered recipe (`nonexistent_x` on the baseline's fields): a typo would train
    another design under the name it meant."""
    recipe = recipes.find(cfg.recipe)
    if recipe is None:
        check_own_label(cfg)
        return
    why = recipe.mismatch(cfg)
    if why is not None:
        described = recipes.label_of(cfg)
        what = f"the '{described}' recipe" if described else "a design of its own"
        raise ConfigError(
            f"model.recipe={cfg.recipe!r}, but the model's fields ({why}) describe {what}: set model.recipe="
            f"{described or '<a name for your design>'} (a name of your own labels it in run names, tables and fits)"
        )
