"""The one renderer of a fit record's conditioning (`loopscale.fit.verdict`): plain lines for `loopscale fit`,
`compare`, `report`'s terminal and the notebook (`verdict_lines`), and the same content for Markdown (`verdict_rows`,
`closing_lines`: `analysis.report.conditioning_section`). Each check with what it protects and its status ("ok",
"FAIL": it blocks the measurement, "warn": an extrapolation check), the warnings, each delta-phi's minimum
detectable difference with the formula's numbers, and the verdict last."""

from __future__ import annotations

from loopscale.fit.verdict import BLOCKING, MDE_FACTOR, shown_value
from loopscale.fit.verdict_record import Conditioning, as_conditioning


def verdict_rows(cond: Conditioning | dict) -> list[tuple[str, str, str, str, str]]:
    """(status, protects, name, value, target) per check: status "ok", "FAIL" (blocks the measurement) or
    "warn" (an extrapolation check: a warning). A record from before the checks said what they protect has
    every failure blocking. `cond`: the record's block or its JSON form (a test-time record's)."""
    cond = as_conditioning(cond)
    rows = []
    blocking = (cond.blocking if cond else None) or BLOCKING  # a record of another law's checks names its own
    for c in cond.checks if cond else []:
        protects = str(c.protects or "")
        status = "ok" if c.ok else ("warn" if protects and protects not in blocking else "FAIL")
        rows.append((status, protects, str(c.name), shown_value(c.value), shown_value(c.target)))
    return rows


def closing_lines(cond: Conditioning | dict) -> list[str]:
    """The lines after the checks: each warning, each delta-phi's MDE (with the formula), and last the verdict."""
    cond = as_conditioning(cond) or Conditioning([], [], None, False)
    lines = [f"warning: {w}" for w in cond.warnings]
    for g, a in (cond.delta_phi or {}).items():
        if a.mde is not None:
            lines.append(
                f"minimum detectable |Δφ{'' if g == 'phi' else f'[{g}]'}| of this design: {a.mde:.3f} "
                f"(80% power, 5% two-sided: {MDE_FACTOR:.2f} x se {a.se:.3g} from the {a.source})"
            )
    return [*lines, str(cond.verdict or ("measured" if cond.measured else "not measured"))]


def verdict_lines(cond: Conditioning | dict | None) -> list[str]:
    """A fit record's conditioning as plain text: one line per check, the warnings and MDEs, the verdict last."""
    if not cond:
        return ["not measured: the fit record has no conditioning checks (fitted before they existed: refit)"]
    lines = ["conditioning:"]
    for status, protects, name, value, target in verdict_rows(cond):
        where = f"[{protects}] " if protects else ""
        lines.append(f"  {status:<4}  {where}{name}: {value} (target {target})")
    return lines + closing_lines(cond)
