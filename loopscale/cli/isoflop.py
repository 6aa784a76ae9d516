"""`loopscale isoflop TABLE`: Approach 2 on any iso-FLOP table (loopscale's own runs, or a study's released runs).

    loopscale isoflop runs.csv
    loopscale isoflop released.csv --n-col params --c-col flops --loss-col loss --md a2.md --json a2.json

Per compute budget, N* from a parabola through the points near the curve's minimum with its bootstrap interval,
then the exponent a of N* ~ C^a with an interval that carries every budget's uncertainty
(`loopscale.fit.validation.approach2`, docs/design.md "Out of sample"). Columns are mapped as `fit` maps them: N
(parameters), C (the budget's compute; or D tokens, C = 6 N D), L (loss); a table with an `r` column uses its
r = 1 rows, and a budget column (`--budget-col`, default C_budget) groups the budgets when present (else C to 3
significant digits). Prints the Markdown table; --md, --json write it (nothing written when anything fails).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from loopscale.atomic import check_writable, json_text, write_text_atomic
from loopscale.cli import UsageError
from loopscale.fit.runs_table import ColumnMap, read_table
from loopscale.fit.validation.approach2 import N_BOOTSTRAP, approach2_table, iso_flop_exponent
from loopscale.fit.validation.text import approach2_lines


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "isoflop",
        help="Approach 2 on any iso-FLOP table: N* per budget near the minimum with intervals, and N* ~ C^a",
        description="Approach 2 (Hoffmann et al. 2022) as practitioners run it: per budget a parabola of log L in "
        "ln N through the lowest size and its nearest neighbours, a bootstrap interval per budget, and the exponent "
        "of N* ~ C^a with an interval that carries each budget's uncertainty.",
    )
    p.add_argument("table", help="an iso-FLOP table (CSV, .parquet, .jsonl): one row per run")
    p.add_argument("--n-col", default="N", metavar="NAME", help="column holding N, the parameters (default N)")
    p.add_argument("--c-col", default="C", metavar="NAME", help="column holding C, the compute (default C)")
    p.add_argument("--d-col", default="D", metavar="NAME", help="column holding D, the tokens (default D)")
    p.add_argument("--loss-col", default="L", metavar="NAME", help="column holding L, the loss (default L)")
    p.add_argument(
        "--budget-col",
        default="C_budget",
        metavar="NAME",
        help="column naming each run's budget, when its C scatters about it (default C_budget; else C at 3 digits)",
    )
    p.add_argument("--bootstrap", type=int, default=N_BOOTSTRAP, metavar="B", help="bootstrap draws per budget")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    p.add_argument("--md", metavar="PATH", help="write the Markdown here")
    p.add_argument("--json", metavar="PATH", help="write the record here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.bootstrap < 20:
        raise UsageError(f"--bootstrap must be >= 20; got {args.bootstrap}")
    for flag in ("md", "json"):
        if getattr(args, flag):
            check_writable(Path(getattr(args, flag)), f"--{flag}")
    raw = read_table(args.table)
    columns = ColumnMap(N=args.n_col, C=args.c_col, D=args.d_col, L=args.loss_col)
    table = approach2_table(raw, columns, args.budget_col, args.table)
    record = iso_flop_exponent(table, n_boot=args.bootstrap, seed=args.seed)
    record["table"] = str(args.table)
    text = "\n".join([f"# Approach 2: {args.table}", "", *approach2_lines(record)])
    print(text)
    if args.json:
        write_text_atomic(Path(args.json), json_text(record) + "\n")
    if args.md:
        write_text_atomic(Path(args.md), text + "\n")
    return 0
