"""`loopscale params`: print the exact accounting of one model (counts, FLOPs/token, layer plan) as JSON.

loopscale params --preset paper --size 6 --r 2
loopscale params --preset cpu --d-model 128 --r 4 --bptt-k 2
loopscale params --recipe lora --r 4 --option lora_rank=8
"""

from __future__ import annotations

import argparse

from loopscale.atomic import json_text
from loopscale.blocks.registry import names as block_names
from loopscale.cli import COMMANDS, UsageError
from loopscale.injections.registry import names as injection_names
from loopscale.model.accounting import accounting_report, cpu_model, paper_model
from loopscale.recipes.registry import names as recipe_names

# optional ModelConfig fields the flags may override after the preset (flag --seq-len -> seq_len, ...)
OVERRIDES = (
    "bptt_k",
    "injection",
    "block",
    "vocab_size",
    "seq_len",
    "tie_embeddings",
    "mlp",
    "logit_softcap",
)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "params",
        help=COMMANDS["params"].help,
        description="Exact parameter and FLOP accounting of one looped transformer (no model is built).",
    )
    p.add_argument(
        "--preset",
        choices=("paper", "cpu"),
        default="cpu",
        help="paper: the published grid (L_eff 20, d = 64*size); cpu: the small grid (L_eff 12)",
    )
    p.add_argument("--size", type=int, default=None, help="paper preset: s, with d_model = 64*s rounded up to 128")
    p.add_argument("--d-model", type=int, default=None, help="cpu preset: width (default 128)")
    p.add_argument("--r", type=int, default=1, help="recurrence count (default 1)")
    p.add_argument(
        "--recipe",
        default="auto",
        help=" | ".join(recipe_names()) + " (loopscale/recipes/), or a name of your own for a design set by other "
        "options (default: the recipe the options describe)",
    )
    p.add_argument("--bptt-k", type=int, default=None, help="truncated backprop: passes with gradient")
    p.add_argument("--injection", default=None, help=" | ".join(injection_names()) + " (loopscale/injections/)")
    p.add_argument("--block", default=None, help=" | ".join(block_names()) + " (loopscale/blocks/)")
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a form option (model.options), e.g. lora_rank=8 or residual_lambda=2; repeatable",
    )
    p.add_argument(
        "--hyper-lanes", type=int, default=None, help="K, lanes for injection=hyper (= --option hyper_lanes=K)"
    )
    p.add_argument("--hyper-dynamic", action="store_true", default=None, help="dynamic hyper-connections")
    p.add_argument("--vocab-size", type=int, default=None)
    p.add_argument("--seq-len", type=int, default=None)
    p.add_argument("--tie-embeddings", action="store_true", default=None)
    p.add_argument("--mlp", default=None, help="relu2 | swiglu")
    p.add_argument("--logit-softcap", type=float, default=None)
    p.set_defaults(func=run)


def build_config(args: argparse.Namespace):
    """The ModelConfig the flags describe; ValueError (naming the field) on a bad value."""
    overrides = {name: getattr(args, name) for name in OVERRIDES if getattr(args, name) is not None}
    options = {"hyper_lanes": args.hyper_lanes, "hyper_dynamic": args.hyper_dynamic}  # form options of their own
    options = {**{k: v for k, v in options.items() if v is not None}, **parse_options(args.option)}
    if options:
        overrides["options"] = options
    if args.preset == "paper":
        if args.d_model is not None:
            raise UsageError("--d-model applies to --preset cpu; the paper preset sets d_model from --size")
        return paper_model(6 if args.size is None else args.size, args.r, args.recipe, **overrides)
    if args.size is not None:
        raise UsageError("--size applies to --preset paper; use --d-model with --preset cpu")
    return cpu_model(128 if args.d_model is None else args.d_model, args.r, args.recipe, **overrides)


def parse_options(pairs: list[str]) -> dict:
    """["lora_rank=8", "residual_lambda=0.5"] -> {"lora_rank": 8, "residual_lambda": 0.5} (numbers as numbers)."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--option {pair!r}: give KEY=VALUE")
        for kind in (int, float):
            try:
                options[key] = kind(value)
                break
            except ValueError:
                options[key] = value
    return options


def run(args: argparse.Namespace) -> int:
    report = accounting_report(build_config(args))
    print(json_text(report))
    return 0
