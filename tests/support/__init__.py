"""What the tests share, imported as `support` (pyproject.toml puts tests/ on pytest's pythonpath).

Plugins (named in tests/conftest.py's `pytest_plugins`; their fixtures need no import):
- corpus.py: the session's data cache with the default corpus prepared (`data_dir`), its DataConfig and
  shards, a small packed set; helpers to pack and list a cache.
- slurm.py: the one-node SLURM test cluster (`slurm_cluster`, `slurm_two_nodes`); submit, wait, requeue.
- fit_fixtures.py: the committed runs table and fits of tests/fixtures/plots (`table`, `fit`, `baseline`).
Helpers:
- paths.py: the repository, tests/fixtures.
- train.py: training configs as loopscale-train composes them, the tiny CPU run, the tiny model.
- cli.py: `loopscale ARGS` in-process (run_cli).
- procs.py: child processes (run_python, run_loopscale, modules_loaded_by) and real signals.
- fs.py: a small tmpfs for full-disk tests, a filler file, temporary leftovers.
"""
