"""LOOPSCALE_CONFIG_PATH for every loopscale entry point (loopscale-train, sweep, plan, demo): Hydra applies
search path plugins only from its `hydra_plugins` namespace, hence this module; the rule lives in
loopscale/config/dirs.py."""

from __future__ import annotations

from hydra.core.config_search_path import ConfigSearchPath
from hydra.errors import CompactHydraException
from hydra.plugins.search_path_plugin import SearchPathPlugin

from loopscale.config.dirs import add_user_dirs


class ConfigPathError(CompactHydraException):
    """LOOPSCALE_CONFIG_PATH names something that is not a directory: Hydra prints this one line (a compact
    error, no traceback) and loopscale's commands report it as a usage error."""


class LoopscaleUserConfigs(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        try:
            add_user_dirs(search_path)
        except NotADirectoryError as err:
            raise ConfigPathError(str(err)) from None
