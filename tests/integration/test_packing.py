"""Packing: BOS-prepended best-fit rows keep every document's tokens once and in order; the parquet
format written by `loopscale data pack` holds exactly those rows, cached and published atomically."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest

from loopscale.config.schema import DataConfig
from loopscale.data.corpus import load_documents
from loopscale.data.document_packing import PackStats, pack_rows, pack_rows_cropped
from loopscale.data.packed_parquet import iter_rows, open_packed
from loopscale.data.shards import split_documents
from loopscale.data.tokenizer import load_tokenizer
from support.corpus import cache_entries, pack_offline

BOS = 7


def _docs(n: int, max_len: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(100, 200, size=int(rng.integers(1, max_len))) for _ in range(n)]


@pytest.mark.parametrize("max_open_rows", [1, 4, 1024])
def test_every_document_appears_once_in_order_with_bos_in_front(max_open_rows):
    row_len = 17
    docs = _docs(400, 3 * row_len)  # many short documents and some longer than a row
    stats, pieces = PackStats(), []
    rows = list(pack_rows(docs, row_len, BOS, max_open_rows, stats=stats, pieces=pieces))
    assert stats.n_rows == len(rows) and stats.n_documents == len(docs)
    assert all(1 <= len(r) <= row_len for r in rows)
    by_doc: dict[int, list] = {}
    for p in pieces:
        by_doc.setdefault(p.doc, []).append(p)
        assert np.array_equal(
            rows[p.row][p.col : p.col + p.stop - p.start], np.concatenate([[BOS], docs[p.doc]])[p.start : p.stop]
        )
    # the pieces of each row tile it from column 0, so padding can only follow them
    per_row = Counter()
    for p in pieces:
        per_row[p.row] += p.stop - p.start
    assert [per_row[i] for i in range(len(rows))] == [len(r) for r in rows]
    for d, doc in enumerate(docs):
        ps = sorted(by_doc[d], key=lambda p: p.start)
        assert ps[0].start == 0 and ps[-1].stop == len(doc) + 1  # BOS + every token, once
        assert all(a.stop == b.start for a, b in zip(ps, ps[1:]))
        assert all(a.row < b.row for a, b in zip(ps, ps[1:]))  # document order = row order
        assert rows[ps[0].row][ps[0].col] == BOS
        assert (len(ps) > 1) == (len(doc) + 1 > row_len)  # only documents longer than a row are split
    assert stats.n_tokens == sum(len(d) + 1 for d in docs)
    assert stats.n_pad == len(rows) * row_len - stats.n_tokens
    assert stats.waste_share == pytest.approx(stats.n_pad / (len(rows) * row_len))
    if max_open_rows >= 4:  # best fit with a window: little padding (one open row: next fit, more)
        assert stats.waste_share < 0.05, stats.waste_share


def test_best_fit_fills_the_tightest_row():
    # rows of 10: [BOS 1 1 1 1] leaves 5, [BOS 2 x 6] leaves 3; [BOS 3 3] fits both and must take the
    # tighter (second) row, which is then full and emitted first (first fit would pick the first row)
    docs = [np.full(4, 1), np.full(6, 2), np.full(2, 3)]
    rows = [r.tolist() for r in pack_rows(docs, 10, BOS, max_open_rows=8)]
    assert rows == [[BOS, 2, 2, 2, 2, 2, 2, BOS, 3, 3], [BOS, 1, 1, 1, 1]]


def test_bad_row_length_is_an_error():
    with pytest.raises(ValueError, match="row_len=1"):
        list(pack_rows([np.ones(3)], 1, BOS))


def _text_corpus(path, n_docs=300, seed=1):
    words = "thou art more lovely and temperate rough winds do shake the darling buds of may".split()
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for _ in range(n_docs):
            f.write(json.dumps({"text": " ".join(rng.choice(words, size=int(rng.integers(3, 120))))}) + "\n")


def test_data_pack_cli_writes_exactly_the_best_fit_rows_of_the_corpus(tmp_path):
    corpus = tmp_path / "docs.jsonl"
    _text_corpus(corpus)
    data_dir, T = tmp_path / "cache", 64
    args = ["--source", "text", "--path", str(corpus), "--tokenizer", "gpt2", "--num-proc", "1"]
    root, out = pack_offline(data_dir, T, *args)
    packed = open_packed(root)
    meta = packed.meta
    assert sorted(p.name for p in root.iterdir()) == [
        "meta.json",
        "tokenizer.json",
        "train-00000.parquet",
        "val-00000.parquet",
    ]
    assert not [n for n in cache_entries(data_dir) if n.startswith(".tmp-")]  # staging renamed away
    schema = pq.read_schema(root / "train-00000.parquet")
    assert str(schema.field("tokens").type) == "list<element: uint16>"  # GPT-2's 50257 ids fit uint16
    assert meta["row_len"] == T + 1 and packed.seq_len == T and meta["dtype"] == "uint16"
    tok = load_tokenizer("gpt2")
    assert meta["tokenizer"]["bos_id"] == tok.token_to_id("<|endoftext|>") == 50256

    # Independently: tokenize the train documents and best-fit pack them; the file holds those rows.
    cfg = DataConfig(source="text", path=str(corpus), tokenizer="gpt2")
    docs = load_documents(cfg)
    train_idx, _ = split_documents(len(docs), cfg.val_fraction, cfg.split_seed)
    ids = [np.asarray(e.ids) for e in tok.encode_batch([docs[int(i)]["text"] for i in train_idx])]
    stats = PackStats()
    expected = Counter(tuple(r.tolist()) for r in pack_rows(ids, T + 1, 50256, stats=stats))
    written = Counter()
    for tokens, n_tokens in iter_rows(packed.train, 100):
        assert tokens.shape[1] == T + 1
        for row, n in zip(tokens, n_tokens):
            written[tuple(row[:n].tolist())] += 1
            assert (row[n:] == 50256).all()  # padding (masked by the reader)
    assert written == expected
    assert packed.train.n_rows == meta["rows"]["train"] == stats.n_rows
    assert meta["splits"]["train"]["waste_share"] == pytest.approx(stats.waste_share)
    assert stats.waste_share < 0.05  # bounded: best fit of short documents
    assert f"padding {stats.waste_share:.3%}" in out  # reported by the command
    # rows are stored in a fixed shuffled order, the same every time
    first = packed.train.read(0, 5)[0]
    again, _ = pack_offline(data_dir, T, *args)  # cache hit: the same folder, not rebuilt
    assert again == root and np.array_equal(open_packed(again).train.read(0, 5)[0], first)


def test_data_pack_published_fills_every_row_and_records_the_method(tmp_path):
    """`data pack --packing published`: every row full (no padding), the same rows as pack_rows_cropped of the
    train documents, a set of its own beside the best-fit one, and meta.json saying how it was packed."""
    corpus = tmp_path / "docs.jsonl"
    _text_corpus(corpus)
    data_dir, T = tmp_path / "cache", 64
    args = ["--source", "text", "--path", str(corpus), "--tokenizer", "gpt2", "--num-proc", "1"]
    root, out = pack_offline(data_dir, T, *args, "--packing", "published")
    best_fit_root, _ = pack_offline(data_dir, T, *args)
    assert root != best_fit_root
    packed = open_packed(root)
    assert packed.meta["packing"]["method"] == "published"
    assert open_packed(best_fit_root).meta["packing"]["method"] == "bos-best-fit"
    cfg = DataConfig(source="text", path=str(corpus), tokenizer="gpt2")
    docs = load_documents(cfg)
    train_idx, _ = split_documents(len(docs), cfg.val_fraction, cfg.split_seed)
    tok = load_tokenizer("gpt2")
    ids = [np.asarray(e.ids) for e in tok.encode_batch([docs[int(i)]["text"] for i in train_idx])]
    stats = PackStats()
    expected = Counter(tuple(r.tolist()) for r in pack_rows_cropped(ids, T + 1, 50256, 1000, stats))
    written = Counter()
    for tokens, n_tokens in iter_rows(packed.train, 100):
        assert (n_tokens == T + 1).all()  # every row full
        written.update(tuple(row.tolist()) for row in tokens)
    assert written == expected and stats.n_pad == 0
    assert packed.meta["splits"]["train"]["kept_share"] == pytest.approx(stats.kept_share) and stats.kept_share < 1
    assert f"kept {stats.kept_share:.1%} of the tokens" in out


def test_pack_cli_errors_are_one_usage_line(tmp_path):
    from support.cli import run_cli

    proc = run_cli(
        [
            "data",
            "pack",
            "--source",
            "text",
            "--path",
            str(tmp_path / "nope"),
            "--seq-len",
            "8",
            "--data-dir",
            str(tmp_path / "c"),
        ],
    )
    assert proc.returncode != 0 and "does not exist" in proc.stderr
    assert not (tmp_path / "c").exists() or not [n for n in cache_entries(tmp_path / "c") if n.startswith(".tmp")]


def test_rows_of_a_large_vocabulary_are_stored_as_uint32(tmp_path):
    from loopscale.data.packed_parquet import RowFiles, write_rows

    rows = np.array([[70000, 1, 2], [3, 4, 65536]], dtype=np.uint32)  # ids past uint16
    write_rows(tmp_path, "train", rows, np.array([3, 2], dtype=np.int32), np.array([1, 0]))
    assert str(pq.read_schema(tmp_path / "train-00000.parquet").field("tokens").type) == "list<element: uint32>"
    tokens, n_tokens = RowFiles([tmp_path / "train-00000.parquet"]).read(0, 2)
    assert tokens.tolist() == [[3, 4, 65536], [70000, 1, 2]] and n_tokens.tolist() == [2, 3]  # in `order`
