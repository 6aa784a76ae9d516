"""Which tokens a training run reads, chosen by data.format / data.source, and the checks made before
training starts.

- format=windows: random windows of the token shards (shards.py, data.py); never runs out.
- format=packed, source shakespeare / text / hf: the corpus packed by `loopscale data pack` at the model's
  T (packed.py, cached), read once in order (rows.py).
- source=packed: a ready packed set (the published FineWeb-Edu set, or a local folder of the same files).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from loopscale.data.corpus import DataError
from loopscale.data.packed_parquet import open_published, pack
from loopscale.data.shards import prepare

if TYPE_CHECKING:
    import lightning as L

    from loopscale.config.schema import DataConfig
    from loopscale.data.packed_parquet import PackedSet
    from loopscale.data.shards import PreparedData


@dataclass(frozen=True)
class RunData:
    vocab_size: int  # the tokenizer's vocabulary (the model pads it)
    prepared: Optional[PreparedData] = None  # format=windows
    packed: Optional[PackedSet] = None  # format=packed

    @property
    def content_sha256(self) -> str:
        """The data's content hash: part of the run's identity (identity.DATA_FIELD), so a run never resumes
        on data that changed under it (a corpus edited, a cache rebuilt from other text)."""
        return (self.packed or self.prepared).content_sha256

    def record(self, data: DataConfig, steps: int, batch_rows: int, seq_len: int) -> dict:
        """What a run of `steps` steps of `batch_rows` rows reads (run.json's `data`); DataError when a packed set is
        too small for it (data.allow_repeat lifts it)."""
        if self.packed is None:
            return {
                "format": "windows",
                "set": str(self.prepared.root),
                "content_sha256": self.content_sha256,
                "train_tokens": self.prepared.n_train_tokens,
            }
        from loopscale.data.packed_batches import check_rows, val_row_count  # torch: only when a run opens its data

        packed = self.packed
        record = check_rows(packed.train.n_rows, steps, batch_rows, seq_len, data.allow_repeat, str(packed.root))
        record["content_sha256"] = self.content_sha256
        record["val_rows"] = val_row_count(packed, data.val_rows)
        record["waste_share"] = packed.meta.get("waste_share")
        return record


def open_or_error(data: DataConfig, seq_len: int, progress: bool = True) -> RunData | Exception:
    """The run's data opened before its training starts, or the error opening it raised: the run records that
    error as its failure once its run dir is claimed (`usable`), as any other failure of the run."""
    try:
        return open_run_data(data, seq_len, progress)
    except Exception as err:
        return err


def usable(run_data: RunData | Exception) -> RunData:
    """The data `open_or_error` opened, or its error raised here, inside the run's recording."""
    if isinstance(run_data, Exception):
        raise run_data
    return run_data


def open_run_data(data: DataConfig, seq_len: int, progress: bool = True) -> RunData:
    """Prepare / pack / locate the run's data (cached); fails before any model is built."""
    if data.format == "windows":
        prepared = prepare(data, progress=progress)
        return RunData(vocab_size=prepared.vocab_size, prepared=prepared)

    packed = open_published(data, progress) if data.source == "packed" else pack(data, seq_len, progress)
    if packed.seq_len != seq_len:
        raise DataError(
            f"data: the packed set {packed.root} has rows of T + 1 = {packed.seq_len + 1} tokens; "
            f"model.seq_len={seq_len} must be {packed.seq_len}"
        )
    vocab = packed.vocab_size or data.vocab_size  # the published set has no meta.json: data.vocab_size
    return RunData(vocab_size=vocab, packed=packed)


def make_datamodule(
    run: RunData, data: DataConfig, seq_len: int, micro: int, seed: int, val_subset: float = 1.0
) -> L.LightningDataModule:
    """The DataModule of the run: `micro` sequences per micro-batch on each rank; validations inside fit read
    the first `val_subset` share of the val set (trainer.val_subset), the final one all of it."""
    if run.packed is None:
        from loopscale.data.windows import TokenDataModule  # torch, Lightning: only when a run trains

        module = TokenDataModule(run.prepared, seq_len=seq_len, batch_size=micro, seed=seed, val_tokens=data.val_tokens)
    else:
        from loopscale.data.packed_batches import PackedDataModule  # torch, Lightning: only when a run trains

        module = PackedDataModule(run.packed, micro, val_rows=data.val_rows, allow_repeat=data.allow_repeat)
    module.val_subset = val_subset
    return module
