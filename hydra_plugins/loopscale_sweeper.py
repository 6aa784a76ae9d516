"""loopscale's Hydra sweeper (loopscale/conf/hydra/sweeper/lr_grid.yaml): the basic sweeper's cross product plus
a small learning-rate grid at the smallest budget for every r (loopscale/launch/lr_grid.py holds the rule).
Hydra instantiates sweepers only from its `hydra_plugins` namespace, hence this module."""

from __future__ import annotations

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

from loopscale.launch.lr_grid import LrGrid, lr_grid_jobs


class LrGridSweeper(BasicSweeper):
    """BasicSweeper whose job list ends with the lr grid's jobs (`lr_grid_jobs`)."""

    def __init__(self, max_batch_size=None, params=None, lr_grid=None) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)
        self.lr_grid = LrGrid(**dict(lr_grid or {}))

    def split_arguments(self, overrides, max_batch_size):  # an instance method: it reads self.lr_grid
        (jobs,) = BasicSweeper.split_arguments(overrides, None)
        jobs = jobs + lr_grid_jobs(jobs, self.lr_grid)
        return list(BasicSweeper.split_overrides_to_chunks(jobs, max_batch_size)) if jobs else [jobs]
