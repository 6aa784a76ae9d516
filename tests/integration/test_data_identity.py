"""A run never resumes on data that changed under it: the content hash of what it reads (the token shards,
or the packed set) is part of its identity, and the token cache follows the corpus's content, not its
mtime. Real corpora on disk, real training runs killed part-way and relaunched."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from loopscale.config.schema import DataConfig
from loopscale.data.corpus import shakespeare_dir
from loopscale.data.shards import cache_key
from loopscale.train.entry import run_training
from loopscale.train.identity import DATA_FIELD, IDENTITY_FILE, IdentityMismatch
from loopscale.train.plan import CHECKPOINT, run_dir_of
from loopscale.train.run_json import read_record
from support.procs import run_loopscale
from support.train import TINY, train_config

SHORT = [*TINY, "budget.tokens=10240", "trainer.ckpt_every_steps=5", "run_name=r", "data.vocab_size=512"]


@pytest.fixture
def corpus(tmp_path):
    """A text corpus of three plays, one .txt file each."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    for play in sorted(shakespeare_dir().rglob("*.md"))[:3]:
        (folder / f"{play.stem}.txt").write_text(play.read_text())
    return folder


def _cfg(tmp_path, corpus, *extra):
    data = ["data.source=text", f"data.path={corpus}", f"data.data_dir={tmp_path / 'cache'}"]
    return train_config([*SHORT, f"runs_dir={tmp_path / 'runs'}", *data, *extra])


def _killed_at_step_5(cfg):
    """Train `cfg` until it fails at step 7 (checkpointed at step 5): a run killed part-way."""
    with pytest.raises(Exception, match="fail_at_step"):
        run_training(replace(cfg, trainer=replace(cfg.trainer, fail_at_step=7)))
    run_dir = run_dir_of(cfg)
    assert (run_dir / CHECKPOINT).exists()
    return run_dir


@pytest.mark.parametrize("fmt", ["windows", "packed"])
def test_a_run_refuses_to_resume_on_a_changed_corpus(tmp_path, corpus, fmt):
    cfg = _cfg(tmp_path, corpus, f"data.format={fmt}")
    run_dir = _killed_at_step_5(cfg)
    identity = json.loads((run_dir / IDENTITY_FILE).read_text())
    assert len(identity["identity"][DATA_FIELD]) == 64  # the data's content hash is part of the identity
    ckpt = (run_dir / CHECKPOINT).stat().st_mtime_ns

    with open(next(corpus.glob("*.txt")), "a") as f:  # one line more: another BPE, other token ids
        f.write("One line more, and every token id may mean something else.\n")
    with pytest.raises(IdentityMismatch, match=DATA_FIELD.replace(".", r"\.")):
        run_training(cfg)
    assert (run_dir / CHECKPOINT).stat().st_mtime_ns == ckpt  # nothing of the run touched
    assert json.loads((run_dir / IDENTITY_FILE).read_text()) == identity
    assert read_record(run_dir)["status"] == "failed"  # still the record of the killed attempt


def test_the_same_corpus_resumes_and_the_record_names_its_content(tmp_path, corpus):
    cfg = _cfg(tmp_path, corpus)
    run_dir = _killed_at_step_5(cfg)
    for f in corpus.glob("*.txt"):
        os.utime(f)  # touched, not changed: the content, not the mtime, identifies the data
    done = run_training(cfg)
    assert done["status"] == "done" and done["resumed_from_step"] == 5
    stored = json.loads((run_dir / IDENTITY_FILE).read_text())
    assert done["data"]["content_sha256"] == stored["identity"][DATA_FIELD] and done["identity"] == stored["hash"]


@pytest.mark.system
def test_the_relaunch_as_a_user_sees_it_is_one_line(tmp_path, corpus):
    cfg = _cfg(tmp_path, corpus)
    run_dir = _killed_at_step_5(cfg)
    with open(next(corpus.glob("*.txt")), "a") as f:
        f.write("appended\n")
    args = [*SHORT, f"runs_dir={tmp_path / 'runs'}", "data.source=text", f"data.path={corpus}"]
    proc = run_loopscale([*args, f"data.data_dir={tmp_path / 'cache'}"], cwd=tmp_path, module="loopscale.train.entry")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("loopscale-train: error:") and DATA_FIELD in last and "restart=true" in last
    assert read_record(run_dir)["status"] == "failed"  # the killed attempt's record, untouched


def test_the_token_cache_follows_content_not_mtime(tmp_path, corpus):
    cfg = DataConfig(source="text", path=str(corpus), data_dir=str(tmp_path / "cache"))
    before = cache_key(cfg)
    path = next(corpus.glob("*.txt"))
    st = path.stat()
    text = path.read_text()
    path.write_text(("X" if text[0] != "X" else "Y") + text[1:])  # same size, one character changed
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the old mtime put back
    assert cache_key(cfg) != before
    path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # the old text, a new mtime
    assert cache_key(cfg) == before
