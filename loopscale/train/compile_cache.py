"""The compiled-graph cache: where a training process's compiled graphs are kept, so that the next process that
trains the same model loads them in seconds instead of compiling them for a minute or more.

Inductor already keeps what it compiled on disk: its FX graph cache (the generated code of each graph) and the
AOTAutograd cache (the forward / backward split), both on by default, in TORCHINDUCTOR_CACHE_DIR (else a folder
under /tmp that a reboot or another node does not have). `activate` points that variable at a folder of
loopscale's cache (loopscale/cache_home.py), one per key:

    $LOOPSCALE_CACHE/compile/<key hash>/    key.json (the key, for a reader), then Inductor's fxgraph/,
                                            aotautograd/ and the compiled kernels

The key (`compile_key`) is everything that decides which graphs a run compiles apart from the batch shape: every
field of the model's config, the compile mode and backend, and torch's version, Python's version and the
machine architecture. A changed model or an upgraded torch therefore starts in an empty folder: a stale graph
is not merely never matched (Inductor's own keys hash the graph, its inputs' shapes, its config and torch's
version) but never found. What does not change the graphs stays out of the key, so every seed, budget, forked
branch and relaunch of one model shares one folder: pool workers, SLURM jobs on a shared home and later
launches alike. Inductor writes its entries whole (a temporary file, then a rename), so processes may share a
folder while they compile. Batch shapes (the partial last validation batch) are separate graphs in the same folder.

TORCHINDUCTOR_CACHE_DIR is read by Inductor at every cache lookup (torch 2.11 to 2.13), so setting it in the
training process before the first compiled call is enough; the cache switches are set on their config modules
where this torch has them (fx_graph_cache, enable_autograd_cache).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import platform
from pathlib import Path
from typing import Any

from loopscale.atomic import write_json_atomic
from loopscale.cache_home import cache_dir
from loopscale.config.model import with_moved_fields

GRAPHS_DIR = "compile"
KEY_FILE = "key.json"
INDUCTOR_ENV = "TORCHINDUCTOR_CACHE_DIR"
INDUCTOR_ENTRIES = ("fxgraph", "aotautograd")  # Inductor's folders of cached graphs


def compile_key(model_cfg, mode, backend: str = "inductor", torch_version: str | None = None) -> dict[str, Any]:
    """What decides a run's compiled graphs (module docstring): the model's config (a ModelConfig), the compile
    mode and backend, torch's version (this torch's unless given), Python's version and the machine."""
    if torch_version is None:  # the installed torch's own version string, read without importing torch
        torch_version = importlib.metadata.version("torch")
    return {
        "model": with_moved_fields(dataclasses.asdict(model_cfg)),  # the key it had before options held hyper_*
        "compile": mode,
        "backend": backend,
        "torch": str(torch_version),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def key_hash(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]


def graph_dir(key: dict[str, Any], root: Path | None = None) -> Path:
    """The key's folder: <root or the loopscale cache>/compile/<key hash>."""
    return (root if root is not None else cache_dir()) / GRAPHS_DIR / key_hash(key)


def is_warm(key: dict[str, Any], root: Path | None = None) -> bool:
    """Whether a process compiled graphs for this key already (Inductor has entries in its folder)."""
    folder = graph_dir(key, root)
    return any(any((folder / entries).glob("*")) for entries in INDUCTOR_ENTRIES if (folder / entries).is_dir())


def activate(key: dict[str, Any], root: Path | None = None) -> Path | None:
    """Point this process's Inductor caches at the key's folder (created, with key.json); returns it, or None
    when the loopscale cache cannot be written (no home, a read-only one): Inductor then uses its own temporary
    folder, and the run compiles as it would without loopscale's cache."""
    try:
        folder = graph_dir(key, root)
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / KEY_FILE).exists():
            write_json_atomic(folder / KEY_FILE, key)
    except (OSError, RuntimeError, KeyError):  # RuntimeError / KeyError: Path.home() without a home directory
        return None
    os.environ[INDUCTOR_ENV] = str(folder)
    _enable_inductor_caches()
    return folder


def _enable_inductor_caches() -> None:
    """The FX graph and AOTAutograd caches on (their default in torch 2.11+; set so a user's config cannot have
    them off unnoticed), each only where this torch has the switch."""
    # torch: only when a run compiles (`sweep` / `plan` read the cache's keys torch-free)
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    for module, name in ((inductor_config, "fx_graph_cache"), (functorch_config, "enable_autograd_cache")):
        if hasattr(module, name):
            setattr(module, name, True)
