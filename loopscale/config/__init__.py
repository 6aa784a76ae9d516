"""Configuration: the typed schema (schema.py, model.py), names and resolvers (naming.py), field checks
(checks.py) and where Hydra finds the configs (dirs.py). Imports nothing of loopscale but the injection forms'
registry (a name and its refusals are checked in ModelConfig) and the foundation (errors, atomic)."""
