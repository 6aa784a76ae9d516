"""loopscale: scaling-law experiments for looped (depth-recurrent) transformers.

What a notebook needs, importable from here (each loaded on first use, so `import loopscale` stays cheap and
never imports torch; PEP 562):

    fit_table, FitResult, load_fit, predict_loss     fit a runs table, read a fit JSON, the law's predictions
    param_counts, flops_per_token                    exact N_once / N_rec / N and training FLOPs per token
    ModelConfig, TrainConfig                         the validated config dataclasses
    train_config                                     the TrainConfig of a list of Hydra overrides
    run_training, collect                            train one run; gather a sweep's run.json records
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("loopscale")  # one source: pyproject.toml
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

# public name -> the module that defines it
_PUBLIC = {
    "fit_table": "loopscale.fit.fit_table",
    "FitResult": "loopscale.fit.result",  # reading a fit never loads the optimiser
    "load_fit": "loopscale.fit.result",
    "predict_loss": "loopscale.fit.result",
    "param_counts": "loopscale.model.accounting",
    "flops_per_token": "loopscale.model.accounting",
    "ModelConfig": "loopscale.config.model",
    "TrainConfig": "loopscale.config.schema",
    "train_config": "loopscale.config.dirs",
    "run_training": "loopscale.train.entry",
    "collect": "loopscale.train.collect",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'loopscale' has no attribute {name!r}")
    value = getattr(import_module(_PUBLIC[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
