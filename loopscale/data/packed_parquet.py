"""The packed-rows format: parquet files of rows of T + 1 token ids, built by `loopscale data pack` or
published on the hub (KristianS7/prepacked-fineweb-edu-llama2-32K-T2048).

Layout of a packed set (a folder; the published set has the same file names, possibly under data/):
    train-00000.parquet ...   column `tokens`: list<uint16> (uint32 when the vocabulary needs it) of
    val-00000.parquet ...     T + 1 ids per row; sets built here add `n_tokens` (int32): the real tokens
                              of the row, the rest being padding at the row end (masked by the reader)
    meta.json                 format, T, dtype, tokenizer (name, vocab size, BOS / pad ids), row and
                              token counts per split, padding share, source fingerprint
    tokenizer.json            sets built here: the exact tokenizer
A folder without meta.json (the published set) is described from the parquet footers: row counts from
the metadata, T from the first row.

`pack(cfg, seq_len)` builds a set from any corpus and tokenizer `prepare` (shards.py) handles: the token
shards are split at their end-of-document tokens, each document gets a BOS in front, and the documents are
best-fit packed (document_packing.py). Rows are written in a fixed shuffled order (seeded by data.split_seed) so a
prefix of the rows -- what a shorter run reads -- is a sample of the whole corpus, not its first documents.
Writes are staged in `<data_dir>/.tmp-<key>-<host>-<pid>` and published by one rename, like shards.py
(staging.py).

`open_published(cfg)` opens the published set wherever published.py finds it (data.path, the Hugging Face
cache, or a download into that cache).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from loopscale.data.corpus import DataError, source_fingerprint
from loopscale.data.document_packing import (
    PackStats,
    documents_of,  # noqa: F401 (re-exported: it was defined here)
    pack_rows,
    pack_rows_cropped,
)
from loopscale.data.published import (
    footer_sha256,
    locate_published,
)
from loopscale.data.shards import prepare
from loopscale.data.staging import (
    CONTENT_KEY,
    content_sha256,
    ensure_content_hash,
    full_disk_as_data_error,
    publish,
    staging_folder,
)
from loopscale.data.tokenizer import eot_id, load_tokenizer, tokenizer_sha256

if TYPE_CHECKING:
    from loopscale.config.schema import DataConfig
    from loopscale.data.shards import PreparedData

FORMAT = "loopscale-packed-rows"
FORMAT_VERSION = 1  # bump when packing or the layout changes: old packed caches stop matching
META_FILE = "meta.json"
ROWS_PER_FILE = 65536  # rows per parquet file (the published set: ~ this order)
ROWS_PER_GROUP = 1024  # rows per row group: the reader decodes one group at a time
MAX_OPEN_ROWS = 1024  # best-fit window (document_packing.py)
PUBLISHED_BUFFER_DOCS = 1000  # the published packing's document buffer (document_packing.pack_rows_cropped)
BOS_CANDIDATES = ("<s>", "<|bos|>", "<|begin_of_text|>", "[CLS]")  # else the end-of-document token


# ------------------------------------------------------------------------------------------ reading rows


class RowFiles:
    """The rows of one split, addressed by a global row index across its files in name order.

    Reads whole row groups (decoded once, the last one cached) so sequential reading costs one decode per
    ROWS_PER_GROUP rows, and decodes the next group in a background thread meanwhile (Arrow releases the
    GIL), so a training loop reading in order never waits on parquet decoding. Pickles without open files
    or threads (DDP spawn, DataLoader workers)."""

    def __init__(self, files: list[Path], row_len: Optional[int] = None):
        if not files:
            raise DataError("a packed split needs at least one parquet file")
        self.files = [Path(f) for f in files]
        groups = []  # (file index, group index, rows)
        for fi, f in enumerate(self.files):
            md = pq.ParquetFile(f).metadata  # the footer only
            groups += [(fi, g, md.row_group(g).num_rows) for g in range(md.num_row_groups)]
        groups = [g for g in groups if g[2] > 0]
        if not groups:
            raise DataError(f"{self.files[0].parent}: the split's parquet files hold no rows")
        self.groups = groups
        self.group_starts = np.concatenate([[0], np.cumsum([g[2] for g in groups])])  # [n_groups + 1]
        self.n_rows = int(self.group_starts[-1])
        self.has_n_tokens = "n_tokens" in pq.ParquetFile(self.files[0]).schema_arrow.names
        self._cache: Optional[tuple[int, np.ndarray, Optional[np.ndarray]]] = None
        self._prefetch = None  # (group index, Future) of the group decoding in the background
        self._pool = None
        self.row_len = row_len or int(self._decode(0)[0].shape[1])

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_cache": None, "_prefetch": None, "_pool": None}

    def _group(self, gi: int) -> tuple[np.ndarray, Optional[np.ndarray]]:
        """Row group `gi` as (tokens [rows, T + 1], n_tokens [rows] or None); starts decoding the next."""
        if self._cache is not None and self._cache[0] == gi:
            return self._cache[1], self._cache[2]
        if self._prefetch is not None and self._prefetch[0] == gi:
            tokens, n_tokens = self._prefetch[1].result()
        else:
            tokens, n_tokens = self._decode(gi)
        self._cache = (gi, tokens, n_tokens)
        if len(self.groups) > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="packed-rows")
            nxt = (gi + 1) % len(self.groups)  # in order; after the last group a second pass starts at 0
            self._prefetch = (nxt, self._pool.submit(self._decode, nxt))
        return tokens, n_tokens

    def _decode(self, gi: int) -> tuple[np.ndarray, Optional[np.ndarray]]:
        fi, g, n = self.groups[gi]
        columns = ["tokens", "n_tokens"] if self.has_n_tokens else ["tokens"]
        table = pq.ParquetFile(self.files[fi]).read_row_group(g, columns=columns)
        lists = table.column("tokens").combine_chunks()  # one chunk per row group: no copy
        flat = pc.list_flatten(lists).to_numpy(zero_copy_only=False)
        width = getattr(self, "row_len", None) or len(flat) // n
        if len(flat) != n * width:
            raise DataError(
                f"{self.files[fi]} row group {g}: {len(flat)} tokens in {n} rows is not "
                f"{width} per row; every row of a packed set has T + 1 tokens"
            )
        tokens = flat.reshape(n, width)
        n_tokens = table.column("n_tokens").to_numpy() if self.has_n_tokens else None
        return tokens, n_tokens

    def read(self, start: int, n: int) -> tuple[np.ndarray, Optional[np.ndarray]]:
        """Rows [start, start + n) as (tokens [n, T + 1], n_tokens [n] or None); no wrap-around."""
        if start < 0 or n < 0 or start + n > self.n_rows:
            raise IndexError(f"rows [{start}, {start + n}) are outside the split's {self.n_rows} rows")
        parts, counts = [], []
        row = start
        while row < start + n:
            gi = int(np.searchsorted(self.group_starts, row, side="right")) - 1
            tokens, n_tokens = self._group(gi)
            lo = row - int(self.group_starts[gi])
            hi = min(len(tokens), lo + start + n - row)
            parts.append(tokens[lo:hi])
            if n_tokens is not None:
                counts.append(n_tokens[lo:hi])
            row += hi - lo
        tokens = parts[0] if len(parts) == 1 else np.concatenate(parts)
        n_tokens = None if not counts else (counts[0] if len(counts) == 1 else np.concatenate(counts))
        return tokens, n_tokens


@dataclass(frozen=True)
class PackedSet:
    """A packed set on disk: its two splits and what meta.json (or the files) say about it."""

    root: Path
    meta: dict
    train: RowFiles
    val: RowFiles

    @property
    def seq_len(self) -> int:
        return self.train.row_len - 1

    @property
    def vocab_size(self) -> Optional[int]:
        return self.meta.get("tokenizer", {}).get("vocab_size")

    @property
    def content_sha256(self) -> str:
        """What identifies the rows a run reads (its data identity): the hash of a set built here (every
        file's bytes), or of the published set's parquet footers (open_packed)."""
        return self.meta[CONTENT_KEY]

    def split(self, name: str) -> RowFiles:
        if name not in ("train", "val"):
            raise ValueError(f"split={name!r} must be 'train' or 'val'")
        return self.train if name == "train" else self.val


def _split_files(root: Path, split: str) -> list[Path]:
    return sorted(root.rglob(f"{split}-*.parquet"), key=lambda p: (p.parent.as_posix(), p.name))


def open_packed(root: Path | str) -> PackedSet:
    """Open a packed set folder (ours or the published layout); fails naming what is missing."""
    root = Path(root).expanduser().resolve()
    if not root.is_dir():
        raise DataError(f"data.path={str(root)!r} is not a folder of train-*.parquet / val-*.parquet files")
    files = {split: _split_files(root, split) for split in ("train", "val")}
    missing = [f"{split}-*.parquet" for split, found in files.items() if not found]
    if missing:
        raise DataError(f"{root} is not a packed set: no {' or '.join(missing)} files")
    meta_path = root / META_FILE
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    row_len = meta.get("row_len")
    train, val = RowFiles(files["train"], row_len), RowFiles(files["val"], row_len)
    if train.row_len != val.row_len:
        raise DataError(f"{root}: train rows have {train.row_len} tokens, val rows {val.row_len}")
    for split, rows in (("train", train), ("val", val)):
        expected = meta.get("rows", {}).get(split)
        if expected is not None and expected != rows.n_rows:
            raise DataError(
                f"{root}: {split} holds {rows.n_rows} rows, {META_FILE} says {expected}; delete {root} and pack again"
            )
    content = [root / "tokenizer.json", *files["train"], *files["val"]]
    if meta.get("format") == FORMAT and content[0].is_file():  # built here: hash every byte, once
        ensure_content_hash(root, meta, content, META_FILE)
    else:  # the published set (hundreds of GB, not ours to write into): its footers, which hold every
        meta = {**meta, CONTENT_KEY: footer_sha256([*files["train"], *files["val"]])}  # row group's stats
    return PackedSet(root=root, meta=meta, train=train, val=val)


# ------------------------------------------------------------------------------------------ writing rows


def bos_id_of(tokenizer) -> int:
    """The id put in front of every document: the tokenizer's BOS, else its end-of-document token."""
    for name in BOS_CANDIDATES:
        idx = tokenizer.token_to_id(name)
        if idx is not None:
            return idx
    eot = eot_id(tokenizer)
    if eot is None:
        raise DataError(
            "the tokenizer has neither a BOS token (" + ", ".join(BOS_CANDIDATES) + ") nor an "
            "end-of-document token; packing needs one to mark where documents start"
        )
    return eot


def _row_table(rows: np.ndarray, n_tokens: np.ndarray):
    n, width = rows.shape
    offsets = pa.array(np.arange(0, (n + 1) * width, width, dtype=np.int32))
    tokens = pa.ListArray.from_arrays(offsets, pa.array(rows.reshape(-1)))
    return pa.table({"tokens": tokens, "n_tokens": pa.array(n_tokens.astype(np.int32))})


def write_rows(
    out_dir: Path, split: str, rows: np.ndarray, n_tokens: np.ndarray, order: np.ndarray, progress: bool = False
) -> list[str]:
    """Write rows[order] as `<split>-00000.parquet`, ... (ROWS_PER_FILE rows each); returns the names."""
    names = []
    with tqdm(total=len(order), unit="row", desc=f"write {split}", disable=not progress) as bar:
        for fi, lo in enumerate(range(0, len(order), ROWS_PER_FILE)):
            name = f"{split}-{fi:05d}.parquet"
            idx = order[lo : lo + ROWS_PER_FILE]
            with pq.ParquetWriter(out_dir / name, _row_table(rows[:1], n_tokens[:1]).schema) as writer:
                for g in range(0, len(idx), ROWS_PER_GROUP):
                    part = np.sort(idx[g : g + ROWS_PER_GROUP])  # sorted reads from the memmap, then reorder
                    back = np.argsort(np.argsort(idx[g : g + ROWS_PER_GROUP]))
                    writer.write_table(
                        _row_table(rows[part][back], n_tokens[part][back]), row_group_size=ROWS_PER_GROUP
                    )
                    bar.update(len(part))
            names.append(name)
    return names


def pack_split(
    tokens: np.ndarray,
    eot: int,
    bos: int,
    row_len: int,
    dtype: type,
    work: Path,
    split: str,
    seed: int,
    out_dir: Path,
    progress: bool = False,
    packing: str = "best_fit",
) -> dict:
    """Pack one flat shard into `out_dir/<split>-*.parquet` (data.packing: best_fit, or published: full rows,
    documents cropped); returns its counts for meta.json."""
    stats = PackStats()
    raw = work / f"{split}.rows"  # rows in packing order, padded: [n_rows, row_len] of dtype
    counts = []
    with (
        open(raw, "wb") as f,
        tqdm(total=len(tokens), unit="tok", unit_scale=True, desc=f"pack {split}", disable=not progress) as bar,
    ):
        row_buf = np.full(row_len, bos, dtype=dtype)
        done = 0
        documents = documents_of(tokens, eot)
        if packing == "published":
            packed_rows = pack_rows_cropped(documents, row_len, bos, PUBLISHED_BUFFER_DOCS, stats=stats)
        else:
            packed_rows = pack_rows(documents, row_len, bos, MAX_OPEN_ROWS, stats=stats)
        for row in packed_rows:
            row_buf[:] = bos  # padding: the BOS id, masked by the reader through n_tokens
            row_buf[: len(row)] = row
            f.write(row_buf.tobytes())
            counts.append(len(row))
            bar.update(stats.n_tokens - done)
            done = stats.n_tokens
    if stats.n_rows == 0:
        raise DataError(f"the {split} split packs into zero rows")
    rows = np.memmap(raw, dtype=dtype, mode="r", shape=(stats.n_rows, row_len))
    order = np.random.default_rng([seed, 0 if split == "train" else 1]).permutation(stats.n_rows)
    files = write_rows(out_dir, split, rows, np.asarray(counts, dtype=np.int32), order, progress)
    del rows
    return {
        "rows": stats.n_rows,
        "tokens": stats.n_tokens,
        "pad": stats.n_pad,
        "documents": stats.n_documents,
        "split_documents": stats.n_split_documents,
        "waste_share": stats.waste_share,
        "kept_share": stats.kept_share,
        "files": files,
    }


def pack_key(prepared: PreparedData, seq_len: int, seed: int, packing: str = "best_fit") -> str:
    ident = {
        "format": FORMAT_VERSION,
        "prepared": prepared.meta.get("key", prepared.root.name),
        "tokenizer": prepared.meta["tokenizer"]["sha256"],
        "seq_len": seq_len,
        "seed": seed,
        "max_open_rows": MAX_OPEN_ROWS,
    }
    if packing != "best_fit":  # best fit keeps the key it always had, so existing caches stay valid
        ident.update(packing=packing, buffer_docs=PUBLISHED_BUFFER_DOCS)
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:8]
    return f"{prepared.root.name}-packed-T{seq_len}-{digest}"


def pack(cfg: DataConfig, seq_len: int, progress: bool = True) -> PackedSet:
    """The packed set of `cfg`'s corpus and tokenizer at context T = seq_len, from the cache or built."""
    if seq_len < 1:
        raise DataError(f"seq_len={seq_len} must be >= 1")
    prepared = prepare(cfg, progress=progress)
    data_dir = prepared.root.parent
    key = pack_key(prepared, seq_len, cfg.split_seed, cfg.packing)
    root = data_dir / key
    if (root / META_FILE).is_file():
        return open_packed(root)
    if prepared.eot_id is None:
        raise DataError(
            f"tokenizer={cfg.tokenizer!r} has no end-of-document token, so the shards of "
            f"{prepared.root} cannot be cut into documents for packing"
        )
    tok = load_tokenizer(str(prepared.tokenizer_path))
    bos = bos_id_of(tok)
    # the staging folder is removed again if anything below raises; a full disk is one line, as in `data prepare`
    with full_disk_as_data_error(data_dir, f"packing {key}"), staging_folder(data_dir, key) as staging:
        splits = _pack_splits(prepared, bos, seq_len + 1, cfg, staging, progress)
        shutil.copy(prepared.tokenizer_path, staging / "tokenizer.json")
        meta = _pack_meta(cfg, prepared, key, seq_len, tok, bos, splits)
        names = ["tokenizer.json", *splits["train"]["files"], *splits["val"]["files"]]
        meta[CONTENT_KEY] = content_sha256([staging / name for name in names])
        publish(staging, root, meta, META_FILE)
    return open_packed(root)


def _pack_splits(
    prepared: PreparedData, bos: int, row_len: int, cfg: DataConfig, staging: Path, progress: bool
) -> dict:
    """Pack both splits into `staging` (their scratch rows in staging/work, deleted after); their counts."""
    work = staging / "work"
    work.mkdir()
    splits = {
        split: pack_split(
            np.asarray(prepared.tokens(split)),
            prepared.eot_id,
            bos,
            row_len,
            prepared.dtype,
            work,
            split,
            cfg.split_seed,
            staging,
            progress,
            cfg.packing,
        )
        for split in ("train", "val")
    }
    shutil.rmtree(work)
    return splits


def _pack_meta(cfg: DataConfig, prepared: PreparedData, key: str, seq_len: int, tok, bos: int, splits: dict) -> dict:
    """meta.json of a packed set built here: the format, T, the tokenizer and the counts of each split."""
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "key": key,
        "seq_len": seq_len,
        "row_len": seq_len + 1,
        "dtype": np.dtype(prepared.dtype).name,
        "tokenizer": {
            "name": cfg.tokenizer,
            "vocab_size": prepared.vocab_size,
            "bos_id": bos,
            "pad_id": bos,
            "eot_id": prepared.eot_id,
            "sha256": tokenizer_sha256(tok),
        },
        "rows": {s: v["rows"] for s, v in splits.items()},
        "tokens": {s: v["tokens"] for s, v in splits.items()},
        "waste_share": {s: v["waste_share"] for s, v in splits.items()},
        "splits": splits,
        "source": source_fingerprint(cfg),
        "prepared": prepared.root.name,
        "packing": (
            {"method": "bos-best-fit", "max_open_rows": MAX_OPEN_ROWS, "order_seed": cfg.split_seed}
            if cfg.packing == "best_fit"
            else {"method": "published", "buffer_docs": PUBLISHED_BUFFER_DOCS, "order_seed": cfg.split_seed}
        ),
    }


# --------------------------------------------------------------------------------------- the published set


def open_published(cfg: DataConfig, progress: bool = True) -> PackedSet:
    """The published packed set, found (or downloaded) by published.py."""
    return open_packed(locate_published(cfg, progress))


def iter_rows(split: RowFiles, batch_rows: int = ROWS_PER_GROUP) -> Iterable[tuple[np.ndarray, Optional[np.ndarray]]]:
    """Every row of a split in order, in blocks (tests, audits)."""
    for lo in range(0, split.n_rows, batch_rows):
        yield split.read(lo, min(batch_rows, split.n_rows - lo))
