"""Exact parameter and FLOP accounting for the looped transformer, from a config alone.

Pure functions, no torch: the fitted law L(N_once, N_rec, r, D) is only as good as these counts, so each
one mirrors a module of `loopscale.model.transformer` and the tests check them against `sum(p.numel())` of the built
modules and against `torch.utils.flop_counter.FlopCounterMode` on a real forward + backward.

Parameter accounting (docs/design.md, "Parameter accounting"):
    block   = attention 4 d^2 (qkv 3 d^2 + out d^2, no biases; QK-norm has no weights)
              + MLP (ReLU^2: 2 * 4 d * d = 8 d^2; SwiGLU: 3 * d * h)
              + 2 d (the two pre-norm RMSNorm gains)
    N_rec   = k * block                                    (the recurrent block, stored once, run r times)
    N_once  = (p + c) * block + injection + 3 d            (embed_norm, pass_norm, final_norm)
              injection: the parameters its form declares (loopscale/injections/), each in N_once or N_rec:
                         linear and concat 2 d^2 (W = [W_e | W_s], [d, 2d]); additive / passthrough 0;
                         hyper r * (K^2 + 2 K) scalars (+ r * (d * (K + 2) + 3) for the dynamic variant)
    N_pass  = the slices used in one pass only (a loop-index embedding, per-pass adapters), declared N_PASS by their
              injection or block form (loopscale/blocks/: a block form's own parameters count with their layer)
    N       = N_once + N_pass + N_rec                      (no token embedding, no LM head)
    embedding = V_pad * d;  lm_head = V_pad * d untied, 0 tied (the head FLOPs still count)
Each parameter's class is declared once, by name (`declared_params`: every parameter of the built model, as
LoopedTransformer.named_parameters() names it); `param_counts` adds the declaration up by class.

FLOPs per token. Two counts, both per token of one forward + backward:
`matmul_flops_per_token` counts every matrix multiply, at 2 FLOPs per multiply-add forward and 2x that again
backward (6x in all) when it runs with gradient, 2x when it runs under `torch.no_grad()` (truncated backprop):
    - prelude and coda layers (always with gradient), k recurrent layers in each of the r passes;
    - attention scores and values, full (not causal-halved) T x T: 4 d T forward per layer pass, so
      12 d T with gradient and 4 d T without — what SDPA's math backend executes;
    - the injection's own matmuls, as its form counts them (`matmul_flops_per_token` of loopscale/injections/):
      concat (published) u = W [e; s], 2 d^2 multiply-adds per pass, the first included (s_0 = e); linear W_e e
      once per forward and W_s s per pass (under truncation the first pass with gradient skips W_s s's input
      gradient, 4x instead of 6x); hyper the alpha read-out K d a pass and the lane mix K^2 d (+ the dynamic
      projection K d (K + 2)), always 6x (the lanes stay in the autograd graph);
    - the LM head, 6 V_pad d (also when tied to the embedding).
On every configuration the tests try this equals FlopCounterMode's count under SDPA's math backend.

`flops_per_token` (F: steps, C = F D, MFU) is the published code's count, so that a budget C gives every run
the authors' step count: the matmuls above plus the parameters that multiply elementwise, at the same 6x / 2x
per use as the matrices — the two RMSNorm gains of every layer pass (2 d) and the injection's
(`elementwise_flops_per_token` of its form: per hyper-connection pass the beta write-in, beta (x) s, K d, which
makes the hyper mixing (K^2 + 2 K) d per pass as published). The three stream norms (embed_norm, pass_norm,
final_norm) are not counted, as published. F exceeds the matmul count by ~0.02% at the paper sizes.
Not counted in either (elementwise or lookups): the embedding lookup, QK-norm, RoPE, softmax and masking,
ReLU^2 / SiLU, residual adds, tanh soft-capping and the dynamic tanh, the cross-entropy, and the optimizer.

Every other FLOPs count of loopscale is here too, each from the same terms:
    - `causal_flops_per_token`: F with half of the T x T attention matmuls (`attention_flops_per_token`), what a
      causal kernel executes: MFU's second numerator (loopscale/train/mfu.py);
    - `eval_flops_per_token`: one forward with every pass under no_grad, 2 FLOPs a multiply-add (validation, in
      the launch estimates of loopscale/launch/estimate.py);
    - `inference_flops_per_token`: serving one token, F / 3 of the same model trained with full backprop (every
      use counts 6x there): the 2 N_active of the lifetime cost in `loopscale advise`.
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass, replace

from omegaconf import OmegaConf

from loopscale.blocks.form import layer_matrices, layer_passes
from loopscale.blocks.registry import form as block_form
from loopscale.config.dirs import config_dir
from loopscale.config.model import ModelConfig
from loopscale.config.naming import paper_width
from loopscale.errors import ConfigError
from loopscale.injections.form import N_ONCE, N_PASS, N_REC, option
from loopscale.injections.registry import form as injection_form
from loopscale.injections.registry import names as injection_names

# The presets come from the configs training composes: the shape from loopscale/conf/model/<preset>.yaml, the
# vocabulary from the data the preset trains on (conf/data/<data>.yaml; `model_preset`).
PAPER_DATA = "fineweb_edu_packed"  # the published set: 32,001 ids, padded to 32,064 embedding rows
CPU_DATA = "shakespeare"  # the default corpus (train.yaml's data default)
# the lr transfer's reference model (`reference_model`, loopscale/train/optim/lr_transfer.py)
REF_LAYOUT = (2, 4, 2)  # (p, k, c) for r > 1
REF_PLAIN_DEPTH = 20  # r = 1: a plain 20-layer stack (0-20-0)
D_REF_TOKENS_PER_PARAM = 10  # D_ref = 10 x its effective parameters


# ----------------------------------------------------------------------------------------------------
# parameters


def mlp_hidden(cfg: ModelConfig) -> int:
    """MLP hidden width h (ModelConfig.mlp_hidden): mlp_ratio * d for ReLU^2, 2/3 of it rounded to 64 for SwiGLU."""
    return cfg.mlp_hidden


def _mlp_matrix_params(cfg: ModelConfig) -> int:
    h = mlp_hidden(cfg)
    # ReLU^2: fc [h, d] + proj [d, h]; SwiGLU: fc [2h, d] (gate and up fused) + proj [d, h]
    return (2 if cfg.mlp == "relu2" else 3) * cfg.d_model * h


def block_matrix_params(cfg: ModelConfig) -> int:
    """Weights of one transformer layer that take part in matrix multiplies (no norm gains, no adapters)."""
    return 4 * cfg.d_model**2 + _mlp_matrix_params(cfg)


def block_params(cfg: ModelConfig) -> int:
    """One pre-norm layer: attention + MLP matrices + two RMSNorm gains (12 d^2 + 2 d for ReLU^2)."""
    return block_matrix_params(cfg) + 2 * cfg.d_model


def injection_params(cfg: ModelConfig) -> int:
    """Every parameter of the injection, whatever its accounting class."""
    return sum(injection_form(cfg.injection).counts(cfg).values())


EMBEDDING = "embedding"  # the token embedding: outside N
LM_HEAD = "lm_head"  # the untied LM head: outside N
CLASSES = (N_ONCE, N_REC, N_PASS, EMBEDDING, LM_HEAD)


@dataclass(frozen=True)
class Counted:
    """One parameter of the model: its name in LoopedTransformer.named_parameters(), its shape and the class it
    counts in (N_once, N_rec, N_pass, embedding or lm_head)."""

    name: str
    shape: tuple[int, ...]
    counts_in: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def layer_params(cfg: ModelConfig, where: str, matrices) -> tuple[Counted, ...]:
    """One layer at `where`, named as in the layer's named_parameters(): its `matrices` (`layer_matrices`) and its
    block form's own parameters (norm gains, adapters), each counting with the layer (N_once in the prelude and coda,
    N_rec in the recurrent block) unless its form declares it N_pass (a slice used in one pass only)."""
    home = N_REC if where == "recurrent" else N_ONCE
    own = block_form(cfg.block).params(cfg, where)
    weights = tuple(Counted(f"{name}.weight", shape, home) for name, shape in matrices)
    return weights + tuple(Counted(p.name, p.shape, N_PASS if p.counts_in == N_PASS else home) for p in own)


def declared_params(cfg: ModelConfig) -> tuple[Counted, ...]:
    """Every parameter of the model `cfg` builds, with its accounting class (docs/design.md, "Parameter
    accounting"): the embedding and the untied head outside N; the three stream norms, the prelude and coda layers
    in N_once; the recurrent layers in N_rec; the injection's parameters where its form declares each; the slices
    a form declares per pass (a loop-index embedding, per-pass adapters) in N_pass. `param_counts` adds them up."""
    d, V = cfg.d_model, cfg.padded_vocab_size
    found = [Counted("embed.weight", (V, d), EMBEDDING)]
    found += [Counted(f"{n}.weight", (d,), N_ONCE) for n in ("embed_norm", "pass_norm", "final_norm")]
    layers, matrices = layer_plan(cfg), layer_matrices(cfg)  # the layout, asked of blocks/form.py once
    for where, n, _, _ in layers:
        layer = layer_params(cfg, where, matrices)
        found += [replace(p, name=f"{where}.{j}.{p.name}") for j in range(n) for p in layer]
    found += [Counted(f"injection.{p.name}", p.shape, p.counts_in) for p in injection_form(cfg.injection).params(cfg)]
    if not cfg.tie_embeddings:
        found.append(Counted("lm_head.weight", (V, d), LM_HEAD))
    return tuple(found)


def layer_plan(cfg: ModelConfig) -> tuple[tuple[str, int, int, int], ...]:
    """(where, layers, passes, passes with gradient) of the prelude, the recurrent block and the coda: the layer
    passes every count here runs over, asked of blocks/form.py (`layer_passes`) in one place."""
    layers = {"prelude": cfg.n_prelude, "recurrent": cfg.n_rec, "coda": cfg.n_coda}
    return tuple((where, n, *layer_passes(cfg, where)) for where, n in layers.items())


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts of one model. N = N_once + N_pass + N_rec excludes embedding and LM head. N_pass: parameters
    used once per pass (a slice per pass: per-pass adapters, a loop-index embedding), docs/design.md."""

    N_once: int
    N_rec: int
    N: int
    embedding: int
    lm_head: int
    N_pass: int = 0

    @property
    def total(self) -> int:
        """Every stored parameter (tied head counted once)."""
        return self.N + self.embedding + self.lm_head

    def as_dict(self) -> dict:
        return asdict(self)


def param_counts(cfg: ModelConfig) -> ParamCounts:
    """The declared parameters (`declared_params`) added up by class."""
    by_class = dict.fromkeys(CLASSES, 0)
    for p in declared_params(cfg):
        by_class[p.counts_in] += p.numel
    return ParamCounts(
        N_once=by_class[N_ONCE],
        N_rec=by_class[N_REC],
        N=by_class[N_ONCE] + by_class[N_PASS] + by_class[N_REC],
        embedding=by_class[EMBEDDING],
        lm_head=by_class[LM_HEAD],
        N_pass=by_class[N_PASS],
    )


def effective_params(cfg: ModelConfig) -> int:
    """The lr transfer's D_ref count (loopscale/train/optim/lr_transfer.py): prelude + coda + norms + r x (recurrent
    block + injection), embeddings excluded; N_once counts the injection once, so it gets r - 1 more passes here."""
    counts = param_counts(cfg)
    return counts.N_once + (cfg.r - 1) * injection_params(cfg) + cfg.r * counts.N_rec


# ----------------------------------------------------------------------------------------------------
# FLOPs


def check_trainable(cfg: ModelConfig) -> None:
    """Reject configs whose prelude would get no gradient: a form that is not truncatable (passthrough, u = s)
    carries e only through s_0, which truncated backprop detaches."""
    if not injection_form(cfg.injection).truncatable and cfg.bptt_k is not None and cfg.bptt_k < cfg.r:
        *others, last = map(repr, injection_names(truncatable=True))
        raise ConfigError(
            f"bptt_k={cfg.bptt_k} < r={cfg.r} needs injection {', '.join(others)} or {last}; with "
            f"{cfg.injection!r} the prelude would get no gradient"
        )


def grad_passes(cfg: ModelConfig) -> int:
    """How many of the r passes run with gradient (the last bptt_k, or all)."""
    return cfg.r if cfg.bptt_k is None else cfg.bptt_k


def matmul_flops_per_token(cfg: ModelConfig) -> float:
    """FLOPs per token of the matrix multiplies of one forward + backward (see the module docstring)."""
    check_trainable(cfg)
    d, T = cfg.d_model, cfg.seq_len
    n_grad = grad_passes(cfg)
    n_nograd = cfg.r - n_grad
    # multiply-adds per token of one layer: weights + attention (QK^T and AV, 2 * T * d)
    layer_macs = block_matrix_params(cfg) + 2 * T * d
    once_macs = (cfg.n_prelude + cfg.n_coda) * layer_macs + cfg.padded_vocab_size * d  # + LM head
    pass_macs = cfg.n_rec * layer_macs
    injection = injection_form(cfg.injection).matmul_flops_per_token(cfg, n_grad)
    block = block_form(cfg.block)
    own = sum(n * block.matmul_flops_per_token(cfg, w, n_grad) for w, n, _, n_grad in layer_plan(cfg))
    # 2 FLOPs per multiply-add forward; backward doubles it twice over (input and weight gradients)
    return float(6 * (once_macs + n_grad * pass_macs) + 2 * n_nograd * pass_macs + injection + own)


def flops_per_token(cfg: ModelConfig) -> float:
    """F, training FLOPs per token in the published convention: the matmuls plus the norm gains of every layer
    pass and the injection's elementwise parameters, each at 6x with gradient and 2x without (module docstring)."""
    n_grad = grad_passes(cfg)
    block = block_form(cfg.block)  # the norm gains of every layer pass (pre-norm: two, sandwich: four)
    gain_uses = sum(n * block.elementwise_flops_per_token(cfg, w, n_grad) for w, n, _, n_grad in layer_plan(cfg))
    injection = injection_form(cfg.injection).elementwise_flops_per_token(cfg, n_grad)  # hyper: the write-in
    return matmul_flops_per_token(cfg) + gain_uses + injection


def tokens_for_budget(compute_flops: float, flops_per_token: float, batch_tokens: int) -> tuple[int, int]:
    """(D_tokens, steps) for a compute budget C: D = C / F rounded to whole batches, at least one step."""
    for name, value in (
        ("compute_flops", compute_flops),
        ("flops_per_token", flops_per_token),
        ("batch_tokens", batch_tokens),
    ):
        if not value > 0:
            raise ConfigError(f"{name}={value!r} must be > 0")
    steps = max(1, round(compute_flops / flops_per_token / batch_tokens))
    return steps * batch_tokens, steps


# ----------------------------------------------------------------------------------------------------
# FLOPs of other uses: MFU's causal count, validation, serving


def attention_flops_per_token(cfg: ModelConfig) -> float:
    """The T x T attention matmuls' share of F (scores and values, 4 d T per layer pass forward; x3 for a
    pass with gradient, x1 for a pass under no_grad), as accounting counts them."""
    with_grad = cfg.n_prelude + cfg.n_coda + cfg.n_rec * grad_passes(cfg)
    without_grad = cfg.n_rec * (cfg.r - grad_passes(cfg))
    return 4 * cfg.d_model * cfg.seq_len * (3 * with_grad + without_grad)


def causal_flops_per_token(cfg: ModelConfig) -> float:
    """F with half of the attention matmuls: what a causal attention kernel executes."""
    return flops_per_token(cfg) - attention_flops_per_token(cfg) / 2


def eval_flops_per_token(m: ModelConfig) -> float:
    """Forward-only FLOPs per token (validation: every pass without gradient, 2 FLOPs a multiply-add): the
    layer passes' matmuls and T x T attention, the injection in every pass, the head."""
    passes = m.n_prelude + m.n_coda + m.n_rec * m.r
    layer = block_matrix_params(m) + 2 * m.seq_len * m.d_model
    injection = injection_form(m.injection).forward_flops_per_token(m)
    block = block_form(m.block)  # its own matmuls (per-pass adapters), a third of a pass with gradient's
    own = sum(n * block.matmul_flops_per_token(m, w, passes) for w, n, passes, _ in layer_plan(m)) / 3
    return 2.0 * (passes * layer + m.padded_vocab_size * m.d_model) + injection + own


def eval_flops_at(m: ModelConfig, r_eval: int) -> float:
    """`eval_flops_per_token` of the same model run at r_eval passes (scored across r, or trained with sampled r):
    set on a copy, the layout (n_prelude, n_rec, n_coda) kept, only the pass count changed."""
    at = copy.copy(m)
    at.r = int(r_eval)
    return eval_flops_per_token(at)


@dataclass(frozen=True)
class Accounting:
    """Every count a run's plan needs of its model, asked of the accounting in one call (`account`)."""

    counts: ParamCounts
    F: float  # training FLOPs per token (`flops_per_token`)
    F_causal: float  # F with half the attention matmuls (`causal_flops_per_token`): MFU's second numerator
    eval_flops: dict[int, float]  # forward FLOPs per token at each pass count asked for (`eval_flops_at`)


def account(cfg: ModelConfig, r_evals=()) -> Accounting:
    """The parameters by class, F, the causal F and the forward FLOPs per token at each of `r_evals` (sorted)."""
    counts = param_counts(cfg)
    evals = {r: eval_flops_at(cfg, r) for r in sorted(set(r_evals))}
    return Accounting(counts, flops_per_token(cfg), causal_flops_per_token(cfg), evals)


def inference_flops_per_token(cfg: ModelConfig) -> float:
    """Serving one token: F / 3 of the same model trained with full backprop, where every use counts 6x (the
    2 N_active of a lifetime cost F D + 2 N_active T_inf). Truncated backprop changes training, not serving."""
    full = copy.copy(cfg)
    # set on a copy, not dataclasses.replace: a label such as recipe=tbptt would no longer describe the fields,
    # and accounting reads only the shape
    full.bptt_k = None
    return flops_per_token(full) / 3


# ----------------------------------------------------------------------------------------------------
# presets


def _shipped_config(group: str, name: str) -> dict:
    """The fields of loopscale/conf/<group>/<name>.yaml, the file `<group>=<name>` composes for training."""
    path = config_dir() / group / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"no {group} preset {name!r}: {path} does not exist")
    return OmegaConf.to_container(OmegaConf.load(path))


def data_vocab(data: str) -> int:
    """The vocabulary of conf/data/<data>.yaml: what training sets the model's vocab_size to at run time."""
    return int(_shipped_config("data", data)["vocab_size"])


def model_preset(name: str, data: str, **fields) -> ModelConfig:
    """The model `model=<name> data=<data>` trains: the shape of conf/model/<name>.yaml with the
    vocabulary of conf/data/<data>.yaml, then `fields` replaced (validated once, at the end)."""
    return ModelConfig(**{**_shipped_config("model", name), "vocab_size": data_vocab(data), **fields})


def paper_model(size: int, r: int, recipe: str = "baseline", **overrides) -> ModelConfig:
    """The published model at size s (loopscale/conf/model/paper.yaml) with d = 64 * s rounded up to a
    multiple of 128 and the published vocabulary: L_eff = 20, r = 1 a plain 0-20-0 stack, r > 1
    2 + 16/r x r + 2 with the concat injection; `overrides` (ModelConfig fields) set before the recipe is
    resolved, as in `cpu_model` (recipe="auto" then names the design they describe)."""
    if size < 1:
        raise ConfigError(f"size={size!r} must be >= 1")
    return model_preset("paper", PAPER_DATA, d_model=paper_width(size), r=r, recipe=recipe, **overrides)


def reference_model(cfg: ModelConfig, ref_size: int = 10) -> ModelConfig:
    """The model the lr transfer's D_ref is measured on (loopscale/train/optim/lr_transfer.py): paper size
    `ref_size` with the run's r; 0-20-0 at r = 1, 2-4-2 with the concat injection otherwise (for every recipe, as
    published). Vocabulary and context do not matter (embeddings and attention are not counted)."""
    paper = paper_model(ref_size, 1)
    common = dict(
        vocab_size=paper.vocab_size,
        d_model=paper.d_model,
        head_dim=paper.head_dim,
        seq_len=paper.seq_len,
        mlp=cfg.mlp,
        mlp_ratio=cfg.mlp_ratio,
    )
    if cfg.r == 1:
        return ModelConfig(**common, n_prelude=0, n_rec=REF_PLAIN_DEPTH, n_coda=0, r=1, injection="passthrough")
    p, k, c = REF_LAYOUT
    return ModelConfig(**common, n_prelude=p, n_rec=k, n_coda=c, r=cfg.r, injection="concat")


def d_ref_tokens(cfg: ModelConfig, ref_size: int = 10) -> float:
    """The lr transfer's D_ref: 10 x the effective parameters of the reference model (the published rule)."""
    reference = reference_model(cfg, ref_size)
    return D_REF_TOKENS_PER_PARAM * effective_params(reference)


def cpu_model(d_model: int = 128, r: int = 1, recipe: str = "auto", **overrides) -> ModelConfig:
    """The CPU model (loopscale/conf/model/cpu.yaml: L_eff = 12, p = c = 2, k = 8 / r) at this width with
    the default corpus's vocabulary. `overrides` are any other ModelConfig fields."""
    return model_preset("cpu", CPU_DATA, **{"d_model": d_model, "r": r, "recipe": recipe, **overrides})


def accounting_report(cfg: ModelConfig) -> dict:
    """What `loopscale params` prints: counts, FLOPs per token and the layer plan of one model."""
    return {
        **param_counts(cfg).as_dict(),
        "flops_per_token": flops_per_token(cfg),
        "p": cfg.n_prelude,
        "k": cfg.n_rec,
        "c": cfg.n_coda,
        "r": cfg.r,
        "L_eff": cfg.l_eff,
        "d_model": cfg.d_model,
        "n_head": cfg.n_head,
        "head_dim": cfg.head_dim,
        "vocab": cfg.vocab_size,
        "vocab_padded": cfg.padded_vocab_size,
        "seq_len": cfg.seq_len,
        "mlp": cfg.mlp,
        "injection": cfg.injection,
        "block": cfg.block,
        "options": dict(cfg.options),
        # the hyper form's options (injections/hyper.py), as `params` printed them when they were fields
        "hyper_lanes": option(cfg, "hyper_lanes", 2)
        if "hyper_lanes" in injection_form(cfg.injection).options
        else None,
        "hyper_dynamic": option(cfg, "hyper_dynamic", False),
        "bptt_k": cfg.bptt_k,
        "recipe": cfg.recipe,
        "tie_embeddings": cfg.tie_embeddings,
        "logit_softcap": cfg.logit_softcap,
        "init": cfg.init,
    }
