"""Block forms: what one transformer layer is (the pre-norm layer, Huginn's sandwich, per-pass low-rank adapters,
scaled residual writes), one file per form, on the pattern of loopscale/injections/ (docs/architecture.md, "How
to add a loop design").

Each file holds a torch-free spec (the layer's own parameters beyond its attention and MLP matrices, with their
accounting class and optimizer group; its own FLOPs and saved bytes; refusals) and its nn.Module, defined on
first use. form.py is the spec's interface, registry.py finds the forms. The module is built from the model's
parts (attention, MLP, RMSNorm), which loopscale/model/transformer.py hands to `build`, so this package imports
neither torch nor the model: the config checks a block's name and options, the accounting counts it.
Imports loopscale.injections.form (Param, the FLOPs rule, module_class) and loopscale.errors only.
"""
