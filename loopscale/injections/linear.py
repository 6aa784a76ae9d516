"""linear: u = W_e e + W_s s, s_0 = e, with W = [W_e | W_s] ([d, 2d]) stored as two d x d matrices; W_e = I,
W_s = 0 at init (u = e on every pass): the same map as `concat` at init. It trains under optim=adamw only: MuonH
keeps each matrix on the sphere of its initial Frobenius norm, and W_s's is 0, so W_s would stay 0 and the loop
would read no state (r passes = one pass; docs/results.md, "The demo's loop was inert"). Its W_s is declared
zero_init, so the config refuses optim=muonh with it (config/model.py, `muonh_frozen`); concat's [I | 0] is one
matrix of norm sqrt(d), whose update reaches its s half.

W_e e is computed once per forward (e does not change across passes), W_s s once per pass. Under truncated
backprop the first pass with gradient reads a detached s, so its W_s s backward skips the input gradient.
"""

from __future__ import annotations

from loopscale.injections.form import InjectionForm, Param, module_class, pass_flops


class LinearForm(InjectionForm):
    name = "linear"

    def params(self, cfg) -> tuple[Param, ...]:
        d = cfg.d_model
        return Param("from_e.weight", (d, d)), Param("from_s.weight", (d, d), zero_init=True)

    def matmul_flops_per_token(self, cfg, n_grad: int) -> int:
        d2 = cfg.d_model**2
        skipped = 2 * d2 if n_grad < cfg.r else 0  # the input gradient of W_s s in the first pass with gradient
        return 6 * d2 + pass_flops(cfg, n_grad, d2) - skipped  # W_e e once, always with gradient; W_s s per pass

    def weight_copy_bytes(self, cfg) -> int:
        """W_e's bf16 copy, and W_s's unless the one pass with gradient reads a detached s (bptt_k = 1 < r): its
        backward then needs no input gradient, so autograd keeps s but not the weight (measured)."""
        only_detached = cfg.bptt_k == 1 and cfg.r > 1
        return 2 * cfg.d_model**2 * (1 if only_detached else 2)

    def saved_bytes_per_token(self, cfg, n_grad: int) -> int:
        return 2 * cfg.d_model * (n_grad + 1)  # bf16 s of every pass with gradient, and e once

    def build(self, cfg):
        return linear_module()(cfg.d_model)


FORM = LinearForm()


@module_class("LinearInjection")
def linear_module():
    import torch  # on first use: the spec above is read without torch (config, accounting, --help)

    class LinearInjection(torch.nn.Module):
        """The state is (W_e e, s)."""

        def __init__(self, d_model: int):
            super().__init__()
            self.from_e = torch.nn.Linear(d_model, d_model, bias=False)  # W_e, init I
            self.from_s = torch.nn.Linear(d_model, d_model, bias=False)  # W_s, init 0

        def reset_parameters(self) -> None:
            torch.nn.init.eye_(self.from_e.weight)
            torch.nn.init.zeros_(self.from_s.weight)

        def start(self, e):
            return self.from_e(e), e  # W_e e, with gradient, once

        def read(self, state, e, i: int):
            e_proj, s = state  # each term in the stream's dtype before the sum, as the stream itself
            return e_proj.to(e.dtype) + self.from_s(s).to(e.dtype), state

        def update(self, state, s, i: int):
            return state[0], s

        def finish(self, state):
            return state[1]

    return LinearInjection


__getattr__ = linear_module.find  # LinearInjection, defined on first use, for pickle
