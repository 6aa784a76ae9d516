"""Fitting scaling laws: law forms, objective, starts, optimisation, uncertainty, joint fits, the fit record,
runs tables, derived quantities and synthetic tables. Imports config and model (accounting) only."""
