"""passthrough: u = s, s_0 = e; no parameters. The r = 1 model (what injection=auto is at r = 1), and the plain
loop at r > 1.

It cannot train under truncated backprop: e reaches the loop only through s_0, which the passes under no_grad
cut off, so the prelude would get no gradient (refused by accounting.check_trainable).
"""

from __future__ import annotations

from loopscale.injections.form import InjectionForm, SingleStream, module_class


class PassthroughForm(InjectionForm):
    name = "passthrough"
    truncatable = False

    def build(self, cfg):
        return passthrough_module()()


FORM = PassthroughForm()


@module_class("Passthrough")
def passthrough_module():
    import torch  # on first use: the spec above is read without torch (config, accounting, --help)

    class Passthrough(SingleStream, torch.nn.Module):
        """u = s: no parameters."""

        def read(self, s, e, i: int):
            return s, s

        def reset_parameters(self) -> None:
            """No parameters."""

    return Passthrough


__getattr__ = passthrough_module.find  # Passthrough, defined on first use, for pickle
