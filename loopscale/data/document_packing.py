"""BOS-prepended packing of documents into rows of T + 1 tokens (pure functions): best fit with padding, which
keeps every token (`pack_rows`, the default), and the published packing, which fills every row and crops
documents (`pack_rows_cropped`, at the end of this file).

Each document becomes the sequence [BOS] + its tokens. A sequence longer than a row is cut into full rows
of T + 1 tokens, in order, which are emitted at once; what is left (the tail, shorter than a row) is
placed by best fit: into the open row whose free space is the smallest that still holds it, or into a new
row when none does. A row is closed (emitted) when it is full, or, when more than `max_open_rows` rows are
open, the fullest open row is closed and the rest of it is padding. So:

- every token of every document appears exactly once, in document order (a document's full rows come
  before the row holding its tail, and pieces never move once placed);
- padding only sits at the end of a row: a row is `n_tokens` real tokens followed by `pad_id`s, and the
  reader masks the targets past `n_tokens` (loopscale/data/packed_batches.py);
- waste = padding / (rows x (T + 1)); with many short documents and enough open rows it is a few percent
  or less (measured by `loopscale data pack` and benchmarks/bench_data.py).

`max_open_rows` bounds memory for streamed corpora; larger values fit better.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Optional

import numpy as np


@dataclass
class PackStats:
    """Counters of one packing pass (tokens include the BOS of every document)."""

    n_documents: int = 0
    n_rows: int = 0
    n_tokens: int = 0  # real tokens placed, BOS included
    n_pad: int = 0  # padding tokens at row ends
    n_split_documents: int = 0  # documents longer than a row, cut into several pieces (cropped: published)
    n_input: int = 0  # tokens offered, BOS included (published packing: n_input - n_tokens were dropped)

    @property
    def kept_share(self) -> float:
        """Share of the offered tokens that landed in a row (1 for best fit, which drops nothing)."""
        return self.n_tokens / self.n_input if self.n_input else 1.0

    @property
    def waste_share(self) -> float:
        """Share of row positions that are padding: n_pad / (n_tokens + n_pad)."""
        total = self.n_tokens + self.n_pad
        return self.n_pad / total if total else 0.0


@dataclass
class Piece:
    """Where one document piece landed: row (emission index), column, document index, token range."""

    row: int
    col: int
    doc: int
    start: int  # offset in the document's [BOS] + tokens sequence
    stop: int


@dataclass
class _OpenRow:
    parts: list = field(default_factory=list)  # int64 arrays, concatenated when the row is emitted
    n: int = 0  # tokens so far
    pieces: list = field(default_factory=list)  # (col, doc, start, stop)


class _Packer:
    def __init__(self, row_len: int, max_open_rows: int, record_pieces: bool):
        self.row_len, self.max_open_rows, self.record_pieces = row_len, max_open_rows, record_pieces
        self.open: dict[int, _OpenRow] = {}
        self.free: list[tuple[int, int]] = []  # sorted (free space, open-row id): bisect finds the best fit
        self.next_id = 0
        self.stats = PackStats()
        self.pieces: list[Piece] = []

    def _emit(self, row: _OpenRow) -> np.ndarray:
        n = row.n
        out = row.parts[0] if len(row.parts) == 1 else np.concatenate(row.parts)
        if self.record_pieces:
            for col, doc, start, stop in row.pieces:
                self.pieces.append(Piece(self.stats.n_rows, col, doc, start, stop))
        self.stats.n_rows += 1
        self.stats.n_tokens += n
        self.stats.n_pad += self.row_len - n
        return out

    def _close(self, key: tuple[int, int]) -> np.ndarray:
        self.free.remove(key)
        return self._emit(self.open.pop(key[1]))

    def add(self, doc: int, seq: np.ndarray) -> Iterator[np.ndarray]:
        """Place one [BOS] + tokens sequence; yields the rows this closes."""
        self.stats.n_documents += 1
        self.stats.n_input += len(seq)
        n_full = len(seq) // self.row_len
        if n_full and len(seq) > self.row_len:
            self.stats.n_split_documents += 1
        for i in range(n_full):  # full rows first: they precede the tail in emission order
            lo = i * self.row_len
            yield self._emit(_OpenRow([seq[lo : lo + self.row_len]], self.row_len, [(0, doc, lo, lo + self.row_len)]))
        tail_start = n_full * self.row_len
        tail = seq[tail_start:]
        if len(tail) == 0:
            return
        at = bisect.bisect_left(self.free, (len(tail), -1))  # smallest free space >= len(tail)
        if at < len(self.free):
            space, rid = self.free.pop(at)
            row = self.open[rid]
        else:
            space, rid, row = self.row_len, self.next_id, _OpenRow()
            self.next_id += 1
            self.open[rid] = row
        row.pieces.append((row.n, doc, tail_start, len(seq)))
        row.parts.append(tail)
        row.n += len(tail)
        space -= len(tail)
        if space == 0:
            yield self._emit(self.open.pop(rid))
        else:
            bisect.insort(self.free, (space, rid))
        if len(self.open) > self.max_open_rows:
            yield self._close(self.free[0])  # the fullest open row: least likely to take another piece

    def finish(self) -> Iterator[np.ndarray]:
        for key in sorted(self.free, key=lambda k: k[1]):  # in opening order: deterministic
            yield self._emit(self.open.pop(key[1]))
        self.free.clear()


def pack_rows(
    documents: Iterable[np.ndarray],
    row_len: int,
    bos_id: int,
    max_open_rows: int = 1024,
    stats: Optional[PackStats] = None,
    pieces: Optional[list] = None,
) -> Iterator[np.ndarray]:
    """Yield packed rows (int64 arrays of <= row_len real tokens; pad them to row_len when writing).

    `documents`: token ids per document, without BOS. `stats` (if given) is filled in as rows are made;
    `pieces` (if given) receives a Piece per placed piece (for tests and audits)."""
    if row_len < 2:
        raise ValueError(f"row_len={row_len} must be >= 2 (T + 1 with T >= 1)")
    if max_open_rows < 1:
        raise ValueError(f"max_open_rows={max_open_rows} must be >= 1")
    packer = _Packer(row_len, max_open_rows, pieces is not None)
    if stats is not None:
        packer.stats = stats
    for doc, tokens in enumerate(documents):
        seq = np.concatenate([[bos_id], np.asarray(tokens, dtype=np.int64)])
        yield from packer.add(doc, seq)
        if pieces is not None:
            pieces.extend(packer.pieces)
            packer.pieces.clear()
    yield from packer.finish()
    if pieces is not None:
        pieces.extend(packer.pieces)


# ----------------------------------------------------------------------------------------------------
# the published packing: every row full, documents cropped


def pack_rows_cropped(
    documents: Iterable[np.ndarray],
    row_len: int,
    bos_id: int,
    buffer_docs: int = 1000,
    stats: Optional[PackStats] = None,
) -> Iterator[np.ndarray]:
    """Yield full rows of exactly row_len tokens, packed as the published set was (`--packing published`).

    A buffer holds up to `buffer_docs` whole [BOS] + tokens sequences, topped up in document order before each
    row. A row is filled by taking, again and again, the longest buffered sequence that still fits whole (the
    earliest buffered among equal lengths); when none fits, the shortest one (the earliest among equals) is
    cropped to the space left and the rest of it is dropped. No padding; a final row the buffer cannot fill is
    dropped. stats.n_tokens counts the tokens kept, stats.n_pad stays 0, stats.n_split_documents counts the
    cropped documents; the dropped tokens are n_input - n_tokens (PackStats.kept_share)."""
    if row_len < 2:
        raise ValueError(f"row_len={row_len} must be >= 2 (T + 1 with T >= 1)")
    if buffer_docs < 1:
        raise ValueError(f"buffer_docs={buffer_docs} must be >= 1")
    stats = stats if stats is not None else PackStats()
    docs = iter(documents)
    buffer: list[tuple[int, int]] = []  # sorted (length, -arrival): the last entry of a length is its earliest
    seqs: dict[int, np.ndarray] = {}
    arrival = 0
    while True:
        while len(buffer) < buffer_docs and (tokens := next(docs, None)) is not None:
            seq = np.concatenate([[bos_id], np.asarray(tokens, dtype=np.int64)])
            stats.n_documents += 1
            stats.n_input += len(seq)
            bisect.insort(buffer, (len(seq), -arrival))
            seqs[arrival] = seq
            arrival += 1
        if not buffer:
            return
        parts, space = [], row_len
        while space and buffer:
            at = bisect.bisect_right(buffer, (space, 1)) - 1  # the longest that fits whole, earliest first
            if at < 0:  # none fits: crop the shortest, the earliest of that length
                at = bisect.bisect_right(buffer, (buffer[0][0], 1)) - 1
                stats.n_split_documents += 1
            _, neg = buffer.pop(at)
            piece = seqs.pop(-neg)[:space]
            parts.append(piece)
            space -= len(piece)
        if space:  # the buffer ran dry before the row was full: drop it, as published
            return
        stats.n_rows += 1
        stats.n_tokens += row_len
        yield np.concatenate(parts)


def documents_of(tokens: np.ndarray, eot: int, chunk: int = 1 << 24) -> Iterator[np.ndarray]:
    """The documents of a flat shard (each followed by `eot`, shards.py), without their EOT; read in
    chunks so a memmap of any size streams."""
    carry = np.zeros(0, dtype=tokens.dtype)
    for lo in range(0, len(tokens), chunk):
        block = np.concatenate([carry, tokens[lo : lo + chunk]])
        ends = np.flatnonzero(block == eot)
        start = 0
        for end in ends:
            if end > start:  # an empty document (EOT right after EOT) has nothing to pack
                yield block[start:end]
            start = end + 1
        carry = block[start:]
    if len(carry):
        yield carry
