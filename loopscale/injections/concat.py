"""concat: u = W [e; s], s_0 = e; one bias-free Linear(2d -> d), W = [I | 0] at init so u = e on every pass. The
published injection (model=paper): MuonH sees one [d, 2d] matrix.

The whole 2d -> d matmul runs in every pass, the first included, and its input gradient is always taken (e needs
it), so a pass under no_grad costs 2x its multiply-adds and one with gradient 6x.
"""

from __future__ import annotations

from loopscale.injections.form import InjectionForm, Param, SingleStream, module_class, pass_flops


class ConcatForm(InjectionForm):
    name = "concat"

    def params(self, cfg) -> tuple[Param, ...]:
        return (Param("weight", (cfg.d_model, 2 * cfg.d_model)),)

    def matmul_flops_per_token(self, cfg, n_grad: int) -> int:
        return pass_flops(cfg, n_grad, 2 * cfg.d_model**2)

    def saved_bytes_per_token(self, cfg, n_grad: int) -> int:
        return 4 * cfg.d_model * n_grad  # bf16 [e; s] of every pass with gradient

    def build(self, cfg):
        return concat_module()(cfg.d_model)


FORM = ConcatForm()


@module_class("ConcatInjection")
def concat_module():
    import torch  # on first use: the spec above is read without torch (config, accounting, --help)

    class ConcatInjection(SingleStream, torch.nn.Linear):
        """u = W [e; s]. (An nn.Linear, whose constructor calls the reset_parameters below: no draw from the RNG.)"""

        def __init__(self, d_model: int):
            super().__init__(2 * d_model, d_model, bias=False)

        def reset_parameters(self) -> None:
            with torch.no_grad():
                self.weight.zero_()
                self.weight[:, : self.out_features].copy_(torch.eye(self.out_features))

        def read(self, s, e, i: int):
            return self(torch.cat((e, s), dim=-1)), s  # the full 2d -> d matmul on every pass

    return ConcatInjection


__getattr__ = concat_module.find  # ConcatInjection, defined on first use, for pickle
