"""The forms `loopscale validate` fits to one table and scores the same way: the fit's own law, every
registered law with a `rival` label (r^phi, a free k_r per r, E pinned, an N x D term: one module each in
loopscale/fit/laws/) and the fit's law with plain least squares instead of Huber (a `Loss` option, not a law).

A form that cannot be fitted to this table (its `check_table` refuses it: a per-r form without r = 1 runs, a
looped form on a dense table) is kept with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from loopscale.errors import InputError
from loopscale.fit.laws.form import Law, LawData
from loopscale.fit.laws.registry import law_class, law_names
from loopscale.fit.objective import Loss

MSE = Loss("l2")


@dataclass(frozen=True)
class Form:
    """label: the table's row name; law: the instance fitted (None when it cannot be); loss; reference: the
    fit's own law with its own loss (what the verdict is about); reason: why it cannot be fitted; by_position: a
    curve fit's two stages (`fit --curve-sigma position`), `loss` its stage 1's."""

    label: str
    law: Law | None
    loss: Loss
    reference: bool = False
    reason: str | None = None
    by_position: bool = False


def forms_for(
    table, data: LawData, law_name: str, reference: Mapping[str, float], loss: Loss, by_position: bool = False
) -> list[Form]:
    """The fit's law (first), each rival law other than it, then the fit's law under MSE (when the fit was not
    already least squares). `reference`: the fit's parameters (a pinned E reads its E). by_position: a curve fit
    weighed by its position sigma; both its forms (the fit's loss, MSE) are fitted in its two stages."""
    own = law_class(law_name)
    weighed = ", stage 2 weighed by position" if by_position else ""
    forms = [
        Form(f"{law_name} (the fit's law{weighed})", own.rival_law(data, reference), loss, True, None, by_position)
    ]
    for name in law_names() if not own.reads_curves else ():  # the rivals read runs tables, not curves
        cls = law_class(name)
        if cls.rival is None or cls is own:
            continue
        missing = [c for c in cls.size_columns if c not in table.columns]
        if missing:
            forms.append(Form(cls.rival, None, loss, reason=f"the table has no column {', '.join(missing)}"))
            continue
        try:
            cls.check_table(table)
            law = cls.rival_law(data, reference)
            law.bounds()  # a law that cannot be built for this fit says so here
        except InputError as err:
            forms.append(Form(cls.rival, None, loss, reason=str(err)))
            continue
        forms.append(Form(cls.rival, law, loss))
    if loss.kind != MSE.kind:
        label = f"{law_name}, MSE instead of Huber{weighed}"
        forms.append(Form(label, own.rival_law(data, reference), MSE, by_position=by_position))
    return forms
