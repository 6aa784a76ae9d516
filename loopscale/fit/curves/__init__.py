"""Whole loss curves of one model across learning-rate schedules: the curves table read into schedules
(`table`), the lr-drop sums every schedule-aware law needs (`drops`), the curve laws (`law`, `registry`,
`multipower`, `lr_annealing`) and their multi-start fit with held-out schedules (`fit`). Imports numpy, scipy,
pandas and the fit's loss only; nothing here re-exports."""
