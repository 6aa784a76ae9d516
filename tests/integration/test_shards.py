"""Token shards: the default corpus prepared offline, the cache, determinism, bad input, killed prepares."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

import loopscale.data.shards as shards
from loopscale.cli import main as cli_main
from loopscale.config.schema import DataConfig
from loopscale.data.corpus import DataError, load_documents
from loopscale.data.shards import dtype_for, load_prepared, prepare, split_documents
from loopscale.data.tokenizer import EOT, load_tokenizer
from support.cli import run_cli
from support.corpus import cache_entries, small_cfg
from support.procs import run_python


def _split_at_eot(tokens: np.ndarray, eot: int) -> list[np.ndarray]:
    ends = np.flatnonzero(tokens == eot)
    starts = np.concatenate([[0], ends[:-1] + 1])
    return [tokens[s:e] for s, e in zip(starts, ends)]


# ------------------------------------------------------------------------------------ the default corpus


def test_default_corpus_prepared_offline_counts_vocab_and_roundtrip(default_cfg, default_prepared):
    p = default_prepared
    assert p.vocab_size == 2048 and p.dtype == np.uint16 and p.meta["dtype"] == "uint16"
    assert p.tokenizer_path.is_file() and p.root.name.startswith("shakespeare-bpe2048-")
    tok = load_tokenizer(str(p.tokenizer_path))
    assert tok.get_vocab_size() == 2048 and p.eot_id == tok.token_to_id(EOT) == 0

    # Independent recount: split the plays the documented way and tokenize them here.
    docs = load_documents(default_cfg)
    train_idx, val_idx = split_documents(len(docs), default_cfg.val_fraction, default_cfg.split_seed)
    assert p.meta["split"]["val_documents"] == [docs[int(i)]["name"] for i in val_idx]
    assert set(p.meta["split"]["val_documents"]).isdisjoint(docs[int(i)]["name"] for i in train_idx)
    for split, idx in (("train", train_idx), ("val", val_idx)):
        texts = [docs[int(i)]["text"] for i in idx]
        tokens = p.tokens(split)
        assert len(tokens) == getattr(p, f"n_{split}_tokens") == p.meta[f"n_{split}_tokens"]
        assert len(tokens) == sum(len(e.ids) + 1 for e in tok.encode_batch(texts))  # + EOT per document
        # the shard is the documents in order, each followed by EOT: decoding gives the plays back
        pieces = _split_at_eot(np.asarray(tokens), p.eot_id)
        assert len(pieces) == len(texts)
        assert tok.decode(pieces[0].tolist()) == texts[0]
        assert tok.decode(pieces[-1].tolist()) == texts[-1]
    assert 1.0e6 < p.n_train_tokens < 3.0e6 and p.n_val_tokens > 50_000  # ~5 MB of text at ~2.7 bytes/token


def test_second_prepare_is_a_cache_hit(default_cfg, default_prepared, monkeypatch):
    def no_rebuild(*args, **kwargs):
        raise AssertionError("prepare rebuilt a cached corpus")

    monkeypatch.setattr(shards, "_build", no_rebuild)
    again = prepare(default_cfg, progress=False)
    assert again == default_prepared


def test_fresh_directory_gives_identical_bytes(default_prepared, tmp_path):
    # one tokenizer process here, two (the default) for the fixture: parallel tokenization changes nothing
    fresh = prepare(DataConfig(data_dir=str(tmp_path), num_proc=1), progress=False)
    assert fresh.root.name == default_prepared.root.name
    for name in ("train.bin", "val.bin", "tokenizer.json", "meta.json"):
        assert (fresh.root / name).read_bytes() == (default_prepared.root / name).read_bytes(), name


# ----------------------------------------------------------------------------------- options and the key


def test_split_seed_changes_the_validation_documents():
    a_train, a_val = split_documents(40, 0.1, seed=0)
    b_train, b_val = split_documents(40, 0.1, seed=1)
    assert len(a_val) == 4 and sorted(np.concatenate([a_train, a_val]).tolist()) == list(range(40))
    assert not np.array_equal(a_val, b_val)
    assert np.array_equal(split_documents(40, 0.1, seed=0)[1], a_val)
    with pytest.raises(DataError, match="at least 2"):
        split_documents(1, 0.5, seed=0)


def test_dtype_rules():
    assert dtype_for(2048) is np.uint16 and dtype_for(65536) is np.uint16
    assert dtype_for(65537) is np.uint32 and dtype_for(2048, "uint32") is np.uint32
    with pytest.raises(DataError, match="vocab_size=65537 does not fit token_dtype='uint16'"):
        dtype_for(65537, "uint16")


def test_gpt2_and_uint32_shards_hold_the_same_ids(tmp_path):
    a = prepare(small_cfg(tmp_path, tokenizer="gpt2"), progress=False)
    b = prepare(small_cfg(tmp_path, tokenizer="gpt2", token_dtype="uint32"), progress=False)
    assert a.vocab_size == 50257 and a.dtype == np.uint16 and b.dtype == np.uint32 and a.root != b.root
    assert np.array_equal(a.tokens("val"), b.tokens("val"))
    assert a.eot_id == 50256 and a.tokens("val")[-1] == 50256
    assert sorted(cache_entries(tmp_path)) == sorted([a.root.name, b.root.name])


def test_damaged_cache_entry_fails_loudly(tmp_path):
    p = prepare(small_cfg(tmp_path), progress=False)
    with open(p.val_path, "r+b") as f:
        f.truncate(p.val_path.stat().st_size - 2)
    with pytest.raises(DataError, match="does not match"):
        load_prepared(p.root)


# ------------------------------------------------------------------------------------------- bad input


def _big_wordlevel_tokenizer(path, n):
    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(n)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path))


@pytest.mark.parametrize(
    "case", ["missing path", "empty corpus", "bpe vocab > uint16", "file vocab > uint16", "unknown source"]
)
def test_bad_input_one_clear_error_and_no_cache_left(tmp_path, case):
    data_dir = tmp_path / "cache"
    if case == "missing path":
        cfg, match = DataConfig(source="text", path=str(tmp_path / "nope"), data_dir=str(data_dir)), "does not exist"
    elif case == "empty corpus":
        (tmp_path / "docs").mkdir()
        for i in range(3):
            (tmp_path / "docs" / f"{i}.txt").write_text("\n  \n")
        cfg, match = (
            DataConfig(source="text", path=str(tmp_path / "docs"), data_dir=str(data_dir)),
            "no non-empty documents",
        )
    elif case == "bpe vocab > uint16":
        cfg, match = small_cfg(data_dir, vocab_size=70_000, token_dtype="uint16"), "vocab_size=70000 does not fit"
    elif case == "file vocab > uint16":
        _big_wordlevel_tokenizer(tmp_path / "big.json", 70_000)
        cfg, match = (
            small_cfg(data_dir, tokenizer=str(tmp_path / "big.json"), token_dtype="uint16"),
            "vocab_size=70000 does not fit",
        )
    else:
        cfg, match = small_cfg(data_dir), "source='wiki' is unknown"
        cfg.source = "wiki"  # past DataConfig's own check, as a hand-built config could be
    with pytest.raises(DataError, match=match) as err:
        prepare(cfg, progress=False)
    assert "\n" not in str(err.value)
    assert cache_entries(data_dir) == []


def test_hub_name_offline_is_one_clear_error_and_leaves_nothing(tmp_path):
    data_dir = tmp_path / "cache"
    proc = run_cli(
        [
            "data",
            "prepare",
            "--source",
            "hf",
            "--hf-name",
            "no-org/no-data",
            "--data-dir",
            str(data_dir),
            "--no-progress",
        ],
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0  # one line
    assert "hf_name='no-org/no-data'" in proc.stderr and "offline" in proc.stderr
    assert cache_entries(data_dir) == []


def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys):
    rc = cli_main(
        [
            "data",
            "prepare",
            "--source",
            "text",
            "--path",
            str(tmp_path / "x"),
            "--no-progress",
            "--data-dir",
            str(tmp_path / "cache"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "does not exist" in err
    assert cli_main(["data", "prepare", "--val-fraction", "1.5", "--data-dir", str(tmp_path)]) == 2
    assert "val_fraction=1.5" in capsys.readouterr().err


# -------------------------------------------------------------------------------------- killed prepares


def test_failure_mid_write_leaves_no_shard_and_a_rerun_is_complete(tmp_path, monkeypatch):
    cfg = small_cfg(tmp_path)
    calls = []
    real_write = shards._write_chunk

    def write_then_die(out, start, chunk):
        calls.append(len(chunk))
        if len(calls) > 1:
            raise RuntimeError("killed mid-write")
        real_write(out, start, chunk)

    monkeypatch.setattr(shards, "_write_chunk", write_then_die)
    with pytest.raises(RuntimeError, match="killed mid-write"):
        prepare(cfg, progress=False)
    assert cache_entries(tmp_path) == []

    monkeypatch.setattr(shards, "_write_chunk", real_write)
    p = prepare(cfg, progress=False)
    assert load_prepared(p.root).n_train_tokens == len(p.tokens("train")) > 0


@pytest.mark.system
def test_sigkill_mid_write_leaves_only_an_ignored_staging_folder(tmp_path):
    cfg = small_cfg(tmp_path)
    code = (
        "import os, signal, loopscale.data.shards as s; from loopscale.config.schema import DataConfig;"
        "s._write_chunk = lambda *a: os.kill(os.getpid(), signal.SIGKILL);"
        f"s.prepare(DataConfig(**{cfg.__dict__!r}), progress=False)"
    )
    proc = run_python(["-c", code], timeout_s=120)
    assert proc.returncode == -signal.SIGKILL
    leftovers = cache_entries(tmp_path)
    assert len(leftovers) == 1 and leftovers[0].startswith(".tmp-")  # never a name prepare() would open
    assert (tmp_path / leftovers[0] / "train.bin").exists() and not (tmp_path / leftovers[0] / "meta.json").exists()

    p = prepare(cfg, progress=False)  # the dead process's staging folder is swept, a full entry is built
    assert cache_entries(tmp_path) == [p.root.name]
    assert p.n_train_tokens == len(p.tokens("train")) > 0
    assert os.path.getsize(p.train_path) == p.n_train_tokens * 2
