"""What `loopscale-train` refuses from its command line alone, before the training stack imports: the stack
(torch, Lightning: 7 s on an idle 2-core machine, 15 s loaded) is not worth loading for a launch that cannot
start. loopscale/train/command.py runs these checks first; loopscale/train/entry.py too, for
`python -m loopscale.train.entry`."""

from __future__ import annotations

import sys

from hydra._internal.utils import get_args_parser
from hydra.core.override_parser.overrides_parser import OverridesParser

from loopscale.config.dirs import user_config_dirs
from loopscale.config.model import check_moved_overrides
from loopscale.config.naming import check_name
from loopscale.errors import ConfigError


def refuse_before_the_stack(argv: list[str]) -> None:
    """One line and a non-zero exit (SystemExit) for a LOOPSCALE_CONFIG_PATH that names no directory (Hydra
    reads its search path before its own error reporting starts) or an unsafe run or sweep name."""
    try:
        user_config_dirs()
        check_name_overrides(argv)
        check_moved_overrides(argv)
    except NotADirectoryError as err:
        raise SystemExit(f"loopscale-train: error: {err}") from None
    except ConfigError as err:
        print(f"loopscale-train: error: {err}", file=sys.stderr)
        raise SystemExit(err.exit_code) from None


def check_name_overrides(argv: list[str]) -> None:
    """ConfigError for a `run_name=` or `sweep=` override (each value of a sweep list) that is not a safe
    name (config/naming.py). Hydra resolves the run dir from them in its own code, where the refusal breaks
    its error formatting ("An error occurred during Hydra's exception formatting: AssertionError()" and a
    traceback), so the names the user typed are checked here, before Hydra starts; a name an experiment config
    sets is checked by its ls.safe_name resolver."""
    overrides = get_args_parser().parse_known_args(argv)[0].overrides
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # Hydra reports a malformed override itself, in one line
        return
    for override in parsed:
        if override.key_or_group not in ("run_name", "sweep") or override.is_delete():
            continue
        values = override.sweep_string_iterator() if override.is_sweep_override() else [override.value()]
        for value in values:
            if isinstance(value, str) and "${" not in value:
                check_name(override.key_or_group, value)
