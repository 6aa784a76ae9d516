"""Where loopscale's shipped and user configs live on disk (the rules; loopscale/config/dirs.py puts them on
Hydra's search path): the package's conf/, the sweep designs in sweeps/ and the user's LOOPSCALE_CONFIG_PATH
directories. Nothing here imports Hydra or the resolvers, so a resolver may look files up here (an experiment's
lr rule, loopscale/config/lr_rule.py)."""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

ENV_VAR = "LOOPSCALE_CONFIG_PATH"


def package_dir() -> Path:
    """The directory of the imported loopscale package (a checkout's loopscale/, or site-packages/loopscale)."""
    return Path(str(files("loopscale")))


def config_dir() -> Path:
    """The directory of the shipped configs (train.yaml and the groups model/, data/, optim/, ...)."""
    return package_dir() / "conf"


def sweeps_dir() -> Path:
    """The directory of the sweep designs (experiment/, grid/), found from the package directory alone: the
    wheel installs the repository's `sweeps/` inside the package (loopscale/sweeps/, pyproject.toml's
    package-dir), a checkout has it beside the package (an editable install and a plain checkout on sys.path
    import the checkout's loopscale/). No import of `loopscale.sweeps`: that package exists only through an
    install's mapping, and a tree on sys.path has none."""
    inside = package_dir() / "sweeps"
    return inside if inside.is_dir() else package_dir().parent / "sweeps"


def user_config_dirs(environ: dict[str, str] | None = None) -> list[Path]:
    """The user's config directories from LOOPSCALE_CONFIG_PATH, in order; an entry that is not a
    directory is an error that names it (Hydra would otherwise skip it with a warning)."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "")
    dirs = [Path(entry).expanduser().resolve() for entry in value.split(os.pathsep) if entry.strip()]
    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:
        raise NotADirectoryError(
            f"{ENV_VAR} names {', '.join(missing)}, which is not a directory; set it to "
            f"config directories separated by {os.pathsep!r}"
        )
    return dirs
