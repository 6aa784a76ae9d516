"""Shared test setup. Tests run on CPU with small shapes; nothing here reaches a network."""

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures"
CHINCHILLA = FIXTURES / "chinchilla_svg_extracted.csv"  # Hoffmann et al. points, provenance in fixtures/README.md

# tests/ on sys.path so test modules can import helper modules that live beside them.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# No test may reach the HF hub or W&B servers.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session", autouse=True)
def submitit_dir(tmp_path_factory) -> Path:
    """submitit's folder for every launcher the tests start (LOOPSCALE_SUBMITIT_DIR, read by
    conf/hydra/launcher/*.yaml): a private tmp dir, not the user's ~/.loopscale/submitit."""
    folder = tmp_path_factory.mktemp("submitit")
    os.environ.setdefault("LOOPSCALE_SUBMITIT_DIR", str(folder))
    return folder


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    """One data cache for the whole session: the default corpus is tokenized once and reused."""
    return tmp_path_factory.mktemp("data_cache")
