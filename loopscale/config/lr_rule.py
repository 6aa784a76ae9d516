"""An experiment's tuned learning-rate rule: the file `loopscale tune` writes (loopscale/launch/tune.py) and every
later sweep of that experiment reads.

    sweeps/lr_rules/<experiment>.yaml
      experiment: isodepth_cpu_demo
      multipliers:            # recipe -> r -> the multiplier of every group's peak lr (optim.lr_rule)
        baseline: {1: 1.9, 2: 1.8, 4: 1.6, 8: 1.6}
      transfer:               # only where the best lr moved with the cells' width: x (width / ref_width)^exponent
        baseline: {width_exponent: -0.8, ref_width: 24}
      recipes: {baseline: {key: ..., cells: [...], rule: {r: per-cell optima}, transfer: {...}, noise, cost}}
      loop:                   # `loopscale tune --axis loop`: optim.lr_loop, the loop matrices over the others
        multipliers: {baseline: {1: {16: 0.3, 48: 1.1}, 2: {16: 0.2, 48: 0.06}}}  # recipe -> r -> width -> m
        recipes: {baseline: {key: ..., cells: [...], rule: ..., noise, cost}}
        lr_rule: {baseline: {multipliers: {1: 1.9, ...}, transfer: null}}  # the lr rule it was tuned at

An experiment uses its rule by one line,
`optim.lr_rule: ${ls.lr_rule:<experiment>,${ls.recipe:${model}},${model.r},${model.d_model}}`
(sweeps/experiment/isodepth_cpu_demo.yaml): the resolver reads the multiplier of the run's recipe and r, so the
composed config holds the number itself (the run's identity and name change with it: a retuned rule trains new
runs, it never resumes or skips the old ones). `experiment=isodepth` has no rule: the published transfer was tuned
at its scale.

The file is looked up in each LOOPSCALE_CONFIG_PATH directory's lr_rules/ first, then in the shipped sweeps/
(loopscale/config/dirs.py), as experiments are. A recipe or r the rule was not tuned for is an error that says
how to tune it: a silent multiplier of 1 would train the untuned lr under the tuned experiment's name.

The loop's optima are measured at the lr rule of their time (`tune --axis loop` trains at the experiment's tuned
lr), so the loop rule records that lr rule (`loop.lr_rule`: the recipe's multipliers and transfer as written) and
is refused when the file's lr rule is another one (`stale_loop`): the lr axis retuned since. A loop rule written
before the record was kept is read as it is until the next lr tune records the lr rule it replaces.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from loopscale.atomic import write_text_atomic
from loopscale.config.locations import sweeps_dir, user_config_dirs
from loopscale.config.tune_record import LrRuleOf, RuleFile, TuneRecord, WidthScaling
from loopscale.errors import ConfigError

RULES_DIR = "lr_rules"
HEADER = """\
# The tuned learning-rate rule of experiment={experiment}: written by `loopscale tune` (loopscale/launch/tune.py),
# read by the experiment's optim.lr_rule (loopscale/config/lr_rule.py). Every group's peak lr is multiplied by
# multipliers[recipe][r]; `recipes` holds how each recipe's multipliers were measured. Rerun the tune to change it.
# `loop` (`loopscale tune --axis loop`): optim.lr_loop, the loop's matrices over the other matrices, per recipe, r and
# width; `loop.lr_rule` the lr rule it was tuned at (another lr rule since: the loop rule is refused, retune it).
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


def read_rule(path: Path) -> RuleFile:
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


def multiplier(experiment: str, recipe: str, r: Any, width: Any = None) -> float:
    """`${ls.lr_rule:EXPERIMENT,RECIPE,R,WIDTH}`: the tuned multiplier of that recipe at that r, times
    (width / ref_width)^width_exponent when the rule has a width transfer for the recipe (`loopscale tune` writes one
    when the best lr moved with the width of its cells). ConfigError when the experiment has no rule file, the
    rule has no such recipe or r, or it has a width transfer and no width is given."""
    path = rule_file(str(experiment))
    rule = read_rule(path)
    tune = (
        f"tune it with `loopscale tune experiment={experiment} model.recipe={recipe}` (the lr axis, tuned before "
        "any `--axis loop`), or set optim.lr_rule=1"
    )
    if not rule:
        raise ConfigError(f"experiment {experiment} reads its lr rule from {path}, which does not exist: {tune}")
    by_r = rule["multipliers"].get(str(recipe))
    if not isinstance(by_r, dict):
        raise ConfigError(f"{path} has no tuned lr for recipe {recipe} (it has {sorted(rule['multipliers'])}): {tune}")
    value = {int(k): v for k, v in by_r.items()}.get(int(r))
    if value is None:
        raise ConfigError(f"{path} has no tuned lr for recipe {recipe} at r = {r} (it has r = {sorted(by_r)}): {tune}")
    transfer = (rule.get("transfer") or {}).get(str(recipe))
    if not transfer:
        return float(value)
    if width is None:
        raise ConfigError(
            f"{path} scales recipe {recipe}'s lr with the width: pass it (${{ls.lr_rule:...,${{model.d_model}}}})"
        )
    scaled = float(value) * (float(width) / float(transfer["ref_width"])) ** float(transfer["width_exponent"])
    return float(f"{scaled:.3g}")  # run names carry 3 digits: the lr trained is the one named


def loop_multiplier(experiment: str, recipe: str, r: Any, width: Any) -> float:
    """`${ls.lr_loop_rule:EXPERIMENT,RECIPE,R,WIDTH}`: the loop's tuned lr multiplier (optim.lr_loop) of that recipe
    and r at that width: the tuned width's own, else log-linear in ln width between the two tuned widths around it
    (3 significant digits, as run names carry it). ConfigError when the experiment has no loop rule for the recipe
    or r, or the width is outside the tuned ones (the optima move with the width: no extrapolation)."""
    path = rule_file(str(experiment))
    tune = (
        f"tune it with `loopscale tune experiment={experiment} model.recipe={recipe} --axis loop`, or set "
        "optim.lr_loop=1"
    )
    rule = read_rule(path) or {}
    loop = rule.get("loop") or {}
    by_r = (loop.get("multipliers") or {}).get(str(recipe))
    if not isinstance(by_r, dict):
        raise ConfigError(f"{path} has no tuned loop lr for recipe {recipe}: {tune}")
    by_width = {int(k): v for k, v in by_r.items()}.get(int(r))
    if not by_width:
        raise ConfigError(
            f"{path} has no tuned loop lr for recipe {recipe} at r = {r} (it has r = {sorted(by_r)}): {tune}"
        )
    stale = stale_loop(rule, str(recipe))
    if stale:
        raise ConfigError(
            f"{path}: recipe {recipe}'s loop rule was tuned at the lr rule {lr_text(stale[0])}, and the lr rule is "
            f"now {lr_text(stale[1])}: the loop's optimum moves with the lr, so it is not read; retune it with "
            f"`loopscale tune experiment={experiment} model.recipe={recipe} --axis loop`, or set optim.lr_loop=1"
        )
    points = sorted((int(w), float(m)) for w, m in by_width.items())
    d = int(width)
    if not points[0][0] <= d <= points[-1][0]:
        raise ConfigError(
            f"{path} tuned recipe {recipe}'s loop lr at r = {r} at widths {[w for w, _ in points]}, not at {d}: "
            f"the optimum moves with the width, so it is not extrapolated; {tune} with a cell at d{d}"
        )
    for (w0, m0), (w1, m1) in zip(points, points[1:] + points[-1:]):
        if w0 == d:
            return float(f"{m0:.3g}")
        if w0 < d < w1:
            share = (math.log(d) - math.log(w0)) / (math.log(w1) - math.log(w0))
            return float(f"{math.exp((1 - share) * math.log(m0) + share * math.log(m1)):.3g}")
    raise AssertionError("unreachable: d lies within the tuned widths")


def lr_part(rule: RuleFile, recipe: str) -> LrRuleOf:
    """The lr axis' rule of a recipe as the file holds it (no multipliers: the untuned lr): what a loop rule is
    tuned at."""
    return lr_identity((rule.get("multipliers") or {}).get(recipe), (rule.get("transfer") or {}).get(recipe))


def lr_identity(multipliers: dict | None, transfer: dict | None) -> LrRuleOf:
    """An lr rule's multipliers and width transfer as the file writes them (3 and 4 significant digits), the
    keys as numbers: two readings of one rule compare equal."""
    return {
        "multipliers": {int(r): float(f"{float(m):.3g}") for r, m in sorted((multipliers or {}).items())},
        "transfer": {k: float(f"{float(v):.4g}") for k, v in sorted(transfer.items())} if transfer else None,
    }


def stale_loop(rule: RuleFile, recipe: str) -> tuple[LrRuleOf, LrRuleOf] | None:
    """(the lr rule the recipe's loop rule was tuned at, the file's lr rule now) when they differ; None when they
    agree, the recipe has no loop rule, or its loop rule records none (written before the record was kept)."""
    loop = rule.get("loop") or {}
    tuned_at = (loop.get("lr_rule") or {}).get(recipe)
    if recipe not in (loop.get("multipliers") or {}) or tuned_at is None:
        return None
    then, now = lr_identity(tuned_at.get("multipliers"), tuned_at.get("transfer")), lr_part(rule, recipe)
    return None if then == now else (then, now)


def lr_text(part: LrRuleOf) -> str:
    """An lr rule in one phrase: 'r -> x {1: 7.71, 2: 7.01}' and its width transfer, or 'none (the untuned lr)'."""
    if not part["multipliers"]:
        return "none (the untuned lr)"
    transfer = part["transfer"]
    scaled = f" x (width / {transfer['ref_width']:g})^{transfer['width_exponent']:g}" if transfer else ""
    return f"r -> x {part['multipliers']}{scaled}"


def write_loop_rule(
    path: Path,
    experiment: str,
    recipe: str,
    multipliers: dict[int, dict[int, float]],
    record: TuneRecord,
    tuned_at: LrRuleOf | None = None,
) -> Path:
    """Set one recipe's loop multipliers (r -> width -> multiplier), their record and the lr rule they were tuned
    at (`lr_part` of the file the experiment read; None: this file's) under the rule file's `loop` key, keeping
    everything else; written atomically."""
    rule = _current(Path(path), experiment)
    loop = rule.setdefault("loop", {})
    loop.setdefault("multipliers", {})[recipe] = {
        int(r): {int(w): float(f"{m:.3g}") for w, m in sorted(by_w.items())} for r, by_w in sorted(multipliers.items())
    }
    loop.setdefault("recipes", {})[recipe] = record
    loop.setdefault("lr_rule", {})[recipe] = tuned_at if tuned_at is not None else lr_part(rule, recipe)
    return _write(Path(path), rule, experiment)


def _current(path: Path, experiment: str) -> RuleFile:
    """The rule file's content to update (a new one when there is none)."""
    rule = read_rule(path) or {"experiment": experiment, "multipliers": {}, "recipes": {}}
    rule["experiment"] = experiment
    return rule


def _write(path: Path, rule: RuleFile, experiment: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = HEADER.format(experiment=experiment) + yaml.safe_dump(rule, sort_keys=False, default_flow_style=None)
    write_text_atomic(path, text)
    return path


def write_rule(
    path: Path,
    experiment: str,
    recipe: str,
    multipliers: dict[int, float],
    record: TuneRecord,
    transfer: WidthScaling | None = None,
) -> Path:
    """Set one recipe's multipliers (at ref_width when there is a width transfer {width_exponent, ref_width}),
    its transfer and its record (how they were measured) in the rule file, keeping the other recipes'; written
    atomically."""
    path = Path(path)
    rule = _current(path, experiment)
    loop = rule.get("loop") or {}
    if recipe in (loop.get("multipliers") or {}) and recipe not in (loop.get("lr_rule") or {}):
        # a loop rule written before it recorded its lr rule was tuned at the one replaced here (or at none)
        loop.setdefault("lr_rule", {})[recipe] = lr_part(rule, recipe)
    rule["multipliers"][recipe] = {int(r): float(f"{m:.3g}") for r, m in sorted(multipliers.items())}
    transfers = rule.setdefault("transfer", {})
    if transfer:
        transfers[recipe] = {k: float(f"{v:.4g}") for k, v in transfer.items()}
    else:
        transfers.pop(recipe, None)
    rule.setdefault("recipes", {})[recipe] = record
    return _write(path, rule, experiment)
