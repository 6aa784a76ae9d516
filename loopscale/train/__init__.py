"""Training one run: the entry point, the plan, the runner, forks, the LightningModule, batching, compiling,
checkpoints, MFU, run identity, locks, run records, and optim/ (MuonH, lr transfer, schedules, parameter
groups). Imports config, model and data."""
