"""The data the tests train and read on (a pytest plugin: tests/conftest.py registers it).

Fixtures:
- `data_dir` (session): the one data cache of the session, with the default corpus (Shakespeare, BPE 2048)
  already prepared in it. Training tests pass it as `data.data_dir`, so the corpus is tokenized once.
- `default_cfg` / `default_prepared` (session): that corpus's DataConfig and its opened token shards.
- `small_packed` (session): a small packed set (3 plays, BPE 512, T = 32), packed in-process.
And `word_corpus` / `packed_text`: a local text corpus of random word runs and the overrides that train on it
packed (data=text, best fit with padding), for tests that need padded rows.

The default corpus is prepared by `python -m loopscale data prepare` in a child process whose environment
cuts the hub off (HF_DATASETS_OFFLINE=1, HF_HUB_OFFLINE=1), because `datasets` reads those variables when it
is imported: setting them in this process would prove nothing. Tests then open the result in-process through
`prepare(cfg)`, which must find it in the cache.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from loopscale.config.schema import DataConfig
from support.cli import run_cli
from support.procs import run_loopscale, run_python

OFFLINE_ENV = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def run_offline(args: list[str], timeout_s: float = 120) -> subprocess.CompletedProcess:
    """Run `python <args>` (a `-c` snippet) in a child with the hub cut off; returns the finished process.
    The loopscale CLI itself runs through support.procs.run_loopscale with env=OFFLINE_ENV."""
    return run_python(args, env=OFFLINE_ENV, timeout_s=timeout_s)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    """The session's data cache, with the default corpus prepared in it (offline, through the CLI)."""
    folder = tmp_path_factory.mktemp("data_cache")
    proc = run_loopscale(["data", "prepare", "--data-dir", folder, "--no-progress"], timeout_s=300, env=OFFLINE_ENV)
    assert proc.returncode == 0, proc.stderr
    return folder


@pytest.fixture(scope="session")
def default_cfg(data_dir) -> DataConfig:
    """DataConfig of the default corpus, already prepared offline (opening it is a cache hit)."""
    return DataConfig(data_dir=str(data_dir))


@pytest.fixture(scope="session")
def default_prepared(default_cfg):
    from loopscale.data.shards import prepare

    return prepare(default_cfg, progress=False)


def small_cfg(data_dir: Path, **overrides) -> DataConfig:
    """A fast real corpus: the first 4 Shakespeare plays, BPE 512, one process."""
    values = dict(
        source="shakespeare", max_documents=4, vocab_size=512, val_fraction=0.25, num_proc=1, data_dir=str(data_dir)
    )
    values.update(overrides)
    return DataConfig(**values)


def cache_entries(data_dir: Path) -> list[str]:
    """Names under a data dir (finished entries and any staging leftovers); [] if it does not exist."""
    return sorted(p.name for p in data_dir.iterdir()) if data_dir.exists() else []


def pack_offline(data_dir: Path, seq_len: int, *extra: str) -> tuple[Path, str]:
    """`loopscale data pack` in this process, whose hub is cut off since tests/conftest.py set the offline
    variables before anything imported `datasets`; returns (the packed folder, the command's stdout)."""
    proc = run_cli(["data", "pack", "--data-dir", data_dir, "--seq-len", seq_len, "--no-progress", *extra])
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("packed "), proc.stdout
    return Path(first.split(" ", 1)[1]), proc.stdout


SMALL_PACK = ["--max-documents", "3", "--vocab-size", "512", "--val-fraction", "0.34", "--num-proc", "1"]


@pytest.fixture(scope="session")
def small_packed(tmp_path_factory):
    """A small packed set (3 Shakespeare plays, BPE 512, T = 32), built offline through the CLI."""
    from loopscale.data.packed_parquet import open_packed

    root, _ = pack_offline(tmp_path_factory.mktemp("small_packed"), 32, *SMALL_PACK)
    return open_packed(root)


def word_corpus(root: Path, words: str, seed: int, lengths: tuple[int, int], n_docs: int = 240) -> Path:
    """root/docs.jsonl: n_docs documents of `words` drawn at random, each of a length in [lengths[0], lengths[1])
    words (their packed rows then hold padding of many lengths); returns root."""
    vocabulary = words.split()
    rng = np.random.default_rng(seed)
    with open(root / "docs.jsonl", "w") as f:
        for _ in range(n_docs):
            f.write(json.dumps({"text": " ".join(rng.choice(vocabulary, size=int(rng.integers(*lengths))))}) + "\n")
    return root


def packed_text(corpus: Path, runs_dir: Path) -> list[str]:
    """The overrides that train on `word_corpus`'s documents packed (BPE 512, a fifth held out, 16 val rows), the
    data cached beside them, the runs in runs_dir."""
    return [
        "data=text",
        f"data.path={corpus / 'docs.jsonl'}",
        "data.format=packed",
        "data.vocab_size=512",
        "data.num_proc=1",
        "data.val_fraction=0.2",
        "data.val_rows=16",
        f"data.data_dir={corpus / 'cache'}",
        f"runs_dir={runs_dir}",
    ]
