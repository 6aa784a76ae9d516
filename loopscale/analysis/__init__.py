"""Reading results: conditioning of a fit, the Markdown report, the notebook's inputs and recipe probes.
Imports config, model, fit, train (records) and plots."""
