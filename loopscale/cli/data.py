"""`loopscale data prepare`: tokenize a corpus into cached token shards (loopscale/data/shards.py).
`loopscale data pack`: the same, then BOS-prepended packing into parquet rows of T + 1 tokens
(loopscale/data/packed_parquet.py),
the format the published runs read: best fit with padding (every token kept) or, with --packing published, full
rows with documents cropped, as the published set was packed.

    loopscale data prepare                                  # Shakespeare, byte-level BPE 2048
    loopscale data prepare --source text --path notes/ --tokenizer gpt2
    loopscale data prepare --source hf --hf-name HuggingFaceFW/fineweb-edu --hf-config sample-10BT \\
        --streaming --max-documents 100000 --vocab-size 32768

    loopscale data pack --seq-len 256                       # Shakespeare packed for T = 256
    loopscale data pack --seq-len 256 --packing published   # full rows, documents cropped (as published)
    loopscale data pack --source text --path notes/ --tokenizer path/to/tokenizer.json --seq-len 2048

Prints where the shards (rows) are and their counts. A second run with the same options is instant.
"""

from __future__ import annotations

import argparse
import dataclasses

from loopscale.cli import COMMANDS
from loopscale.config.schema import DataConfig
from loopscale.data.packed_parquet import pack
from loopscale.data.shards import prepare

_DEFAULTS = DataConfig()


def register(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser("data", help=COMMANDS["data"].help)
    data_sub = data.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    p = data_sub.add_parser(
        "prepare",
        help="tokenize a corpus into cached uint16/uint32 shards",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _corpus_arguments(p)
    p.set_defaults(func=run_prepare)
    p = data_sub.add_parser(
        "pack",
        help="tokenize and best-fit pack a corpus into parquet rows of T + 1 tokens",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _corpus_arguments(p)
    p.add_argument("--seq-len", type=int, required=True, help="T: rows hold T + 1 tokens (the model's seq_len)")
    p.add_argument(
        "--packing",
        choices=["best_fit", "published"],
        default=_DEFAULTS.packing,
        help="best_fit: every token kept, row ends padded (default); published: every row full, documents "
        "cropped, as the published set was packed",
    )
    p.set_defaults(func=run_pack)


def _corpus_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", choices=["shakespeare", "text", "hf"], default=_DEFAULTS.source)
    p.add_argument("--path", help="text: a .txt/.jsonl/.parquet file or a folder of them")
    p.add_argument("--hf-name", help="hf: hub dataset name, e.g. HuggingFaceFW/fineweb-edu")
    p.add_argument("--hf-config", help="hf: dataset config name")
    p.add_argument("--hf-split", default=_DEFAULTS.hf_split)
    p.add_argument("--text-column", default=_DEFAULTS.text_column)
    p.add_argument("--streaming", action="store_true", help="hf: stream instead of downloading everything")
    p.add_argument("--max-documents", type=int, help="use only the first N documents")
    p.add_argument("--tokenizer", default=_DEFAULTS.tokenizer, help="bpe (trained) | gpt2 | path/to/tokenizer.json")
    p.add_argument("--vocab-size", type=int, default=_DEFAULTS.vocab_size, help="bpe: vocabulary size")
    p.add_argument("--token-dtype", choices=["auto", "uint16", "uint32"], default=_DEFAULTS.token_dtype)
    p.add_argument("--val-fraction", type=float, default=_DEFAULTS.val_fraction)
    p.add_argument("--split-seed", type=int, default=_DEFAULTS.split_seed)
    p.add_argument("--data-dir", default=_DEFAULTS.data_dir)
    p.add_argument("--num-proc", type=int, default=_DEFAULTS.num_proc, help="tokenizer worker processes")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def config_from_args(args: argparse.Namespace) -> DataConfig:
    fields = {f.name for f in dataclasses.fields(DataConfig)}
    values = {k: v for k, v in vars(args).items() if k in fields and v is not None}
    return DataConfig(**values)


def run_prepare(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)

    prepared = prepare(cfg, progress=not args.no_progress)  # a DataError is one line (loopscale/errors.py)
    split = prepared.meta["split"]
    print(f"prepared {prepared.root}")
    print(f"  tokenizer   {prepared.tokenizer_path} (vocab {prepared.vocab_size}, {prepared.meta['dtype']})")
    print(f"  train       {prepared.n_train_tokens:,} tokens from {split['n_train_documents']} documents")
    print(f"  val         {prepared.n_val_tokens:,} tokens from {split['n_val_documents']} documents")
    return 0


def run_pack(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)

    packed = pack(cfg, args.seq_len, progress=not args.no_progress)
    meta = packed.meta
    print(f"packed {packed.root}")
    print(
        f"  tokenizer   {meta['tokenizer']['name']} (vocab {meta['tokenizer']['vocab_size']}, "
        f"BOS {meta['tokenizer']['bos_id']}, {meta['dtype']}), rows of T + 1 = {meta['row_len']}"
    )
    for split in ("train", "val"):
        info = meta["splits"][split]
        print(
            f"  {split:<5}       {info['rows']:,} rows from {info['documents']:,} documents "
            f"({info['split_documents']:,} split), {info['tokens']:,} tokens, "
            f"padding {info['waste_share']:.3%}, kept {info.get('kept_share', 1.0):.1%} of the tokens"
        )
    return 0
