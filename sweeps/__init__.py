"""The sweep designs, at the top of the repository because they are what users edit most: `experiment/` (one
file per experiment: its grid and recipe, stating only its deltas from loopscale/conf/train.yaml) and `grid/`
(the (budget, width) x r grids they expand). Shipped in the wheel as the package `loopscale.sweeps`
(pyproject.toml [tool.setuptools.package-dir]) and searched by Hydra after loopscale/conf/
(loopscale/config/dirs.py), so `experiment=isodepth` works from a checkout, an editable install and a wheel.
"""
