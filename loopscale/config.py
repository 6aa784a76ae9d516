"""Typed configuration schema.

Every dataclass here validates itself in `__post_init__` and raises `ValueError` naming the field and the
allowed values, so a bad sweep point fails at start, not an hour into training. `register_configs()` puts
the schema into Hydra's ConfigStore so YAML under `sweeps/` is type-checked against it.

Names follow the literature: d_model, n_layer; r = recurrence count; p / k / c = prelude / recurrent-block
/ coda depth in layers, so effective depth L_eff = p + k * r + c (DESIGN.md, "Iso-depth").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

INJECTIONS = ("linear", "additive", "passthrough", "hyper")
MLPS = ("relu2", "swiglu")
VOCAB_MULTIPLE = 64  # the model pads its vocabulary to this multiple (tensor-core friendly shapes)


def _check_choice(name: str, value: Any, allowed: tuple) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed; choose one of {', '.join(map(repr, allowed))}")


def _check_positive(name: str, value: Any) -> None:
    if value is None or value <= 0:
        raise ValueError(f"{name}={value!r} must be > 0")


def pad_vocab(vocab_size: int, multiple: int = VOCAB_MULTIPLE) -> int:
    """Smallest multiple of `multiple` that holds `vocab_size` tokens."""
    return -(-vocab_size // multiple) * multiple


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
    injection: str = "passthrough"  # linear | additive | passthrough | hyper
    bptt_k: Optional[int] = None  # truncated backprop: only the last k of r passes get gradient; None = all
    hyper_lanes: int = 2  # K, residual lanes for injection="hyper"
    hyper_dynamic: bool = False  # input-dependent tanh corrections (Zhu et al. 2024), zero-initialised
    mlp: str = "relu2"  # relu2 (hidden = mlp_ratio * d) | swiglu (hidden = 2/3 * mlp_ratio * d, rounded)
    mlp_ratio: int = 4
    seq_len: int = 256  # T, the context length (also the RoPE table length)
    tie_embeddings: bool = False
    logit_softcap: Optional[float] = None  # soft-cap c: logits -> c * tanh(logits / c)
    rope_base: float = 10000.0
    norm_eps: float = 1e-6
    init_std: float = 0.02

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "head_dim", "n_rec", "r", "seq_len", "mlp_ratio"):
            _check_positive(name, getattr(self, name))
        for name in ("n_prelude", "n_coda"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)!r} must be >= 0")
        _check_choice("injection", self.injection, INJECTIONS)
        _check_choice("mlp", self.mlp, MLPS)
        if self.d_model % self.head_dim != 0:
            raise ValueError(f"d_model={self.d_model} must be a multiple of head_dim={self.head_dim}")
        if self.head_dim % 2 != 0:
            raise ValueError(f"head_dim={self.head_dim} must be even (RoPE rotates pairs)")
        if self.bptt_k is not None and not (1 <= self.bptt_k <= self.r):
            raise ValueError(f"bptt_k={self.bptt_k!r} must be between 1 and r={self.r} (or None for full backprop)")
        if self.injection == "hyper":
            if self.r == 1:
                raise ValueError("injection='hyper' needs r > 1; allowed for r = 1: 'passthrough', 'linear', 'additive'")
            _check_positive("hyper_lanes", self.hyper_lanes)
        if self.hyper_dynamic and self.injection != "hyper":
            raise ValueError("hyper_dynamic=True needs injection='hyper'")
        if self.logit_softcap is not None:
            _check_positive("logit_softcap", self.logit_softcap)

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
    def variant(self) -> str:
        """Recipe name used in run names and the runs table: baseline | tbptt | hyper."""
        if self.injection == "hyper":
            return "hyper"
        if self.bptt_k is not None and self.bptt_k < self.r:
            return "tbptt"
        return "baseline"


@dataclass
class DataConfig:
    """Where tokens come from and how they are cut (see loopscale/data.py)."""

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
    val_fraction: float = 0.05  # share of documents held out for validation
    split_seed: int = 0
    data_dir: str = "data/cache"
    num_proc: int = 2
    val_tokens: int = 65536  # size of the fixed validation set

    def __post_init__(self) -> None:
        _check_choice("source", self.source, ("shakespeare", "text", "hf"))
        if self.source == "text" and not self.path:
            raise ValueError("source='text' needs path (a .txt/.jsonl/.parquet file or folder)")
        if self.source == "hf" and not self.hf_name:
            raise ValueError("source='hf' needs hf_name (a hub dataset name)")
        _check_positive("vocab_size", self.vocab_size)
        _check_positive("val_tokens", self.val_tokens)
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"val_fraction={self.val_fraction!r} must be in (0, 1)")
