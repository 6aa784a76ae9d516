"""What `loopscale advise` shows: the table of one row per r (`advice_table`, also the notebook's), the verdict,
break-even and warnings as sentences (`summary_lines`) and the terminal's lines (`render`)."""

from __future__ import annotations

import pandas as pd

from loopscale.analysis.advise.advice import Advice


def advice_table(advice: Advice) -> pd.DataFrame:
    """One row per r: the advised model, its tokens, the predicted loss with its interval and the share of
    replicates in which that r is best."""
    record = advice.record
    share = record["best"].get("share") or {}
    rows = []
    for rec in record["per_r"]:
        if not rec["feasible"]:
            rows.append({"r": rec["r"], "note": rec["reason"]})
            continue
        m = rec["advised"]
        reps = rec.get("replicates") or {}
        rows.append(
            {
                "r": rec["r"],
                "d_model": m["d_model"],
                "N_unique": m["N_unique"],
                "N_eff": m["N_eff"],
                "D_tokens": m["D_tokens"],
                "tokens_per_param": m["tokens_per_unique_param"],
                "L": m["L"],
                "L_interval": m["L_interval"],
                "L_opt_interval": reps.get("L_opt"),
                "N_unique_interval": reps.get("N_unique"),
                "D_interval": reps.get("D_tokens"),
                "share_best": share.get(str(rec["r"]), share.get(rec["r"])),
                "binding": rec["binding"],
                "note": "best" if rec["r"] == record["best"]["r"] else "",
            }
        )
    return pd.DataFrame(rows)


def summary_lines(advice: Advice) -> list[str]:
    """The fit's verdict, the best r, the break-even and the warnings as sentences."""
    record = advice.record
    lines = [f"fit: {record['fit'].get('verdict') or 'no verdict recorded'}", f"best: {record['best']['verdict']}"]
    be = record.get("break_even")
    if be:
        lines.append(_break_even_line(be, "overall", f"r in {be['looped']}"))
    return lines + [f"note: {w}" for w in record["warnings"]]


def _break_even_line(be: dict, key: str, what: str) -> str:
    entry = be[key]
    C = be["compute_flops"]
    if entry["looping_always_wins"]:
        head = f"break-even at C = {C:.3g}: {what} beats r = 1 at every unique-parameter cap (also without one)"
    elif entry["looping_never_wins"]:
        head = f"break-even at C = {C:.3g}: r = 1 is never beaten by {what}, whatever the cap"
    else:
        head = f"break-even at C = {C:.3g}: below {entry['M']:.3g} unique parameters {what} beats r = 1"
    if "interval" in entry:
        lo, hi = entry["interval"]  # 0: r = 1 never beaten in that replicate; None: looping always wins
        if hi == 0:
            head += f" (r = 1 is never beaten in {entry['share_never']:.0%} of the replicates)"
        elif lo is None:
            head += f" ({what} beats r = 1 at every cap in {entry['share_always']:.0%} of the replicates)"
        else:
            lo_text, hi_text = (
                "never beaten" if v == 0 else "unbounded" if v is None else f"{v:.3g}" for v in (lo, hi)
            )
            head += f" ({be['level']:.0%} interval over the replicates: {lo_text} to {hi_text})"
    return head


def _span(interval) -> str:
    # None, or NaN where the table's column also holds an infeasible r's row (which has no interval)
    return f"[{interval[0]:.4g}, {interval[1]:.4g}]" if isinstance(interval, (list, tuple)) and interval else "-"


def render(advice) -> list[str]:
    """The terminal table: one row per r, then the verdict, the break-even and the notes."""
    record = advice.record
    cons, fam = record["constraints"], record["family"]
    cap = f"{cons['max_unique_params']:.3g}" if cons["max_unique_params"] else "none"
    serving = (
        f", inference <= {cons['max_inference_flops']:.3g} FLOPs/token" if cons["max_inference_flops"] else ""
    ) + (f", lifetime cost with {cons['inference_tokens']:.3g} tokens served" if cons["inference_tokens"] else "")
    lines = [
        f"advice for C = {cons['compute_flops']:.3g} FLOPs, unique-parameter cap {cap}{serving}; family {fam['name']} "
        f"({fam['recipe']}, widths in steps of {fam['width_step']}); fit {record['fit']['law']}",
        f"{'':1} {'r':>2} {'d_model':>7} {'N_unique':>9} {'N_eff':>9} {'D tokens':>9} {'D/N':>6} {'L':>7} "
        f"{'L interval':>18} {'N_unique interval':>20} {'D interval':>20} {'best':>5} binding",
    ]
    for row in advice_table(advice).to_dict("records"):
        if "d_model" not in row or row["d_model"] != row["d_model"]:  # infeasible r: its reason
            lines.append(f"  {row['r']:>2} {row['note']}")
            continue
        share = (
            "-" if row["share_best"] is None or row["share_best"] != row["share_best"] else f"{row['share_best']:.0%}"
        )
        lines.append(
            f"{'*' if row['note'] == 'best' else ' '} {row['r']:>2} {row['d_model']:>7g} {row['N_unique']:>9.3g} "
            f"{row['N_eff']:>9.3g} {row['D_tokens']:>9.3g} {row['tokens_per_param']:>6.3g} {row['L']:>7.4f} "
            f"{_span(row['L_interval']):>18} {_span(row['N_unique_interval']):>20} {_span(row['D_interval']):>20} "
            f"{share:>5} {row['binding'] if isinstance(row['binding'], str) else '-'}"
        )
    return lines + summary_lines(advice)
