"""additive: u = s + e, s_0 = 0 (so the first pass sees e, as with every form); no parameters. An ablation: e
enters every pass unweighted."""

from __future__ import annotations

from loopscale.injections.form import InjectionForm, SingleStream, module_class


class AdditiveForm(InjectionForm):
    name = "additive"

    def build(self, cfg):
        return additive_module()()


FORM = AdditiveForm()


@module_class("Additive")
def additive_module():
    import torch  # on first use: the spec above is read without torch (config, accounting, --help)

    class Additive(SingleStream, torch.nn.Module):
        """u = s + e, s_0 = 0: no parameters."""

        def start(self, e):
            return torch.zeros_like(e)

        def read(self, s, e, i: int):
            return s + e, s

        def reset_parameters(self) -> None:
            """No parameters."""

    return Additive


__getattr__ = additive_module.find  # Additive, defined on first use, for pickle
