"""The published packed set (KristianS7/prepacked-fineweb-edu-llama2-32K-T2048): where its folder is.

`locate_published(cfg)` looks at data.path (a local folder) first, else the Hugging Face cache, else -- only
when the hub is reachable -- downloads it once into that cache. Offline with no copy it fails at once with
one line naming what to download. Reading the folder is packed.py's (`open_published`).
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from loopscale.data.corpus import DataError

if TYPE_CHECKING:
    from loopscale.config.schema import DataConfig

HUB_HOST = ("huggingface.co", 443)
HUB_PROBE_S = 0.5  # longest wait to learn whether the hub answers at all


def hub_offline_flag() -> bool:
    """HF_HUB_OFFLINE / HF_DATASETS_OFFLINE set: never touch the network (read without importing datasets,
    which costs ~1 s)."""
    return any(
        (os.environ.get(v) or "").upper() in ("1", "ON", "YES", "TRUE")
        for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


def hub_reachable(timeout_s: float = HUB_PROBE_S) -> bool:
    """Whether a TCP connection to the hub opens within `timeout_s` (name lookup included, which can
    hang without DNS: it runs in a daemon thread we stop waiting for)."""
    result = []

    def probe() -> None:
        try:
            socket.create_connection(HUB_HOST, timeout=timeout_s).close()
            result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return bool(result and result[0])


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, resolved from the environment the way huggingface_hub does (whose
    import alone takes ~0.2-0.5 s, too slow for the offline fast path)."""
    home = os.path.expanduser(
        os.getenv("HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "huggingface"))
    )
    legacy = os.getenv("HUGGINGFACE_HUB_CACHE", os.path.join(home, "hub"))
    return Path(os.path.expandvars(os.path.expanduser(os.getenv("HF_HUB_CACHE", legacy))))


def locate_published(cfg: DataConfig, progress: bool = True) -> Path:
    """The folder holding the packed set: data.path, else the HF cache, else a download into the cache."""
    if cfg.path:
        return Path(cfg.path).expanduser()
    patterns = ["*.parquet", "*.json"]
    cache = hub_cache_dir()
    # the hub library only on the path that asks it for files: its dependencies differ across its versions
    # (2.x needs httpx2, which the GPU node's image lacks), and a run from data.path or the embedded set never
    # needs it
    from huggingface_hub import snapshot_download

    if (cache / f"datasets--{cfg.hf_name.replace('/', '--')}").is_dir():  # something is cached: ask the hub lib
        try:
            return Path(
                snapshot_download(cfg.hf_name, repo_type="dataset", local_files_only=True, allow_patterns=patterns)
            )
        except Exception:  # huggingface_hub: LocalEntryNotFoundError (no complete snapshot)
            pass
    if hub_offline_flag() or not hub_reachable():
        why = "HF_HUB_OFFLINE is set" if hub_offline_flag() else "the hub is unreachable"
        raise DataError(
            f"data: the packed set {cfg.hf_name} is not in the Hugging Face cache ({cache}) "
            f"and {why}; download it with `hf download {cfg.hf_name} --repo-type dataset` "
            f"or set data.path=<folder with train-*.parquet and val-*.parquet>"
        )
    if not progress:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

    return Path(snapshot_download(cfg.hf_name, repo_type="dataset", allow_patterns=patterns))


def footer_sha256(files: list[Path]) -> str:
    """sha256 over each parquet file's name, size and footer (schema, row groups with their sizes, offsets
    and statistics): a change to any row group changes it, and it costs one small read per file."""
    h = hashlib.sha256()
    for path in files:
        size = path.stat().st_size
        with open(path, "rb") as f:
            f.seek(max(0, size - 8))
            tail = f.read(8)
            footer_len = int.from_bytes(tail[:4], "little") if len(tail) == 8 and tail[4:] == b"PAR1" else 0
            f.seek(max(0, size - 8 - footer_len))
            h.update(f"{path.name}\0{size}\0".encode() + f.read())
    return h.hexdigest()
