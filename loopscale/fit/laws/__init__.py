"""Scaling-law forms: one module per law, and the registry that names them (docs/design.md, "Fitting").

- `form.py`: the inputs (`LawData`) and the `Law` base class: what a law has and needs (class attributes),
  its parameters, bounds and starts, its log-space prediction with analytic gradient; `lse.py`: the
  log-sum-exp form's weights and exact Hessian;
- `registry.py`: name -> law class (`register`, `law_class`, `make_law`, `law_data_from_table`,
  `predict_loss`);
- one module per law: `chinchilla.py` (N_eff = N), `looped.py` (N_once + r^phi N_rec), `looped_free.py`
  (N_once + k_r N_rec), `looped_joint.py` (N_once + r^phi_g N_rec, one phi per recipe).

Importing anything from this package loads every other module in this folder (below), so adding a law is
adding its module (and its test): a `form.Law` subclass decorated with `registry.register`
(docs/architecture.md, "How to add a law"). Names are imported from the module that defines them.
"""

from __future__ import annotations

import importlib
import pkgutil

_MACHINERY = {"form", "lse", "registry"}  # every other module here is a law

for _module in pkgutil.iter_modules(__path__):
    if _module.name not in _MACHINERY:
        importlib.import_module(f"{__name__}.{_module.name}")
