"""Recipes: the loop designs a sweep compares, as data (`model.recipe=<name>`), one file per recipe.

A recipe names the forms and conventions of one design (its injection form of loopscale/injections/, its block
form of loopscale/blocks/, form options, truncated backprop, the layout) and cites where they were published.
ModelConfig applies a recipe's conventions when its fields are left to `auto` and checks that a model labelled
with a recipe's name is that design; the label then names the design in run names, runs tables, joint fits and
figures. recipe.py is the data type, registry.py finds the recipes (every other module here).
Below config, beside injections and blocks: imports only loopscale.errors and loopscale.injections.registry.
"""
