"""A tune's lr rule (`launch/tune.py` `TuneResult`) as `loopscale tune` shows it: a row per r, then the width
transfer and the tune's cost and noise."""

from __future__ import annotations

import math

from loopscale.launch.tune import TuneResult


def rule_table(result: TuneResult) -> tuple[list[str], list[list[str]]]:
    """(columns, one row per r) of the rule as `loopscale tune` shows it: its multiplier and interval (at the
    reference width when the rule is a width transfer, else the cells combined), each cell's own optimum, and
    whether the cells agree on one multiplier."""
    if result.record.get("axis") == "loop":
        return _loop_table(result)
    t = result.record.get("transfer") or {}
    at_ref = f" at d{t['ref_width']:g}" if t.get("used") else ""
    rows = []
    for r, entry in sorted(result.record["rule"].items(), key=lambda kv: int(kv[0])):
        interval = entry.get("interval")
        if t.get("used"):
            entry = {**entry, "best": math.exp(t["a"][float(r)])}
            interval = t["intervals_at_ref"][float(r)]
        cells = "; ".join(
            f"{cell} x{c['best']:.3g}{'' if c.get('bracketed') else ' (edge)'}"
            + (f" (x{', x'.join(f'{m:.3g}' for m in c['failed'])} did not train)" if c.get("failed") else "")
            for cell, c in entry["cells"].items()
            if c.get("best")
        )
        p = entry.get("heterogeneity_p")
        rows.append(
            [
                str(r),
                f"x{entry['best']:.3g}" if entry.get("best") else "-",
                f"[{interval[0]:.3g}, {interval[1]:.3g}]" if interval else "-",
                cells,
                "-" if p is None else f"{p:.2g}",
            ]
        )
    return ["r", f"multiplier{at_ref}", "95% interval", "cells (best, bracketed)", "cells agree (p)"], rows


def _loop_table(result: TuneResult) -> tuple[list[str], list[list[str]]]:
    """The loop axis' rule: a row per r, a column per cell: its optimum, 95% interval and edge."""
    cells = list(result.record["cells"])
    rows = []
    for r, entry in sorted(result.record["rule"].items(), key=lambda kv: int(kv[0])):
        row = [str(r)]
        for cell in cells:
            c = entry["cells"].get(cell) or {}
            interval = c.get("interval")
            span = f" [{interval[0]:.3g}, {interval[1]:.3g}]" if interval else ""
            row.append(f"x{c['best']:.3g}{span}{'' if c.get('bracketed') else ' (edge)'}" if c.get("best") else "-")
        rows.append(row)
    return ["r", *(f"lr_loop at {cell}" for cell in cells)], rows


def rule_lines(result: TuneResult) -> list[str]:
    """The lines below the rule's table: the width transfer's gamma (when fitted) and the tune's cost and noise."""
    t = result.record.get("transfer") or {}
    lines = []
    if "gamma" in t:
        lines.append(
            f"width transfer: ln best = a_r + gamma ln(width / {t['ref_width']:g}), gamma = {t['gamma']:.3f} +- "
            f"{t['gamma_se']:.3f} (chi2 {t['chi2']:.2f} on {t['dof']} dof): "
            + (
                "the rule (the multipliers above are at the reference width)"
                if t["used"]
                else "not the rule (|gamma| < 2 se)"
            )
        )
    cost = result.record["cost"]
    noise = result.record["noise"]
    return lines + [
        f"{cost['runs']} runs, {cost['flops']:.3g} FLOPs, {cost['runs_wall_s'] / 60:.1f} min of run wall time "
        f"({'answered from the rule file' if result.cached else f'{result.trained} trained now'}); "
        f"noise of one loss {noise['sigma_nats']} nats on {noise['dof']} dof"
    ]
