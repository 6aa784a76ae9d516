"""The `loopscale` command: one subcommand per module in this package.

Each module named in COMMANDS defines `register(subparsers)`, which adds its parser(s) (with the help line
from COMMANDS) and sets `func` (args -> exit code) with `set_defaults`. Only the module of the command being
run is imported: it loads what that command needs at its top (scipy for `fit`, hydra for `sweep`), and every
other command is its name and help line, which is all `loopscale --help` prints; so `loopscale --help` loads no
figure, table or tensor library, and one command never loads another's.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NamedTuple

from loopscale.errors import LoopscaleError, closest, user_error
from loopscale.signals import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated, raise_on_sigterm, reader_gone


class Command(NamedTuple):
    module: str  # the module under loopscale.cli whose register() adds the command's parser
    help: str  # its line in `loopscale --help`


# The commands in the order --help lists them; a module that defines several has them next to each other.
COMMANDS = {
    "params": Command("params", "print N_once, N_rec, N, FLOPs/token and the layer plan of one model as JSON"),
    "data": Command("data", "prepare token shards for training"),
    "sweep": Command("sweep", "dry run: list the jobs of a Hydra multirun and their N, D, C"),
    "collect": Command("collect", "gather a sweep's run.json records into runs.csv / runs.parquet"),
    "status": Command("collect", "counts of done / running / stale / failed / diverged / incomplete runs in a sweep"),
    "fit": Command("fit", "fit a scaling law (E, A, alpha, B, beta, phi) to a runs table"),
    "compare": Command("fit", "delta-phi between two fits with a bootstrap CI"),
    "validate": Command(
        "validate", "out-of-sample checks of a fit: held-out budgets and r, rival forms, the lr confound, conventions"
    ),
    "isoflop": Command(
        "isoflop", "Approach 2 on any iso-FLOP table: N* per budget near the minimum with intervals, and N* ~ C^a"
    ),
    "equiv": Command("equiv", "equivalent non-looped sizes of a looped model"),
    "power": Command(
        "power", "how many runs: phi's and delta-phi's precision of a sweep design, the cheapest design for a target"
    ),
    "advise": Command(
        "advise", "the best r, width and tokens under a compute / memory / inference budget, with intervals"
    ),
    "plot": Command(
        "plot", "write the diagnostic figures (iso-FLOP, collapse, phi profile, residuals, ...) as PNG and PDF"
    ),
    "report": Command("plot", "write a short Markdown report of a sweep: fitted law with CIs, figures, runs, failures"),
    "notebook": Command(
        "notebook", "run the phi diagnostics notebook on a sweep into an HTML page (or .ipynb) with its outputs"
    ),
    "plan": Command("plan", "compute of a grid: forked WSD plan vs independent runs (dry run)"),
    "tune": Command("tune", "tune an experiment's lr per r on its own models; write the lr rule its sweeps use"),
    "demo": Command("demo", "prepare data, train the isodepth_cpu_demo sweep, fit phi, plot, report"),
}


class UsageError(LoopscaleError):
    """Bad command-line input: reported as one line on stderr with exit code 2, nothing written."""


def usage_error(err: BaseException) -> UsageError:
    """A config's refusal (Hydra's, OmegaConf's, a ConfigError or another ValueError) as the command's one line:
    the line `user_error` gives it (a config group's options, the closest key), else its first line."""
    found = user_error(err)
    return UsageError(found.line if found is not None else (str(err).strip().splitlines() or [repr(err)])[0])


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal of a value outside `choices` (a subcommand, --law, --noise, ...) also
    names the closest choice (argparse itself does only from Python 3.14, `suggest_on_error`)."""

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(repr, action.choices))
            near = closest(value, action.choices)
            hint = f" (did you mean {near!r}?)" if near is not None else ""
            raise argparse.ArgumentError(action, f"invalid choice: {value!r} (choose from {choices}){hint}")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `loopscale` parser with `command`'s options (its module imported); every other command is its name
    and help line (None: all of them, what `loopscale --help` prints)."""
    parser = Parser(
        prog="loopscale",
        description="Scaling-law experiments for looped (depth-recurrent) transformers.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = COMMANDS[command].module if command in COMMANDS else None
    registered = False
    for name, (module, help_line) in COMMANDS.items():
        if module != wanted:
            sub.add_parser(name, help=help_line)
        elif not registered:  # the module adds all its commands at once, in COMMANDS' order
            importlib.import_module(f"loopscale.cli.{module}").register(sub)
            registered = True
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and argv[0] in COMMANDS else None
    try:  # importing the command's module (scipy, hydra, torch: seconds) is Ctrl-C's first chance
        parser = build_parser(command)
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        print(f"loopscale{' ' + command if command else ''}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    raise_on_sigterm()  # SIGTERM unwinds like Ctrl-C: temporary files are removed, workers stopped
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # what is still buffered goes now, while a closed pipe is still caught below
        return code
    except BrokenPipeError:  # `loopscale params | head`: the reader left; end quietly, as `yes | head` does
        return reader_gone()
    except Exception as err:  # the user's to fix (loopscale/errors.py): one line, no traceback
        found = user_error(err)
        if found is None:
            raise
        # outputs are written atomically (loopscale/atomic.py): on a full disk what was there before is intact
        tail = "; nothing was replaced" if found.disk else ""
        print(f"loopscale {args.command}: error: {found.line}{tail}", file=sys.stderr)
        return found.exit_code
    except KeyboardInterrupt:  # Ctrl-C: workers are stopped where they were started; one line, no traceback
        print(f"loopscale {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print(f"loopscale {args.command}: terminated", file=sys.stderr)
        return EXIT_TERMINATED


if __name__ == "__main__":
    sys.exit(main())
