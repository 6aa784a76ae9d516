"""An experiment's tuned learning-rate rule: the file `loopscale tune` writes (loopscale/launch/tune.py) and every
later sweep of that experiment reads.

    sweeps/lr_rules/<experiment>.yaml
      experiment: isodepth_cpu_demo
      multipliers:            # recipe -> r -> the multiplier of every group's peak lr (optim.lr_rule)
        baseline: {1: 1.9, 2: 1.8, 4: 1.6, 8: 1.6}
      recipes: {baseline: {key: ..., cells: [...], intervals: {...}, per_cell: {...}, noise: {...}, cost: {...}}}

An experiment uses its rule by one line, `optim.lr_rule: ${ls.lr_rule:<experiment>,${ls.recipe:${model}},${model.r}}`
(sweeps/experiment/isodepth_cpu_demo.yaml): the resolver reads the multiplier of the run's recipe and r, so the
composed config holds the number itself (the run's identity and name change with it: a retuned rule trains new
runs, it never resumes or skips the old ones). `experiment=isodepth` has no rule: the published transfer was tuned
at its scale.

The file is looked up in each LOOPSCALE_CONFIG_PATH directory's lr_rules/ first, then in the shipped sweeps/
(loopscale/config/dirs.py), as experiments are. A recipe or r the rule was not tuned for is an error that says
how to tune it: a silent multiplier of 1 would train the untuned lr under the tuned experiment's name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from loopscale.atomic import write_text_atomic
from loopscale.config.locations import sweeps_dir, user_config_dirs
from loopscale.errors import ConfigError

RULES_DIR = "lr_rules"
HEADER = """\
# The tuned learning-rate rule of experiment={experiment}: written by `loopscale tune` (loopscale/launch/tune.py),
# read by the experiment's optim.lr_rule (loopscale/config/lr_rule.py). Every group's peak lr is multiplied by
# multipliers[recipe][r]; `recipes` holds how each recipe's multipliers were measured. Rerun the tune to change it.
"""


def rule_file(experiment: str, search: list[Path] | None = None) -> Path:
    """Where experiment's rule lives: the first <dir>/lr_rules/<experiment>.yaml that exists among the user's
    config dirs and the shipped sweeps/ (search: those dirs; None: LOOPSCALE_CONFIG_PATH's, then sweeps/); when
    none exists yet (where `loopscale tune` writes a new one), beside the experiment: the first of those dirs
    with experiment/<experiment>.yaml, else the last."""
    dirs = search if search is not None else [*user_config_dirs(), sweeps_dir()]
    for d in dirs:
        path = Path(d) / RULES_DIR / f"{experiment}.yaml"
        if path.is_file():
            return path
    home = next((Path(d) for d in dirs if (Path(d) / "experiment" / f"{experiment}.yaml").is_file()), Path(dirs[-1]))
    return home / RULES_DIR / f"{experiment}.yaml"


def read_rule(path: Path) -> dict[str, Any]:
    """The rule file's content; {} when there is none. ConfigError when it is not a rule."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        content = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(
            f"{path} is not a YAML lr rule ({str(err).splitlines()[0]}); rerun `loopscale tune`"
        ) from None
    if not isinstance(content, dict) or not isinstance(content.get("multipliers"), dict):
        raise ConfigError(f"{path} has no `multipliers` (recipe -> r -> multiplier); rerun `loopscale tune`")
    return content


def multiplier(experiment: str, recipe: str, r: Any) -> float:
    """`${ls.lr_rule:EXPERIMENT,RECIPE,R}`: the tuned multiplier of that recipe at that r. ConfigError when the
    experiment has no rule file or the rule has no such recipe or r."""
    path = rule_file(str(experiment))
    rule = read_rule(path)
    tune = f"tune it with `loopscale tune experiment={experiment} model.recipe={recipe}`, or set optim.lr_rule=1"
    if not rule:
        raise ConfigError(f"experiment {experiment} reads its lr rule from {path}, which does not exist: {tune}")
    by_r = rule["multipliers"].get(str(recipe))
    if not isinstance(by_r, dict):
        raise ConfigError(f"{path} has no tuned lr for recipe {recipe} (it has {sorted(rule['multipliers'])}): {tune}")
    value = {int(k): v for k, v in by_r.items()}.get(int(r))
    if value is None:
        raise ConfigError(f"{path} has no tuned lr for recipe {recipe} at r = {r} (it has r = {sorted(by_r)}): {tune}")
    return float(value)


def write_rule(path: Path, experiment: str, recipe: str, multipliers: dict[int, float], record: dict[str, Any]) -> Path:
    """Set one recipe's multipliers (and its record: how they were measured) in the rule file, keeping the other
    recipes'; written atomically."""
    path = Path(path)
    rule = read_rule(path) or {"experiment": experiment, "multipliers": {}, "recipes": {}}
    rule["experiment"] = experiment
    rule["multipliers"][recipe] = {int(r): float(f"{m:.3g}") for r, m in sorted(multipliers.items())}
    rule.setdefault("recipes", {})[recipe] = record
    path.parent.mkdir(parents=True, exist_ok=True)
    text = HEADER.format(experiment=experiment) + yaml.safe_dump(rule, sort_keys=False, default_flow_style=None)
    write_text_atomic(path, text)
    return path
