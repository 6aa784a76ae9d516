"""The data side's rules pinned exactly (issue 58): the train/val document split's size at its edges
(loopscale/data/shards.py), what the token cache's key follows and what it ignores, the content hashes that make
a run's data identity (data/staging.py, data/published.py: written out here with hashlib), the hub's offline
flags and cache folder (data/published.py), and which staging folders a build sweeps away (data/staging.py).
Milliseconds; no corpus is tokenized."""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path

import numpy as np
import pytest

from loopscale.config.schema import DataConfig
from loopscale.data import published
from loopscale.data.published import footer_sha256, hub_cache_dir, hub_offline_flag, locate_published
from loopscale.data.shards import cache_key, split_documents
from loopscale.data.staging import content_sha256, staging_prefix, sweep_dead_staging


def test_the_validation_split_is_round_of_the_share_at_least_one_document_and_leaves_one_to_train():
    cases = {(10, 0.05): 1, (10, 0.26): 3, (10, 0.35): 4, (3, 0.9): 2, (2, 0.5): 1, (100, 0.005): 1, (100, 0.1): 10}
    for (n, share), n_val in cases.items():
        train, val = split_documents(n, share, seed=7)
        assert len(val) == n_val, (n, share)
        assert sorted([*train.tolist(), *val.tolist()]) == list(range(n))  # every document once
        assert list(train) == sorted(train) and list(val) == sorted(val)
    # the validation documents are the first n_val of the seed's permutation
    perm = np.random.default_rng(7).permutation(10)
    assert split_documents(10, 0.26, seed=7)[1].tolist() == sorted(perm[:3].tolist())


def test_the_token_cache_key_follows_what_changes_the_tokens_and_only_that(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("to be or not to be\n" * 50)
    base = DataConfig(source="text", path=str(corpus), vocab_size=600, data_dir=str(tmp_path / "a"))
    key = cache_key(base)
    prefix, digest = key.rsplit("-", 1)
    assert prefix == "text-bpe600" and len(digest) == 12 and int(digest, 16) >= 0
    changed = {
        "vocab_size": 700,
        "val_fraction": 0.2,
        "split_seed": 3,
        "token_dtype": "uint32",
    }
    for field, value in changed.items():
        other = DataConfig(**{**vars(base), field: value})
        assert cache_key(other) != key, field
    same = {"data_dir": str(tmp_path / "b"), "num_proc": 3, "val_tokens": 12345}
    for field, value in same.items():
        assert cache_key(DataConfig(**{**vars(base), field: value})) == key, field
    assert cache_key(DataConfig(**{**vars(base), "tokenizer": "gpt2"})).startswith("text-gpt2-")


def test_a_folders_content_hash_is_each_files_name_and_bytes_in_order(tmp_path):
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(b"\x00\x01abc")
    b.write_bytes(b"xyz" * 1000)
    expected = hashlib.sha256(b"a.bin\0" + a.read_bytes() + b"b.bin\0" + b.read_bytes()).hexdigest()
    assert content_sha256([a, b]) == expected
    assert content_sha256([b, a]) != expected  # the order is part of it
    c = tmp_path / "c.bin"
    c.write_bytes(a.read_bytes())
    assert content_sha256([c, b]) != expected  # and the names


def test_a_parquet_files_hash_is_its_name_size_and_footer(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "train-0.parquet"
    pq.write_table(pa.table({"input_ids": [[1, 2, 3], [4, 5, 6]]}), path)
    data = path.read_bytes()
    footer_len = int.from_bytes(data[-8:-4], "little")
    assert data[-4:] == b"PAR1" and footer_len > 0
    tail = data[-(footer_len + 8) :]  # the footer, its length and the magic
    expected = hashlib.sha256(f"{path.name}\0{len(data)}\0".encode() + tail).hexdigest()
    assert footer_sha256([path]) == expected
    plain = tmp_path / "notes.txt"
    plain.write_bytes(b"0123456789abcdef")  # no parquet footer: its last 8 bytes
    assert footer_sha256([plain]) == hashlib.sha256(b"notes.txt\x0016\x0089abcdef").hexdigest()


def test_the_offline_flags_are_either_variable_set_to_a_true_word(monkeypatch):
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    assert not hub_offline_flag()
    for value, offline in (("1", True), ("on", True), ("Yes", True), ("TRUE", True), ("0", False), ("", False)):
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
            monkeypatch.setenv(name, value)
            assert hub_offline_flag() is offline, (name, value)
            monkeypatch.delenv(name)


def test_the_hub_cache_is_found_as_huggingface_hub_finds_it(monkeypatch, tmp_path):
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    assert hub_cache_dir() == Path(os.path.expanduser("~/.cache/huggingface/hub"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub_cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub_cache_dir() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HUGGINGFACE_HUB_CACHE", str(tmp_path / "legacy"))
    assert hub_cache_dir() == tmp_path / "legacy"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    assert hub_cache_dir() == tmp_path / "cache"


def test_a_local_published_set_is_used_as_given_without_asking_the_hub(monkeypatch, tmp_path):
    monkeypatch.setattr(published, "hub_reachable", lambda *a: pytest.fail("the hub was asked"))
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = DataConfig(source="packed", format="packed", path="~/set")
    assert locate_published(cfg) == tmp_path / "set"


def test_only_dead_processes_staging_folders_of_this_key_are_swept(tmp_path):
    prefix = staging_prefix("k1")
    dead_pid = 2**22 + 12345  # above the kernel's default pid_max: never a live process
    dead, alive = tmp_path / f"{prefix}{dead_pid}", tmp_path / f"{prefix}{os.getpid()}"
    other_key, odd = tmp_path / f"{staging_prefix('k2')}{dead_pid}", tmp_path / f"{prefix}notapid"
    for d in (dead, alive, other_key, odd):
        d.mkdir()
    sweep_dead_staging(tmp_path, "k1")
    assert not dead.exists() and alive.exists() and other_key.exists() and odd.exists()
    assert prefix == f".tmp-k1-{socket.gethostname()}-"  # a shared cache: another host's pids are not ours to judge


def test_a_text_corpus_is_every_supported_file_below_its_folder_in_path_order(tmp_path):
    from loopscale.data.corpus import DataError, source_fingerprint

    root = tmp_path / "corpus"
    for name in ("b.txt", "a/z.jsonl", "a/y.json", "c.parquet", "notes.md", "d.TXT", "e.txt.bak"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x\n")
    files = source_fingerprint(DataConfig(source="text", path=str(root)))["files"]
    expected = ["a/y.json", "a/z.jsonl", "b.txt", "c.parquet"]  # suffixes exactly as listed, case and all
    assert [Path(f).relative_to(root.resolve()).as_posix() for f, _ in files] == expected
    assert files[2][1] == hashlib.sha256(b"x\n").hexdigest()
    with pytest.raises(DataError, match=r"has suffix '\.md'; supported: \.txt, \.jsonl, \.json, \.parquet"):
        source_fingerprint(DataConfig(source="text", path=str(root / "notes.md")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="holds no"):
        source_fingerprint(DataConfig(source="text", path=str(tmp_path / "empty")))


def test_a_corpus_file_that_is_not_utf8_is_named_with_the_bad_bytes_offset(tmp_path):
    from loopscale.data.corpus import DataError, load_documents

    (tmp_path / "a.txt").write_text("fine\n")
    (tmp_path / "b.txt").write_bytes("héllo wörld ".encode() + b"\xff rest")  # the bad byte at 14
    with pytest.raises(DataError, match=r"b\.txt is not UTF-8 text \(byte 14\)"):
        load_documents(DataConfig(source="text", path=str(tmp_path)))
    (tmp_path / "b.txt").write_bytes(b"a" * (8 << 20) + b"\xff")  # past the first 8 MB block: counted from the start
    with pytest.raises(DataError, match=rf"b\.txt is not UTF-8 text \(byte {8 << 20}\)"):
        load_documents(DataConfig(source="text", path=str(tmp_path)))
    (tmp_path / "b.txt").write_bytes("ends mid-character é".encode()[:-1])
    with pytest.raises(DataError, match="ends inside a character"):
        load_documents(DataConfig(source="text", path=str(tmp_path)))


def test_the_cache_key_follows_the_text_column_and_document_cap_of_a_text_corpus(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "a"}\n')
    base = DataConfig(source="text", path=str(corpus))
    key = cache_key(base)
    assert cache_key(DataConfig(**{**vars(base), "text_column": "body"})) != key
    assert cache_key(DataConfig(**{**vars(base), "max_documents": 10})) != key
