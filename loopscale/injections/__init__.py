"""Injection forms: how the prelude output e enters every pass of the recurrent block (docs/design.md, "Injection").

One file per form (additive.py, concat.py, hyper.py, linear.py, passthrough.py), each holding everything about it:
a torch-free spec (its parameters with their accounting class and optimizer group, FLOPs per token, saved
activation bytes, the configs it refuses) and its nn.Module, defined on first use so that the spec loads without
torch. form.py is the spec's interface, registry.py finds the forms (every module here but those two).

A layer of its own below config: ModelConfig checks a name and a form's refusals at construction, and the
accounting, `loopscale params` and `--help` read the specs, none of them with torch. Imports only loopscale.errors.
"""
