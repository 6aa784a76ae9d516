"""An offline W&B run read back from its files, as `wandb sync` would upload it.

wandb (0.31) writes no wandb-summary.json for an offline run and ships no Python reader of its transaction
log (`run-<id>.wandb`), and `wandb.Api` needs the server. The log's framing is LevelDB's log format: a 7-byte
file header (":W&B", a magic number, a version), then 32 KiB blocks of records, each with a 7-byte header
(CRC-32 of type and data, little-endian length, type: full, first, middle or last piece); a block's tail
shorter than a header is padding. Each assembled record is decoded with wandb's own protobuf
(wandb.proto.wandb_internal_pb2.Record), so every field means what wandb means by it.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

BLOCK_BYTES = 32 * 1024
HEADER_BYTES = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


@dataclass
class OfflineRun:
    """What an offline W&B run says about itself: its run record, its summary (the last value of each key),
    its exit code (None when it never finished)."""

    run_id: str = ""
    name: str = ""
    group: str = ""
    tags: list[str] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    exit_code: int | None = None


def offline_runs(run_dir: Path) -> list[Path]:
    """The offline W&B run folders under a loopscale run dir (WandbLogger's save_dir is the run dir)."""
    return sorted((Path(run_dir) / "wandb").glob("offline-run-*"))


def _records(path: Path) -> list[bytes]:
    raw = Path(path).read_bytes()
    assert raw[:4] == b":W&B", f"{path} is not a W&B transaction log"
    records, piece, pos = [], b"", HEADER_BYTES
    while pos + HEADER_BYTES <= len(raw):
        room = BLOCK_BYTES - pos % BLOCK_BYTES
        if room < HEADER_BYTES:  # the block's padding
            pos += room
            continue
        crc, length, kind = struct.unpack("<IHB", raw[pos : pos + HEADER_BYTES])
        if kind == 0 and length == 0:  # zero-filled rest of a block
            pos += room
            continue
        data = raw[pos + HEADER_BYTES : pos + HEADER_BYTES + length]
        assert zlib.crc32(data, zlib.crc32(bytes([kind]))) == crc, f"{path}: a record fails its CRC at byte {pos}"
        pos += HEADER_BYTES + length
        if kind == FULL:
            records.append(data)
        elif kind == FIRST:
            piece = data
        elif kind == MIDDLE:
            piece += data
        elif kind == LAST:
            records.append(piece + data)
    return records


def read_offline_run(run_folder: Path) -> OfflineRun:
    """The run record, summary and exit of one offline-run-* folder."""
    from wandb.proto import wandb_internal_pb2

    (log_file,) = Path(run_folder).glob("run-*.wandb")
    run = OfflineRun()
    for data in _records(log_file):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.run_id, run.name = record.run.run_id, record.run.display_name
            run.group, run.tags = record.run.run_group, list(record.run.tags)
        elif kind == "summary":
            for item in record.summary.update:
                key = item.key or ".".join(item.nested_key)
                run.summary[key] = json.loads(item.value_json)
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
    return run
