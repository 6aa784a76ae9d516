"""The one renderer of a fit record's conditioning (`loopscale.fit.verdict`): plain lines for `loopscale fit`,
`compare`, `report`'s terminal and the notebook (`verdict_lines`), and the same content for Markdown (`verdict_rows`,
`closing_lines`: `analysis.report.conditioning_section`). Each check with what it protects and its status ("ok",
"FAIL": it blocks the measurement, "warn": an extrapolation check), the warnings, each delta-phi's minimum
detectable difference with the formula's numbers, and the verdict last."""

from __future__ import annotations

from loopscale.fit.verdict import BLOCKING, MDE_FACTOR, shown_value


def verdict_rows(cond: dict) -> list[tuple[str, str, str, str, str]]:
    """(status, protects, name, value, target) per check: status "ok", "FAIL" (blocks the measurement) or
    "warn" (an extrapolation check: a warning). A record from before the checks said what they protect has
    every failure blocking."""
    rows = []
    blocking = tuple(cond.get("blocking") or BLOCKING)  # a record of another law's checks names its own
    for c in cond.get("checks") or []:
        if not isinstance(c, dict):
            continue
        protects = str(c.get("protects") or "")
        status = "ok" if c.get("ok") else ("warn" if protects and protects not in blocking else "FAIL")
        value, target = shown_value(c.get("value")), shown_value(c.get("target"))
        rows.append((status, protects, str(c.get("name", "")), value, target))
    return rows


def closing_lines(cond: dict) -> list[str]:
    """The lines after the checks: each warning, each delta-phi's MDE (with the formula), and last the verdict."""
    lines = [f"warning: {w}" for w in cond.get("warnings") or []]
    answers = cond.get("delta_phi") or {}
    for g, a in answers.items():
        if a.get("mde") is not None:
            lines.append(
                f"minimum detectable |Δφ{'' if g == 'phi' else f'[{g}]'}| of this design: {a['mde']:.3f} "
                f"(80% power, 5% two-sided: {MDE_FACTOR:.2f} x se {a['se']:.3g} from the {a['source']})"
            )
    return [*lines, str(cond.get("verdict") or ("measured" if cond.get("measured") else "not measured"))]


def verdict_lines(cond: dict | None) -> list[str]:
    """A fit record's conditioning as plain text: one line per check, the warnings and MDEs, the verdict last."""
    if not cond:
        return ["not measured: the fit record has no conditioning checks (fitted before they existed: refit)"]
    lines = ["conditioning:"]
    for status, protects, name, value, target in verdict_rows(cond):
        where = f"[{protects}] " if protects else ""
        lines.append(f"  {status:<4}  {where}{name}: {value} (target {target})")
    return lines + closing_lines(cond)
