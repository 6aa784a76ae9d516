"""The public API (issue 17): what a notebook needs, as `loopscale.<name>`, loaded lazily so that
`import loopscale` never imports torch; `predict_loss` is the fitted law's prediction for a table."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pandas as pd
import pytest

import loopscale
from support.procs import modules_loaded_by

PUBLIC = {
    "fit_table": "loopscale.fit.fit_table",
    "FitResult": "loopscale.fit.result",
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


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_each_public_name_is_the_library_object(name):
    assert getattr(loopscale, name) is getattr(importlib.import_module(PUBLIC[name]), name)
    assert name in loopscale.__all__ and name in dir(loopscale)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'fit_tabel'"):
        loopscale.fit_tabel  # noqa: B018
    from loopscale.fit import laws  # submodules still import through `from loopscale import ...`

    assert laws.__name__ == "loopscale.fit.laws"


def test_import_loopscale_imports_neither_torch_nor_the_public_modules():
    loaded = modules_loaded_by("import loopscale")
    assert "torch" not in loaded and "lightning" not in loaded
    assert not {"loopscale.fit.fit_table", "loopscale.train.entry", "scipy"} & loaded


def test_the_analysis_names_do_not_import_torch():
    loaded = modules_loaded_by(
        "import loopscale\nfor n in ('fit_table', 'FitResult', 'load_fit', 'predict_loss', "
        "'param_counts', 'flops_per_token', 'ModelConfig', 'TrainConfig', 'collect'): "
        "getattr(loopscale, n)"
    )
    assert "torch" not in loaded and "loopscale.fit.fit_table" in loaded


def test_reading_a_fit_loads_neither_the_optimiser_nor_torch():
    loaded = modules_loaded_by("import loopscale\nloopscale.load_fit, loopscale.FitResult")
    assert "loopscale.fit.result" in loaded
    assert not {"loopscale.fit.fit_table", "loopscale.fit.optimize", "scipy.optimize", "torch"} & loaded


def test_train_config_is_the_composed_typed_config():
    cfg = loopscale.train_config(["experiment=isodepth_cpu_demo", "model.r=4"])
    assert isinstance(cfg, loopscale.TrainConfig)
    assert (cfg.model.r, cfg.model.n_rec, cfg.sweep) == (4, 2, "isodepth_cpu_demo")


PARAMS = {"E": 1.7, "A": 400.0, "alpha": 0.34, "B": 410.0, "beta": 0.28, "phi": 0.6}
TABLE = pd.DataFrame({"r": [1, 2, 4], "N_once": [1e7, 2e7, 2e7], "N_rec": [8e7, 4e7, 2e7], "D": [1e9, 2e9, 4e9]})


def _fit(tmp_path):
    fit = loopscale.FitResult(
        law="looped", params=PARAMS, objective=0.0, grad_norm=0.0, n_starts=1, n_refined=1, n_best_basin=1, settings={}
    )
    path = tmp_path / "fit.json"
    fit.write_json(path)
    return fit, path


def test_predict_loss_is_the_looped_law_at_the_fit(tmp_path):
    fit, path = _fit(tmp_path)
    p = PARAMS
    # L = E + A (N_once + r^phi N_rec)^(-alpha) + B D^(-beta)
    expected = (
        p["E"]
        + p["A"] * (TABLE.N_once + TABLE.r ** p["phi"] * TABLE.N_rec) ** -p["alpha"]
        + p["B"] * TABLE.D ** -p["beta"]
    )
    for given in (fit, path, str(path), json.loads(path.read_text())):
        np.testing.assert_allclose(loopscale.predict_loss(given, TABLE), expected, rtol=1e-12)


def test_load_fit_round_trips_and_refuses_other_json(tmp_path):
    fit, path = _fit(tmp_path)
    assert loopscale.load_fit(path) == fit
    (tmp_path / "other.json").write_text('{"status": "done"}')
    with pytest.raises(ValueError, match="not a loopscale fit"):
        loopscale.load_fit(tmp_path / "other.json")
