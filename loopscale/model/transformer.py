"""The looped (depth-recurrent) transformer of docs/design.md, "The looped model".

    idx -> embed -> embed_norm -> prelude (p layers, once) = e
        -> r passes of the recurrent block (k layers), each fed by the injection of e, a form of
           loopscale/injections/ driven through start / read / update / finish (the loop never asks which):
               concat       u = W [e; s], one Linear(2d -> d), W = [I | 0] at init, s_0 = e (published)
               linear       u = W_e e + W_s s, the same map split in two d x d matrices (W_e e once)
               additive     u = s + e, s_0 = 0 (so the first pass sees e, as in every mode)
               passthrough  u = s, s_0 = e (the r = 1 model)
               hyper        K residual lanes
           and closed by s = pass_norm(block(u))
        -> coda (c layers, once) -> final_norm -> lm_head (or the tied embedding) -> logits

Each layer is its block form's (loopscale/blocks/, model.block): pre-norm x + attn(norm(x)), then x + mlp(norm(x))
by default, Huginn's sandwich, per-pass adapters, scaled residual writes; the form builds it from the attention,
MLP and RMSNorm classes here (PARTS). Attention is causal (loopscale/model/attention.py: SDPA, or three batched
matmuls for short fp32 sequences with small heads on CPU) with RoPE and a parameter-free QK-norm; no biases.
Truncated backprop (cfg.bptt_k): the first r - bptt_k passes run their block under torch.no_grad(), so they
store no activations; e still reaches the loss through the injection of the last bptt_k passes. Hyper-connections
refuse truncation (their form), as published.

Init (cfg.init): `gpt2` draws matrices from N(0, init_std) with the residual writes scaled by 1/sqrt(2 L_eff);
`paper` is the published recipe: embedding N(0, 1), untied head N(0, 1e-3), every block matrix uniform with
std 1/sqrt(fan_in) (q, k, v, attention-out and MLP-in 1/sqrt(d), MLP-out 1/sqrt(4d)), so MuonH starts from
nonzero norms. Both keep norm gains at 1 and leave `injection.*` to its form's reset_parameters (the identity
init of every form here: u = e on the first pass).

Module names match loopscale.model.accounting: N_rec = recurrent, N_once = prelude + coda + injection +
embed_norm + pass_norm + final_norm, N_pass = the per-pass slices the forms declare (taken out of the others),
embedding = embed, lm_head = lm_head (None when tied).
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from loopscale.blocks.form import LayerParts
from loopscale.blocks.registry import form as block_form
from loopscale.config.model import ModelConfig
from loopscale.injections.registry import form as injection_form
from loopscale.model.accounting import check_trainable, mlp_hidden
from loopscale.model.attention import causal_attention
from loopscale.model.head_loss import chunked_head_loss, head_logits


class RMSNorm(nn.Module):
    """x / rms(x) * g, with a learned gain g of size d."""

    def __init__(self, d: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != self.weight.dtype:  # a bf16 stream (precision=published): normalise, then scale, as published
            return F.rms_norm(x, (x.shape[-1],), eps=self.eps) * self.weight
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def rope_tables(
    seq_len: int, head_dim: int, base: float, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of the rotary angles t * base^(-2j / head_dim): each [T, head_dim / 2], computed in fp32 and
    stored in `dtype` (bf16 under model.precision=published, as the published code keeps them)."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x1, x2) = halves of the head dim by minus the position angle, the published code's sign:
    (x1 cos + x2 sin, x2 cos - x1 sin). x: [B, T, H, hd]. The sign is a convention (q.k still depends on
    the position difference only); keeping the published one lets its weights load unchanged."""
    x1, x2 = x.chunk(2, dim=-1)
    cos, sin = cos[:, None, :].to(x.dtype), sin[:, None, :].to(x.dtype)  # [T, 1, hd/2], over heads; bf16 stays bf16
    return torch.cat((x1 * cos + x2 * sin, x2 * cos - x1 * sin), dim=-1)


def project(linear: nn.Linear, x: torch.Tensor, adapt, name: str) -> torch.Tensor:
    """linear(x), then `adapt(name, x, y)` when a block form adapts it (per-pass adapters: y + B_i A_i x)."""
    y = linear(x)
    return y if adapt is None else adapt(name, x, y)


class CausalSelfAttention(nn.Module):
    """q, k and v are three d x d matrices, as published: MuonH orthogonalises each one and holds each on its
    own sphere (one fused [3d, d] matrix would be a different optimizer step)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_head, self.head_dim, self.eps = cfg.n_head, cfg.head_dim, cfg.norm_eps
        self.q = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.k = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.v = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, adapt=None) -> torch.Tensor:
        B, T, d = x.shape
        heads = (B, T, self.n_head, self.head_dim)
        q = project(self.q, x, adapt, "attn.q").view(heads)  # [B, T, H, hd]
        k = project(self.k, x, adapt, "attn.k").view(heads)
        v = project(self.v, x, adapt, "attn.v").view(heads)
        # QK-norm: parameter-free RMS norm over the head dim keeps attention logits bounded. After the rotation,
        # as published: the two commute exactly only when cos^2 + sin^2 = 1, which bf16 tables do not keep
        q = F.rms_norm(apply_rope(q, cos, sin), (self.head_dim,), eps=self.eps)
        k = F.rms_norm(apply_rope(k, cos, sin), (self.head_dim,), eps=self.eps)
        y = causal_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))  # SDPA, or matmuls (attention.py)
        return project(self.proj, y.transpose(1, 2).reshape(B, T, d), adapt, "attn.proj")  # [B, H, T, hd] -> [B, T, d]


class MLP(nn.Module):
    """ReLU^2 (proj(relu(fc x)^2)) or SwiGLU (proj(silu(gate x) * up x)); hidden width from accounting."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.swiglu = cfg.mlp == "swiglu"
        h = mlp_hidden(cfg)
        self.fc = nn.Linear(cfg.d_model, (2 if self.swiglu else 1) * h, bias=False)
        self.proj = nn.Linear(h, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, adapt=None) -> torch.Tensor:
        h = project(self.fc, x, adapt, "mlp.fc")
        if self.swiglu:
            gate, up = h.chunk(2, dim=-1)
            return project(self.proj, F.silu(gate) * up, adapt, "mlp.proj")
        return project(self.proj, F.relu(h).square(), adapt, "mlp.proj")


# what a block form (loopscale/blocks/) builds its layers from
PARTS = LayerParts(attention=CausalSelfAttention, mlp=MLP, norm=RMSNorm)


def uniform_std_(weight: torch.Tensor, std: float) -> None:
    """U(-a, a) with a = sqrt(3) std, the uniform law of standard deviation std (no outliers)."""
    a = math.sqrt(3.0) * std
    nn.init.uniform_(weight, -a, a)


class LoopedTransformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        check_trainable(cfg)
        self.cfg = cfg
        d, V = cfg.d_model, cfg.padded_vocab_size
        self.embed = nn.Embedding(V, d)
        self.embed_norm = RMSNorm(d, cfg.norm_eps)
        block = block_form(cfg.block)  # what one layer is: pre-norm, sandwich, per-pass adapters, ...
        self.prelude = nn.ModuleList(block.build(cfg, "prelude", PARTS) for _ in range(cfg.n_prelude))
        self.recurrent = nn.ModuleList(block.build(cfg, "recurrent", PARTS) for _ in range(cfg.n_rec))
        self.pass_indexed = block.uses_pass_index  # its recurrent layers read the pass index
        self.injection = injection_form(cfg.injection).build(cfg)  # start / read / update / finish (injections/form.py)
        self.pass_norm = RMSNorm(d, cfg.norm_eps)
        self.coda = nn.ModuleList(block.build(cfg, "coda", PARTS) for _ in range(cfg.n_coda))
        self.final_norm = RMSNorm(d, cfg.norm_eps)
        self.lm_head = None if cfg.tie_embeddings else nn.Linear(d, V, bias=False)
        self.head_backend: str | None = None  # compiled: the head's chunk math through torch.compile with it
        rope_dtype = torch.bfloat16 if cfg.precision == "published" else torch.float32
        cos, sin = rope_tables(cfg.seq_len, cfg.head_dim, cfg.rope_base, rope_dtype)
        self.register_buffer("rope_cos", cos, persistent=False)  # [T, hd/2], not a parameter
        self.register_buffer("rope_sin", sin, persistent=False)
        self._init_weights()

    def _init_weights(self) -> None:
        if self.cfg.init == "paper":
            self._init_paper()
        else:
            self._init_gpt2()
        self.injection.reset_parameters()  # the form's own init (linear and concat [I | 0]: u = e on every pass)
        for layer in (*self.prelude, *self.recurrent, *self.coda):  # a block form's own init (adapters: B = 0)
            if hasattr(layer, "reset_parameters"):
                layer.reset_parameters()

    def _init_gpt2(self) -> None:
        """N(0, init_std) for matrices; output projections (the residual writes) scaled by 1/sqrt(2 L_eff)
        as in GPT-2, since L_eff layer passes add to the stream; the injection is left to its form's init."""
        std = self.cfg.init_std
        for name, p in self.named_parameters():
            if p.dim() < 2 or name.startswith("injection."):
                continue
            scale = 1 / math.sqrt(2 * self.cfg.l_eff) if name.endswith("proj.weight") else 1.0
            nn.init.normal_(p, mean=0.0, std=std * scale)

    def _init_paper(self) -> None:
        """The published init: embedding N(0, 1), head N(0, 1e-3); each block matrix uniform with std
        1/sqrt(fan_in): 1/sqrt(d) for q, k, v, attention-out and MLP-in, 1/sqrt(4d) for MLP-out (ReLU^2)."""
        nn.init.normal_(self.embed.weight, mean=0.0, std=1.0)
        if self.lm_head is not None:
            nn.init.normal_(self.lm_head.weight, mean=0.0, std=1e-3)
        for block in (*self.prelude, *self.recurrent, *self.coda):
            attn, mlp = block.attn, block.mlp
            for linear in (attn.q, attn.k, attn.v, attn.proj, mlp.fc, mlp.proj):
                uniform_std_(linear.weight, 1 / math.sqrt(linear.in_features))

    # ------------------------------------------------------------------------------------------------
    def _layers(self, blocks: nn.ModuleList, x: torch.Tensor, T: int, i: int | None = None) -> torch.Tensor:
        """The layers in order; the pass index i goes to layers that read it (a block form's uses_pass_index)."""
        cos, sin = self.rope_cos[:T], self.rope_sin[:T]
        for block in blocks:
            x = block(x, cos, sin) if i is None else block(x, cos, sin, i)
        return x

    def _pass(self, u: torch.Tensor, T: int, i: int) -> torch.Tensor:
        """Pass i of the recurrent block, closed by the pass norm: s = RMSNorm(block(u))."""
        return self.pass_norm(self._layers(self.recurrent, u, T, i if self.pass_indexed else None))

    def _loop(self, e: torch.Tensor, T: int, r: int | None = None, n_grad: int | None = None) -> torch.Tensor:
        """r passes (default cfg.r) of the recurrent block fed by e through the injection; returns the coda input
        [B, T, d]. A pass before the last n_grad (default: the config's rule at this r, bptt_k or all) runs its
        injection read and its block under no_grad (truncated backprop). Pass i uses the per-pass parameters of
        pass min(i, cfg.r - 1) (hyper-connection scalars, loop-index embeddings, per-pass adapters): run past the
        r it was built for, the last pass's own parameters repeat."""
        r = self.cfg.r if r is None else int(r)
        if r < 1:
            raise ValueError(f"r={r} passes: at least one")
        if n_grad is None:  # the config's rule at this r: the last bptt_k passes, or all of them
            n_grad = r if self.cfg.bptt_k is None else self.cfg.bptt_k
        first_grad_pass = r - min(r, int(n_grad))
        grad_on = torch.is_grad_enabled()
        inj = self.injection
        # matmul outputs are bf16 under autocast; with fp32_stream the injection's output is the residual stream
        # and stays in e's dtype (fp32) as at r = 1, so precision does not change with r. published: as it comes.
        fp32_stream = self.cfg.precision == "fp32_stream"
        last = self.cfg.r - 1
        state = inj.start(e)
        for i in range(r):
            k = min(i, last)  # the pass whose own parameters this pass uses
            with torch.set_grad_enabled(grad_on and i >= first_grad_pass):
                u, state = inj.read(state, e, k)
                s = self._pass(u.to(e.dtype) if fp32_stream else u, T, k)
            state = inj.update(state, s, k)  # in the graph: the state carries e to the passes with gradient
        return inj.finish(state)

    @contextlib.contextmanager
    def initial_states_from(self, generator: torch.Generator):
        """Inside the block, a random initial state (Huginn, Parcae: injections/form.py, random_start) is drawn from
        `generator` (on the model's device), not the module's training or evaluation stream: a scorer with a
        stream of its own. Nothing changes for forms without one."""
        drawing = [m for m in self.modules() if hasattr(m, "draw_generator")]
        before = [m.draw_generator for m in drawing]
        for module in drawing:
            module.draw_generator = generator
        try:
            yield
        finally:
            for module, was in zip(drawing, before):
                module.draw_generator = was

    def evaluation_metrics(self) -> dict[str, float]:
        """{name: value} of what the injection and the layers report at an evaluation (`evaluation_metrics` of a
        form's module: Parcae's largest decay factor), logged under design/<name>."""
        found = {}
        for module in (self.injection, *self.prelude, *self.recurrent, *self.coda):
            found.update(getattr(module, "evaluation_metrics", dict)())
        return found

    def store_published_dtypes(self) -> None:
        """model.precision=published on CUDA: the embedding is stored (and stepped) in bf16, as the published
        code does. Called once the model is on its device; a no-op otherwise."""
        if self.cfg.precision == "published" and self.embed.weight.device.type == "cuda":
            self.embed.to(torch.bfloat16)

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None, r: int | None = None, n_grad: int | None = None
    ) -> torch.Tensor:
        """idx [B, T] -> fp32 logits over the true vocabulary [B, T, V], or the mean cross-entropy (nats)
        against targets [B, T]. The head has V_padded rows for the matmul's shape; the padded rows are cut
        before the soft-cap and the softmax, so they never take probability mass (as published).
        r: passes of the recurrent block in this call (default cfg.r: a model scored at r_eval, or trained with
        sampled r); n_grad: how many of the last passes carry gradient (default: the config's rule, bptt_k or all,
        at most r)."""
        B, T = idx.shape
        if T > self.cfg.seq_len:
            raise ValueError(f"sequence length {T} exceeds seq_len={self.cfg.seq_len}")
        e = self._layers(self.prelude, self.embed_norm(self.embed(idx)), T)  # [B, T, d]
        x = self._layers(self.coda, self._loop(e, T, r, n_grad), T)
        x = self.final_norm(x)  # [B, T, d]
        weight = self.lm_head.weight if self.lm_head is not None else self.embed.weight  # [V_pad, d]
        if targets is None:  # [B, T, V] fp32, soft-capped
            return head_logits(x, weight, self.cfg.vocab_size, self.cfg.logit_softcap)
        # the same numerics a chunk of tokens at a time: no [B, T, V] logits kept for backward (head_loss.py)
        return chunked_head_loss(
            x, weight, targets, self.cfg.vocab_size, self.cfg.logit_softcap, compile_backend=self.head_backend
        )
