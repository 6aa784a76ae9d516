"""Does the law hold where it was not fitted? `loopscale validate` (issue 39; docs/design.md, "Out of sample:
loopscale validate").

One concept per module, read in this order:
- `inputs.py`: the rows a validation reads (the fit's table and group, the lr grid split off);
- `scores.py`: held-out errors, free parameters, AICc and BIC of a fitted form;
- `folds.py`: leave-one-budget-out and leave-one-r-out folds, each with the reason it cannot be done, if any;
- `forms.py`: the rival forms (the registered laws with a `rival` label, and the law fitted with MSE);
- `approach2.py`: the N*(C) exponent through the iso-FLOP parabolas (`fit/isoflop.py`), beside the law's
  beta / (alpha + beta);
- `lr_confound.py`: the lr grid's best lr per r and phi refitted at each r's best lr;
- `once.py`: each looped run against its block run once (the r = 1 stack of depth p + k / r + c), equal D;
- `conventions.py`: the same fit under other counting conventions (embedding, injection, FLOPs);
- `refit.py`: a form refitted to changed rows from the fit's optima;
- `run.py`: every form on every fold over worker processes, and the record (`validate`);
- `record.py`: the record and its verdict as data, with their JSON form (`loopscale validate --out`);
- `flags.py`: the flags and the one line; `text.py`: the Markdown (the report's section too).

This package's `__init__` imports nothing, so a reader of a validation record (the report, a figure) imports
`text` without the optimiser.
"""
