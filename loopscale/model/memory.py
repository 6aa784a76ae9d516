"""How much device memory one training process needs, before anything runs: a model per (size, r, recipe,
device batch, compile mode, card), and the largest published-compatible device batch that fits a card.

    peak = weights + gradients + optimizer state + saved activations of one micro-batch + a transient

All in bytes; tokens n = device batch x T. The terms:

- weights and gradients: fp32 (4 bytes a parameter); under model.precision=published on CUDA the embedding
  is stored and stepped in bf16 (2 bytes). Gradients persist over the accumulation's micro-batches, and
  DDP keeps a copy of them in its buckets (world > 1).
- optimizer: MuonH keeps one fp32 momentum per matrix element (the blocks' and the injection's matrix-group
  parameters); its AdamW groups (embedding, head, norms, the injection's scalars) and plain AdamW keep two
  moments in the parameter's dtype.
- activations: what autograd keeps for backward under bf16 autocast, counted tensor by tensor (the
  CPU test measures the same with saved-tensor hooks and finds it equal):
  * per layer pass with gradient, per token: compiled (Inductor's partition) the fp32 residual input 4d;
    q, k, v matmul outputs 6d; SDPA's q, k, v after RoPE 6d; the two normed matmul inputs and the
    attention output 6d (bf16); the MLP's hidden before and after ReLU^2 4h (bf16): 22d + 4h = 38d at h = 4d.
    Eager: each normed input and its normalised copy in fp32 16d, autocast's bf16 copy of each matmul input
    8d (q, k and v each cast their own), SDPA's q, k, v and output 8d, the fp32 q and k of the QK-norm 8d,
    and 4h: 56d. Both add 12 H + 8 bytes of per-row statistics (three RMS norms per head-row, the
    log-sum-exp of attention, two layer norms);
  * the RoPE tables cast to bf16 (per pass: 4 copies of [T, hd/2] eager, 2 compiled);
  * the weights cast to bf16 (2 bytes per matrix element): once per forward eager (autocast caches the cast
    of a leaf) and for a whole compiled model, once per layer PASS when each layer is its own graph
    (compile=blocks: every call casts again); the injection's as its form says (`weight_copy_bytes`);
  * per pass with gradient: the pass norm (fp32 input and output, 8d + 4); what the injection's form saves
    (`saved_bytes_per_token` in loopscale/injections/: concat its bf16 input [e; s], 4d a pass; linear s, 2d
    a pass, and e once; hyper (2r - 1) saved copies of the K fp32 lanes, the first as K views
    of e's one storage, and r fp32 pass outputs); the
    embedding's int64 ids, the embedding and final norms (8d + 4 each);
  * the head (loopscale/model/head_loss.py): one fp32 gradient per token (4d) and the weight's (4 V_pad d).
- transient: the larger of one head chunk's logits and their gradients (~2 V_pad + 12 V bytes a token of
  the chunk) and the working set of one layer's backward (BACKWARD_BYTES_PER_D x d a token; measured by
  benchmarks/gpu_check.py, not derived).

A card's usable memory is its total less MARGIN: the CUDA context, cuBLAS / NCCL workspaces and the
caching allocator's fragmentation are not in the model. `benchmarks/gpu_check.py` compares the model with
torch.cuda.max_memory_allocated at the heaviest grid points.
"""

from __future__ import annotations

from dataclasses import dataclass

from loopscale.blocks.registry import form as block_form
from loopscale.config.model import ModelConfig
from loopscale.errors import ConfigError
from loopscale.injections.form import MATRIX
from loopscale.injections.registry import form as injection_form
from loopscale.model.accounting import block_matrix_params, grad_passes, layer_plan, mlp_hidden, param_counts

MIB = 2**20
GIB = 2**30
MARGIN = 0.10  # share of a card's memory kept free: context, workspaces, allocator fragmentation
# tokens per chunk of the head + loss (loopscale/model/head_loss.py): its transient is ~2 V_pad + 12 V bytes a token,
# ~1.8 GB at V = 32,001, small next to the activations of a device batch, and the head matmul stays large
HEAD_CHUNK_TOKENS = 4096
BACKWARD_BYTES_PER_D = 32  # one layer's backward working set per token, in units of d bytes (an estimate)
# Total memory per card in MiB, as nvidia-smi reports it, keyed like loopscale/train/mfu.py's peaks.
CARD_MEMORY_MIB = {
    "NVIDIA H100 80GB HBM3": 81559,
    "NVIDIA H100 PCIe": 81559,
    "NVIDIA H100 NVL": 95830,
    "NVIDIA H200": 143771,
    "NVIDIA H200 NVL": 143771,
    "NVIDIA GH200 480GB": 97871,
    "NVIDIA A100-SXM4-80GB": 81920,
    "NVIDIA A100-SXM4-40GB": 40960,
    "NVIDIA A100 80GB PCIe": 81920,
    "NVIDIA A100-PCIE-40GB": 40960,
    "NVIDIA L40S": 46068,
    "NVIDIA A10": 23028,
    "NVIDIA L4": 23034,
}


@dataclass(frozen=True)
class MemoryEstimate:
    """One training process's device memory, bytes."""

    weights: int
    grads: int
    optimizer: int
    activations: int  # saved for backward by one micro-batch's forward
    transient: int

    @property
    def peak(self) -> int:
        return self.weights + self.grads + self.optimizer + self.activations + self.transient

    def as_dict(self) -> dict:
        return {**{k: getattr(self, k) for k in self.__dataclass_fields__}, "peak": self.peak}


def card_memory(card: str) -> int:
    """Total memory of the card called `card` (bytes; exact name, case and spacing ignored)."""
    wanted = " ".join(card.split()).casefold()
    for name, mib in CARD_MEMORY_MIB.items():
        if name.casefold() == wanted:
            return mib * MIB
    raise ConfigError(f"no memory size known for card {card!r}; known: {', '.join(CARD_MEMORY_MIB)}")


def usable_memory(card: str) -> int:
    """What a process may plan to allocate on `card`: its total less MARGIN."""
    return int(card_memory(card) * (1 - MARGIN))


def layer_pass_bytes(cfg: ModelConfig, tokens: int, compiled: bool) -> int:
    """Saved activations of one layer pass with gradient over `tokens` tokens (module docstring)."""
    d, h, heads = cfg.d_model, mlp_hidden(cfg), cfg.n_head
    mlp = 4 * h if cfg.mlp == "relu2" else 8 * h  # SwiGLU: fc out [2h], silu(gate), the product (not measured)
    per_token = (22 * d if compiled else 40 * d) + mlp + 12 * heads + 8
    return per_token * tokens


def _rope_bytes(cfg: ModelConfig, passes: int, mode) -> int:
    T, hd = cfg.seq_len, cfg.head_dim
    if cfg.precision == "published":  # bf16 tables: saved as views of the buffers, once
        return T * hd * 2
    if mode == "model":
        return T * hd * 4  # the fp32 buffers, once
    return (4 if not mode else 2) * T * hd * passes  # bf16 copies of [T, hd/2] per pass


def _weight_copy_bytes(cfg: ModelConfig, mode) -> int:
    """bf16 copies of the matrices kept for backward (compile=blocks: one per layer pass)."""
    layers = cfg.n_prelude + cfg.n_rec + cfg.n_coda
    if mode == "blocks":
        layers = cfg.n_prelude + cfg.n_coda + cfg.n_rec * grad_passes(cfg)
    block = block_form(cfg.block)
    own = sum(n * block.weight_copy_bytes(cfg, where) for where, n, _, _ in layer_plan(cfg))
    return 2 * block_matrix_params(cfg) * layers + injection_form(cfg.injection).weight_copy_bytes(cfg) + own


def _block_form_bytes(cfg: ModelConfig, tokens: int) -> int:
    """What the block form's layers keep beyond the pre-norm layer's (sandwich: two more norms; adapters)."""
    block = block_form(cfg.block)
    per_token = sum(n * block.saved_bytes_per_token(cfg, where, n_grad) for where, n, _, n_grad in layer_plan(cfg))
    return per_token * tokens


def _pass_bytes(cfg: ModelConfig, tokens: int) -> int:
    """Over all passes with gradient: pass norms and what the injection saves."""
    passes = grad_passes(cfg)
    pass_norm = 8 * cfg.d_model + 4  # fp32 input and normalised output, rstd
    injection = injection_form(cfg.injection).saved_bytes_per_token(cfg, passes)
    return (pass_norm * passes + injection) * tokens


def activation_bytes(cfg: ModelConfig, device_batch: int, compile_mode=False) -> int:
    """Bytes autograd keeps from one micro-batch's forward (device_batch sequences of cfg.seq_len) under bf16
    autocast, excluding tensors that are parameters. compile_mode: False | 'blocks' | 'model'."""
    tokens = device_batch * cfg.seq_len
    layer_passes = cfg.n_prelude + cfg.n_coda + cfg.n_rec * grad_passes(cfg)
    d = cfg.d_model
    layers = layer_passes * layer_pass_bytes(cfg, tokens, compiled=bool(compile_mode))
    ends = (8 + 2 * (8 * d + 4) + 4 * d) * tokens  # ids, embedding + final norms, the head's grad of x
    head_weight_grad = 4 * cfg.padded_vocab_size * d
    return (
        layers
        + ends
        + _pass_bytes(cfg, tokens)
        + _block_form_bytes(cfg, tokens)
        + head_weight_grad
        + _rope_bytes(cfg, layer_passes, compile_mode)
        + _weight_copy_bytes(cfg, compile_mode)
    )


def state_bytes(cfg: ModelConfig, optimizer: str, cuda: bool, world: int = 1) -> tuple[int, int, int]:
    """(weights, gradients, optimizer state) in bytes; DDP's bucket copy of the gradients counts with them."""
    counts = param_counts(cfg)
    embed_bytes = 2 if cuda and cfg.precision == "published" else 4
    weights = 4 * (counts.total - counts.embedding) + embed_bytes * counts.embedding
    grads = weights * (2 if world > 1 else 1)
    if optimizer == "muonh":
        matrices = block_matrix_params(cfg) * (cfg.n_prelude + cfg.n_rec + cfg.n_coda)
        matrices += injection_form(cfg.injection).matrix_params(cfg)
        block = block_form(cfg.block)  # a block form's own matrices (none of today's: adapters are scalars)
        for where, n, _, _ in layer_plan(cfg):
            matrices += n * sum(p.numel for p in block.params(cfg, where) if p.group == MATRIX)
        adamw = weights - 4 * matrices  # the AdamW groups' bytes: two moments each
        return weights, grads, 4 * matrices + 2 * adamw
    return weights, grads, 2 * weights


def transient_bytes(cfg: ModelConfig, device_batch: int) -> int:
    """The larger of a head chunk's working set and one layer's backward working set."""
    tokens = device_batch * cfg.seq_len
    chunk = min(HEAD_CHUNK_TOKENS, tokens)
    head = chunk * (2 * cfg.padded_vocab_size + 12 * cfg.vocab_size)
    return max(head, BACKWARD_BYTES_PER_D * cfg.d_model * tokens)


def estimate_memory(
    cfg: ModelConfig, device_batch: int, compile_mode, optimizer: str = "muonh", cuda: bool = True, world: int = 1
) -> MemoryEstimate:
    """The peak of one training process (module docstring), bf16 autocast."""
    weights, grads, opt = state_bytes(cfg, optimizer, cuda, world)
    return MemoryEstimate(
        weights, grads, opt, activation_bytes(cfg, device_batch, compile_mode), transient_bytes(cfg, device_batch)
    )
