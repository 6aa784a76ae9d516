"""Token shards: corpus -> tokenizer -> one flat memmap of token ids per split, cached on disk.

`prepare(cfg)` does, once per (source, tokenizer, split):
  1. load the documents (corpus.py) and split them by document into train/val with `split_seed`;
  2. build the tokenizer: `bpe` is trained on the TRAIN documents only, so no validation text shapes the
     vocabulary (val loss stays an honest held-out number); `gpt2` / a tokenizer.json are loaded;
  3. tokenize with `datasets.map` (batched, `num_proc` workers), appending EOT after every document;
  4. write `train.bin` / `val.bin` (uint16 if every id fits, else uint32), `tokenizer.json`, `meta.json`.

Everything is written into a private staging folder `<data_dir>/.tmp-<key>-<host>-<pid>` which is renamed
to `<data_dir>/<key>` only when complete (staging.py). A rename is atomic, so a killed prepare never leaves a
folder that looks finished; a failed one removes its staging folder, and leftovers of dead processes are swept
on the next call. A second call with the same config finds `<data_dir>/<key>/meta.json` and returns at once.

Layout of a finished cache entry:
    <data_dir>/<source>-<tokenizer>-<hash>/
        train.bin  val.bin     flat token ids, dtype in meta.json, documents separated by EOT
        tokenizer.json         the exact tokenizer used (load with loopscale.data.tokenizer.load_tokenizer)
        meta.json              source, tokenizer hash, split, token counts
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import numpy as np
import pyarrow.compute as pc
from tqdm.auto import tqdm

from loopscale.data.corpus import DataError, load_documents, source_fingerprint
from loopscale.data.staging import CONTENT_KEY, content_sha256, ensure_content_hash, publish, staging_folder
from loopscale.data.tokenizer import eot_id, gpt2_files, load_tokenizer, tokenizer_sha256, train_bpe
from loopscale.errors import exception_chain

if TYPE_CHECKING:
    import datasets
    from tokenizers import Tokenizer

    from loopscale.config.schema import DataConfig

FORMAT_VERSION = 1  # bump when cleaning, splitting or the file layout changes: old caches stop matching
DTYPES = {"uint16": np.uint16, "uint32": np.uint32}
WRITE_BATCH_DOCS = 64  # documents per chunk copied into the memmap (bounded memory for big corpora)


@dataclass(frozen=True)
class PreparedData:
    """A finished cache entry. Paths are absolute; token arrays open lazily as read-only memmaps."""

    root: Path
    train_path: Path
    val_path: Path
    tokenizer_path: Path
    dtype: type  # np.uint16 or np.uint32
    vocab_size: int  # the tokenizer's real vocabulary (the model pads it, see config.pad_vocab)
    n_train_tokens: int
    n_val_tokens: int
    meta: dict

    def tokens(self, split: str) -> np.memmap:
        """Read-only memmap of one split's token ids, shape [n_<split>_tokens]."""
        path = {"train": self.train_path, "val": self.val_path}.get(split)
        if path is None:
            raise ValueError(f"split={split!r} must be 'train' or 'val'")
        return np.memmap(path, dtype=self.dtype, mode="r")

    @property
    def eot_id(self) -> Optional[int]:
        return self.meta["tokenizer"]["eot_id"]

    @property
    def content_sha256(self) -> str:
        """The hash of the tokenizer and both token files: what a run trained on (its data identity)."""
        return self.meta[CONTENT_KEY]


# ------------------------------------------------------------------------------------------- dtype and key


def dtype_for(vocab_size: int, requested: str = "auto") -> type:
    """Smallest dtype holding ids 0..vocab_size-1 ('auto'), or the requested one if the vocab fits it."""
    if requested == "auto":
        requested = "uint16" if vocab_size <= 2**16 else "uint32"
    if requested not in DTYPES:
        raise DataError(f"token_dtype={requested!r} must be 'auto', 'uint16' or 'uint32'")
    limit = np.iinfo(DTYPES[requested]).max + 1
    if vocab_size > limit:
        raise DataError(
            f"vocab_size={vocab_size} does not fit token_dtype={requested!r} "
            f"(at most {limit} ids); use token_dtype='uint32' or 'auto'"
        )
    return DTYPES[requested]


def tokenizer_spec(cfg: DataConfig) -> dict:
    """What identifies the tokenizer before it exists (bpe) or by content (a tokenizer.json file)."""
    if cfg.tokenizer == "bpe":
        return {"kind": "bpe", "vocab_size": cfg.vocab_size}
    if cfg.tokenizer == "gpt2":
        vocab, merges = gpt2_files()
        return {"kind": "gpt2", "sha256": _file_sha256(vocab, merges)}
    tok = load_tokenizer(cfg.tokenizer)  # raises DataError for a missing or malformed file
    return {"kind": "file", "sha256": tokenizer_sha256(tok)}


def _file_sha256(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()


def cache_key(cfg: DataConfig) -> str:
    """`<source>-<tokenizer>-<12 hex>`: readable prefix, hash of everything that changes the tokens."""
    ident = {
        "format": FORMAT_VERSION,
        "source": source_fingerprint(cfg),
        "tokenizer": tokenizer_spec(cfg),
        "split": {"val_fraction": cfg.val_fraction, "split_seed": cfg.split_seed},
        "token_dtype": cfg.token_dtype,
    }
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
    tok = f"bpe{cfg.vocab_size}" if cfg.tokenizer == "bpe" else ("gpt2" if cfg.tokenizer == "gpt2" else "file")
    return f"{cfg.source}-{tok}-{digest}"


# ---------------------------------------------------------------------------------------------- the steps


def split_documents(n_docs: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Document indices (train, val), each sorted; val holds round(val_fraction * n) >= 1 documents."""
    if n_docs < 2:
        raise DataError(f"the corpus has {n_docs} document(s); a train/val split needs at least 2")
    n_val = min(n_docs - 1, max(1, round(val_fraction * n_docs)))
    perm = np.random.default_rng(seed).permutation(n_docs)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


_PARENT_PID = os.getpid()


def _die_with_parent() -> None:
    """In a tokenizer worker: ask Linux to SIGKILL this process when its parent dies, so a killed or
    interrupted prepare never leaves a worker behind holding its share of the corpus (prctl PR_SET_PDEATHSIG)."""
    global _PARENT_PID
    if os.getpid() == _PARENT_PID:
        return
    _PARENT_PID = os.getpid()  # once per worker
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the pool's own terminate() is all there is
        pass


def _encode_batch(batch: dict, tokenizer: Tokenizer, eot: Optional[int], dtype: type) -> dict:
    # runs in datasets.map workers: one row per document -> its ids (+ EOT), stored compactly as `dtype`
    _die_with_parent()
    encodings = tokenizer.encode_batch(batch["text"], add_special_tokens=False)
    tail = [] if eot is None else [eot]
    ids = [np.asarray(e.ids + tail, dtype=dtype) for e in encodings]
    return {"ids": ids, "n_tokens": [len(x) for x in ids]}


def tokenize(docs: datasets.Dataset, tok: Tokenizer, dtype: type, num_proc: int, cache_file: Path) -> datasets.Dataset:
    """Dataset with columns ids (list of token ids) and n_tokens, written to `cache_file` (in staging)."""
    with _fork_quietly(num_proc), _ctrl_c_in_parent_only():
        try:
            return docs.map(
                _encode_batch,
                batched=True,
                batch_size=16,  # plays are ~130k characters; small batches spread work over workers
                num_proc=num_proc if num_proc > 1 and len(docs) >= 2 * num_proc else None,
                fn_kwargs={"tokenizer": tok, "eot": eot_id(tok), "dtype": dtype},
                remove_columns=docs.column_names,
                cache_file_name=str(cache_file),
                desc=f"tokenize {cache_file.stem}",
            )
        except BaseException:
            _stop_workers()  # Ctrl-C or an error: no worker may outlive this call
            raise


@contextlib.contextmanager
def _ctrl_c_in_parent_only() -> Iterator[None]:
    """A terminal's Ctrl-C reaches the whole process group. The forked workers inherit this handler, which
    ignores it outside the parent: the parent alone raises KeyboardInterrupt and stops them (_stop_workers),
    instead of every worker printing its own traceback."""
    parent = os.getpid()

    def on_sigint(signum, frame):
        if os.getpid() == parent:
            raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread: signals are not ours to handle
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _stop_workers(grace_s: float = 2.0) -> None:
    """Terminate the worker processes datasets started (it uses the `multiprocess` package), then kill
    any that are still there after `grace_s`."""
    # multiprocess comes with datasets and is needed only once datasets has started workers; the GPU node's
    # image has neither, and every loopscale command that does not tokenize imports this module
    import multiprocess

    workers = multiprocess.active_children()  # datasets' worker processes
    for w in workers:
        w.terminate()
    deadline = time.monotonic() + grace_s
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
        if w.is_alive():
            w.kill()
            w.join(1.0)


@contextlib.contextmanager
def _fork_quietly(num_proc: int) -> Iterator[None]:
    # datasets forks its workers after the tokenizer's Rust thread pool has run (training); `tokenizers`
    # then disables threads in the children and warns. Saying so up front silences the warning.
    if num_proc <= 1 or "TOKENIZERS_PARALLELISM" in os.environ:
        yield
        return
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        del os.environ["TOKENIZERS_PARALLELISM"]


def _write_chunk(out: np.memmap, start: int, chunk: np.ndarray) -> None:
    out[start : start + len(chunk)] = chunk


def reserve(path: Path, n_bytes: int) -> None:
    """Create `path` with `n_bytes` of disk space allocated. A memmap over a sparse file that the disk
    cannot back dies of SIGBUS at the first page it cannot write; reserving first turns a full disk into
    an OSError(ENOSPC) here, before any token is written."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(fd, 0, n_bytes)
        else:  # macOS: no fallocate; a sparse file (the old behaviour)
            os.ftruncate(fd, n_bytes)
    finally:
        os.close(fd)


def write_shard(path: Path, tokens: datasets.Dataset, dtype: type, progress: bool = False) -> int:
    """Concatenate the `ids` column into a flat memmap at `path`; returns the token count."""
    n_tokens = int(np.sum(tokens.with_format("numpy")["n_tokens"]))
    if n_tokens == 0:
        raise DataError(f"{path.name}: the documents tokenize to zero tokens")
    reserve(path, n_tokens * np.dtype(dtype).itemsize)
    out = np.memmap(path, dtype=dtype, mode="r+", shape=(n_tokens,))
    start = 0
    with tqdm(total=n_tokens, unit="tok", unit_scale=True, desc=f"write {path.name}", disable=not progress) as bar:
        for batch in tokens.with_format("arrow").iter(batch_size=WRITE_BATCH_DOCS):
            chunk = pc.list_flatten(batch["ids"]).to_numpy()  # [tokens in these docs]
            _write_chunk(out, start, chunk)
            start += len(chunk)
            bar.update(len(chunk))
    out.flush()
    del out
    if start != n_tokens:
        raise DataError(f"{path.name}: wrote {start} tokens, expected {n_tokens}")
    return n_tokens


# ---------------------------------------------------------------------------------------------- the cache


def load_prepared(root: Path | str) -> PreparedData:
    """Open a finished cache entry; checks the files against meta.json so a damaged entry fails loudly."""
    root = Path(root).resolve()
    meta_path = root / "meta.json"
    if not meta_path.is_file():
        raise DataError(f"{root} is not a prepared data folder (no meta.json)")
    meta = json.loads(meta_path.read_text())
    dtype = DTYPES[meta["dtype"]]
    prepared = PreparedData(
        root=root,
        train_path=root / "train.bin",
        val_path=root / "val.bin",
        tokenizer_path=root / "tokenizer.json",
        dtype=dtype,
        vocab_size=meta["tokenizer"]["vocab_size"],
        n_train_tokens=meta["n_train_tokens"],
        n_val_tokens=meta["n_val_tokens"],
        meta=meta,
    )
    itemsize = np.dtype(dtype).itemsize
    for path, n in ((prepared.train_path, prepared.n_train_tokens), (prepared.val_path, prepared.n_val_tokens)):
        if not path.is_file() or path.stat().st_size != n * itemsize:
            raise DataError(f"{path} does not match {meta_path} ({n} tokens); delete {root} and prepare again")
    ensure_content_hash(root, meta, _content_files(root))  # cache entries from before the hash get it now
    return prepared


def _content_files(root: Path) -> list[Path]:
    return [root / "tokenizer.json", root / "train.bin", root / "val.bin"]


@contextlib.contextmanager
def _datasets_progress(enabled: bool) -> Iterator[None]:
    import datasets  # ~3 s to import: only while a corpus is tokenized

    was_enabled = datasets.is_progress_bar_enabled()
    (datasets.enable_progress_bars if enabled else datasets.disable_progress_bars)()
    try:
        yield
    finally:
        (datasets.enable_progress_bars if was_enabled else datasets.disable_progress_bars)()


def prepare(cfg: DataConfig, progress: bool = True) -> PreparedData:
    """Token shards for `cfg`, from the cache if present, else built (see module docstring).

    Raises DataError (a ValueError) naming the field for a missing path, empty corpus, unknown source,
    vocab too large for token_dtype, or a hub dataset that is unavailable offline; nothing is left behind."""
    if cfg.source not in ("shakespeare", "text", "hf"):
        raise DataError(f"source={cfg.source!r} is unknown; choose 'shakespeare', 'text' or 'hf'")
    if cfg.tokenizer == "bpe":
        dtype_for(cfg.vocab_size, cfg.token_dtype)  # fail before any work when the vocab cannot fit
    data_dir = Path(cfg.data_dir).expanduser().resolve()
    key = cache_key(cfg)
    root = data_dir / key
    if (root / "meta.json").is_file():
        return load_prepared(root)

    created_data_dir = not data_dir.exists()
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        with staging_folder(data_dir, key) as staging:  # removed again if anything below raises
            with _datasets_progress(progress):
                meta = _build(cfg, staging, progress)
            meta[CONTENT_KEY] = content_sha256(_content_files(staging))
            publish(staging, root, {**meta, "key": key})
    except BaseException as err:
        if created_data_dir and not any(data_dir.iterdir()):
            data_dir.rmdir()  # we created it for nothing
        if _in_chain(err, lambda e: isinstance(e, KeyboardInterrupt)):
            # datasets' pool may raise a TimeoutError while it unwinds the Ctrl-C: report the Ctrl-C
            raise KeyboardInterrupt from None
        if _in_chain(err, _is_disk_full):  # one line, not the tokenizer workers' tracebacks
            raise DataError(
                f"no space left on the device of data_dir={str(data_dir)!r} while preparing {key}; "
                "free space there or point data.data_dir elsewhere (nothing was left behind)"
            ) from None
        raise
    return load_prepared(root)


def _is_disk_full(err: BaseException) -> bool:
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return "No space left on device" in str(err) or "Disk quota exceeded" in str(err)


def _in_chain(err: BaseException | None, test) -> bool:
    """`test` holds for `err` or an exception it was raised from or during (datasets' workers re-raise)."""
    return any(test(link) for link in exception_chain(err))


def _build(cfg: DataConfig, staging: Path, progress: bool) -> dict:
    """Steps 1-4 into `staging`; returns the meta.json content (without the key)."""
    work = staging / "work"  # datasets' Arrow files; deleted before publishing
    docs = load_documents(cfg, cache_dir=str(work / "hf"))
    train_idx, val_idx = split_documents(len(docs), cfg.val_fraction, cfg.split_seed)
    train_docs, val_docs = docs.select(train_idx), docs.select(val_idx)

    if cfg.tokenizer == "bpe":
        texts = (batch["text"] for batch in train_docs.iter(batch_size=256))  # streamed, not all in memory
        tok = train_bpe(texts, cfg.vocab_size, length=len(train_docs), progress=progress)
    else:
        tok = load_tokenizer(cfg.tokenizer)
    vocab_size = tok.get_vocab_size()
    dtype = dtype_for(vocab_size, cfg.token_dtype)
    tok.save(str(staging / "tokenizer.json"))

    counts = {}
    for split, split_docs in (("train", train_docs), ("val", val_docs)):
        tokens = tokenize(split_docs, tok, dtype, cfg.num_proc, work / f"{split}.arrow")
        counts[split] = write_shard(staging / f"{split}.bin", tokens, dtype, progress)
        del tokens  # drop the Arrow memory map before the folder goes
    shutil.rmtree(work)

    return {
        "format": FORMAT_VERSION,
        "source": source_fingerprint(cfg),
        "config": {k: v for k, v in asdict(cfg).items() if k not in ("data_dir", "num_proc", "val_tokens")},
        "tokenizer": {
            "spec": tokenizer_spec(cfg),
            "sha256": tokenizer_sha256(tok),
            "vocab_size": vocab_size,
            "eot_id": eot_id(tok),
        },
        "dtype": np.dtype(dtype).name,
        "split": {
            "val_fraction": cfg.val_fraction,
            "split_seed": cfg.split_seed,
            "n_train_documents": len(train_idx),
            "n_val_documents": len(val_idx),
            "val_documents": list(val_docs["name"])
            if "name" in val_docs.column_names
            else [int(i) for i in val_idx[:1000]],
        },
        "n_train_tokens": counts["train"],
        "n_val_tokens": counts["val"],
    }
