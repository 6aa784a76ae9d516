"""Launching sweeps: expanding a Hydra multirun, the wall-time estimate, the launcher layout rules and
local worker pools. Imports config, model, data and train."""
