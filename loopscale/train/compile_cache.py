"""The compiled-graph cache: where a training process's compiled graphs are kept, so that the next process that
trains the same model loads them in seconds instead of compiling them for a minute or more.

Inductor already keeps what it compiled on disk: its FX graph cache (the generated code of each graph) and the
AOTAutograd cache (the forward / backward split), both on by default, in TORCHINDUCTOR_CACHE_DIR (else a folder
under /tmp that a reboot or another node does not have). `activate` points that variable at a folder of
loopscale's cache (loopscale/cache_home.py), one per key:

    $LOOPSCALE_CACHE/compile/<key hash>/    key.json (the key, for a reader), then Inductor's fxgraph/,
                                            aotautograd/ and the compiled kernels

The key (`compile_key`) is everything that decides which graphs a run compiles: every field of the model's config,
the compile mode and backend, the run's precision, device batch and optimizer (`run_context`), and torch's version,
Python's version and the machine architecture. A changed model or an upgraded torch therefore starts in an empty
folder: a stale graph is not merely never matched (Inductor's own keys hash the graph, its inputs' shapes, its
config and torch's version) but never found. What does not change the graphs stays out of the key, so every seed,
budget, forked branch and relaunch of one model shares one folder: pool workers, SLURM jobs on a shared home and later
launches alike. Inductor writes its entries whole (a temporary file, then a rename), so processes may share a
folder while they compile. The partial last validation batch's graphs go to the same folder.

A corrupt entry (an emptied or garbage generated kernel, `.py` or `.so`, which Inductor loads without checking)
fails the first compiled call of every later run of that model; `set_aside` moves the key's folder aside so the
run compiles afresh into an empty one (loopscale/train/compiling.py, `forward_recovering`, says so in one line).

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
from typing import Any, TypedDict

from loopscale.atomic import write_json_atomic
from loopscale.cache_home import cache_dir
from loopscale.config.model import with_moved_fields

GRAPHS_DIR = "compile"
KEY_FILE = "key.json"
INDUCTOR_ENV = "TORCHINDUCTOR_CACHE_DIR"
INDUCTOR_ENTRIES = ("fxgraph", "aotautograd")  # Inductor's folders of cached graphs


class RunContext(TypedDict):
    """How a run drives its model's graphs (`run_context`)."""

    precision: str
    device_batch: int
    optimizer: str


class CompileKey(TypedDict):
    """The graphs' key (`compile_key`), as key.json holds it."""

    model: dict[str, Any]  # every field of the ModelConfig (dataclasses.asdict)
    compile: str | bool  # the compile mode
    backend: str
    run: RunContext | dict  # {} for a key made without a run (the compile order's estimate)
    torch: str
    python: str
    machine: str


def compile_key(
    model_cfg, mode, backend: str = "inductor", torch_version: str | None = None, run: RunContext | None = None
) -> CompileKey:
    """What decides a run's compiled graphs (module docstring): the model's config (a ModelConfig), the compile
    mode and backend, how the run drives them (`run_context`: precision, device batch, optimizer), torch's
    version (this torch's unless given), Python's version and the machine."""
    if torch_version is None:  # the installed torch's own version string, read without importing torch
        torch_version = importlib.metadata.version("torch")
    return {
        "model": with_moved_fields(dataclasses.asdict(model_cfg)),  # the key it had before options held hyper_*
        "compile": mode,
        "backend": backend,
        "run": dict(run or {}),
        "torch": str(torch_version),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def run_context(precision: str, device_batch: int, optimizer: str) -> RunContext:
    """What a run adds to its model's graphs: the trainer's precision (bf16 autocast is other graphs), the device
    batch (shapes are compiled static) and the optimizer (its compiled steps share the folder). Without them in
    the key, `is_warm` priced a bf16 run of a model cached in fp32 as cached."""
    return {"precision": str(precision), "device_batch": int(device_batch), "optimizer": str(optimizer)}


def key_hash(key: CompileKey) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]


def graph_dir(key: CompileKey, root: Path | None = None) -> Path:
    """The key's folder: <root or the loopscale cache>/compile/<key hash>."""
    return (root if root is not None else cache_dir()) / GRAPHS_DIR / key_hash(key)


def is_warm(key: CompileKey, root: Path | None = None) -> bool:
    """Whether a process compiled graphs for this key already (Inductor has entries in its folder)."""
    folder = graph_dir(key, root)
    return any(any((folder / entries).glob("*")) for entries in INDUCTOR_ENTRIES if (folder / entries).is_dir())


def activate(key: CompileKey, root: Path | None = None) -> Path | None:
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


def set_aside(folder: Path) -> Path:
    """Move a key's folder aside as <folder>.corrupt-<n> (kept for a look, never read again) and return where it
    went; the key's own folder is then empty, and `activate` makes it afresh."""
    n = 0
    while (target := folder.with_name(f"{folder.name}.corrupt-{n}")).exists():
        n += 1
    folder.rename(target)
    return target


def _enable_inductor_caches() -> None:
    """The FX graph and AOTAutograd caches on (their default in torch 2.11+; set so a user's config cannot have
    them off unnoticed), each only where this torch has the switch."""
    # torch: only when a run compiles (`sweep` / `plan` read the cache's keys torch-free)
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    for module, name in ((inductor_config, "fx_graph_cache"), (functorch_config, "enable_autograd_cache")):
        if hasattr(module, name):
            setattr(module, name, True)
