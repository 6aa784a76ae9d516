"""Which model family a fit was made for: the family whose valid widths reproduce every model shape the fit
record holds (`FitResult.data["shapes"]`, [r, N_once, N_rec] per fitted model), and a named family refused
when they do not (docs/design.md, "Advice").

A family reproduces a shape when one of its valid widths has that shape's unique parameters (and, for r > 1,
its recurrent ones) to within MATCH_TOLERANCE: the counts are the accounting's integers, so the tolerance only
absorbs a table's rounding (and the committed fixture grid, which counts one norm fewer: 1e-5 off); a loose
match (it was 2%) lets another model pass, e.g. a SwiGLU stack (rounded hidden width, ~1% off) for ReLU^2.
"""

from __future__ import annotations

from collections.abc import Sequence

from loopscale.analysis.advise.family import FAMILY_EXPERIMENTS, Family, named_family
from loopscale.errors import InputError
from loopscale.recipes.registry import names as recipe_names

MATCH_TOLERANCE = 1e-4  # relative: integer counts, up to a table's rounding (see the module docstring)


def mismatches(family: Family, shapes: Sequence[Sequence[float]], tol: float = MATCH_TOLERANCE) -> list[str]:
    """The fitted model shapes [r, N_once, N_rec] no valid width of `family` reproduces (N_once + N_rec and,
    for r > 1, N_rec within `tol`; at r = 1 the split does not enter the law). Empty when it matches."""
    bad = []
    for r, n_once, n_rec in shapes:
        r = int(r)
        n_unique = n_once + n_rec
        if r not in family.polys:
            bad.append(f"r = {r} (the family has r in {list(family.r_values)})")
            continue
        d = family.width_step * max(1, round(float(family.width_for("N_unique", r, n_unique)) / family.width_step))
        close = abs(family.value("N_unique", r, d) - n_unique) <= tol * n_unique
        if r > 1:
            close = close and abs(family.value("N_rec", r, d) - n_rec) <= tol * max(n_rec, 1.0)
        if not close:
            nearest = float(family.value("N_unique", r, d))
            bad.append(f"r = {r}, N_once + N_rec = {n_unique:.4g} (nearest width d = {d:g} has {nearest:.4g})")
    return bad


def resolve_family(
    shapes: Sequence[Sequence[float]] | None,
    r_values: Sequence[int],
    name: str = "auto",
    recipe: str | None = "baseline",
    experiment: str | None = None,
    overrides: Sequence[str] = (),
) -> tuple[Family, list[str]]:
    """(family, notes). `auto`: the first of paper, demo, cpu whose widths reproduce every fitted shape
    (paper with a note when the fit records no shapes). A named family that does not reproduce the shapes
    is an InputError naming the first model it misses. `recipe`: the family's model.recipe, a published
    one (`recipes.registry.names(published=True)`) except for custom, where None keeps the experiment's own."""
    fitted_r = sorted({int(s[0]) for s in shapes}) if shapes else []
    wanted = sorted({*map(int, r_values), *fitted_r})
    published = recipe_names(published=True)
    if name != "custom" and recipe not in published:
        raise InputError(
            f"recipe {recipe!r} is not a published recipe ({', '.join(published)}): its models are those of its own "
            "experiment: pass --family custom --experiment NAME"
        )
    if name == "auto" and not shapes:
        note = "the fit records no model shapes (written before loopscale recorded them): assuming --family paper"
        return named_family("paper", wanted, recipe), [note]
    if name != "auto":
        family = named_family(name, wanted, recipe, experiment, overrides)
        bad = mismatches(family, shapes) if shapes else []
        if bad:
            raise InputError(f"--family {name} does not match the fit: its widths give no model with {bad[0]}")
        return family, ([] if shapes else [f"the fit records no model shapes: --family {name} taken as given"])
    errors, missed = [], []
    for candidate in FAMILY_EXPERIMENTS:
        try:
            family = named_family(candidate, wanted, recipe)
        except ValueError as err:  # e.g. an r this family's depth cannot loop
            errors.append(err)
            continue
        bad = mismatches(family, shapes)
        if not bad:
            return family, [f"family {candidate} (experiment={family.experiment}) reproduces every fitted model"]
        missed.append(f"{candidate} has no model with {bad[0]}")
    if len(errors) == len(FAMILY_EXPERIMENTS):
        raise errors[0]
    raise InputError(
        f"the fit's models match none of the families {', '.join(FAMILY_EXPERIMENTS)} ({recipe}; e.g. "
        f"{missed[0]}): pass --recipe for a recipe probe's fit "
        f"({', '.join(published)}), or --family custom --experiment NAME (the experiment it was trained with)"
    )
