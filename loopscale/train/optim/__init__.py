"""Optimizers of a run: MuonH, the published lr transfer, lr schedules and the parameter groups.
Imports config and model."""
