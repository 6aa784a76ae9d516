"""Where Hydra finds loopscale's configs: the package's own `loopscale/conf/` (train.yaml and the menu of
groups), the sweep designs in the repository's top-level `sweeps/` (experiment/, grid/; the package
`loopscale.sweeps` once installed), and the user's directories from LOOPSCALE_CONFIG_PATH; `compose` and
`train_config`, the training config a set of overrides gives (as Hydra's DictConfig, and as the typed
TrainConfig).

Every lookup of the shipped configs goes through `config_dir()` and `sweeps_dir()`, one rule from the imported
package's directory, so a plain checkout on sys.path (no install: the GPU node's copy of the tree), an editable
install and a wheel find the same files. User directories come from the environment variable LOOPSCALE_CONFIG_PATH
(directories separated like PATH, by os.pathsep); Hydra searches them BEFORE the package's own configs
(hydra_plugins/loopscale_searchpath.py), so a user file both adds options (experiment/my_grid.yaml) and
replaces a shipped one of the same name (hydra/launcher/slurm.yaml with the site's partition). Hydra's own
`hydra.searchpath=[file:///abs/dir]` override also works; it only adds, searched after the shipped configs.
"""

from __future__ import annotations

from pathlib import Path

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.config_search_path import SearchPathQuery
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from loopscale.atomic import write_text_atomic
from loopscale.config.locations import ENV_VAR, config_dir, sweeps_dir, user_config_dirs
from loopscale.config.model import ModelConfig, check_moved_overrides
from loopscale.config.resolvers import register_resolvers
from loopscale.config.schema import (
    BudgetConfig,
    DataConfig,
    LoggerConfig,
    OptimConfig,
    TrainConfig,
    TrainerConfig,
)

SWEEP_GROUPS = ("experiment", "grid")


def group_dir(group: str) -> Path:
    """Where the shipped options of a config group live: sweeps/ for experiment and grid, else conf/."""
    return (sweeps_dir() if group.split("/")[0] in SWEEP_GROUPS else config_dir()) / group


def compose(overrides: list[str], return_hydra_config: bool = False):
    """The training config `loopscale-train OVERRIDES` would run (a DictConfig), composed from the shipped
    configs and the user's (Hydra's compose API; the schema and the `ls.*` resolvers registered first)."""
    check_moved_overrides(overrides)
    register_resolvers()
    register_configs()
    with initialize_config_dir(str(config_dir()), version_base=None):
        return hydra_compose("train", overrides=overrides, return_hydra_config=return_hydra_config)


def train_config(overrides: list[str]):
    """The typed TrainConfig of `compose(overrides)`: what a script or a notebook trains or plans with."""
    return OmegaConf.to_object(compose(overrides))


def is_loopscale_main(path: str) -> bool:
    """Whether a Hydra search path entry (a plain path or file://path) is the shipped config directory."""
    return Path(path.removeprefix("file://")).resolve() == config_dir().resolve()


def add_user_dirs(search_path) -> None:
    """Put the user's directories just before the shipped configs in a Hydra ConfigSearchPath (first match
    wins, so a user file replaces the shipped one of the same name), and the sweep designs just after them.
    Other Hydra apps are left alone."""
    mains = [e.path for e in search_path.get_path() if e.provider == "main"]
    if not any(is_loopscale_main(p) for p in mains):
        return
    search_path.append(
        provider="loopscale-sweeps", path=f"file://{sweeps_dir()}", anchor=SearchPathQuery(provider="main")
    )
    for user_dir in user_config_dirs():
        search_path.prepend(provider=ENV_VAR, path=f"file://{user_dir}", anchor=SearchPathQuery(provider="main"))


def save_job_config(run_dir: Path, task_cfg) -> None:
    """Write what Hydra writes into a job's `.hydra/` (config.yaml, hydra.yaml, overrides.yaml), but only
    once the launch has claimed the run dir: train.yaml turns Hydra's own early write off
    (hydra.output_subdir: null), so a refused relaunch (another config, running elsewhere) leaves the run's
    record of what it trains untouched. Nothing outside a Hydra job (the demo, a notebook)."""
    if not (isinstance(task_cfg, DictConfig) and HydraConfig.initialized()):
        return
    hydra_cfg = HydraConfig.get()
    folder = Path(run_dir) / ".hydra"
    for name, node in (
        ("config.yaml", task_cfg),
        ("hydra.yaml", OmegaConf.create({"hydra": hydra_cfg})),
        ("overrides.yaml", hydra_cfg.overrides.task),
    ):
        write_text_atomic(folder / name, OmegaConf.to_yaml(node))


def register_configs() -> None:
    """Register the schema with Hydra so every YAML under loopscale/conf/ is type-checked against it."""
    cs = ConfigStore.instance()
    # Building the node instantiates ModelConfig(), whose __post_init__ resolves injection="auto" (and block) for
    # the default r = 1; put "auto" back so a sweep over r and recipes resolves them per run (OmegaConf.to_object).
    schema = OmegaConf.structured(TrainConfig)
    schema.model.injection = "auto"
    schema.model.block = "auto"
    schema.model.recipe = "auto"
    cs.store(name="train_schema", node=schema)
    for group, node in (
        ("model", ModelConfig),
        ("data", DataConfig),
        ("optim", OptimConfig),
        ("budget", BudgetConfig),
        ("trainer", TrainerConfig),
        ("logger", LoggerConfig),
    ):
        cs.store(group=group, name=f"{group}_schema", node=node)
