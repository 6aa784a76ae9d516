"""A validation record (`run.validate`) as Markdown: what `loopscale validate` prints and writes, and the
report's section (`analysis/report.py`). Reads the record only: no fitting, no optimiser."""

from __future__ import annotations

from loopscale.fit.validation.flags import delta_aicc, fold_rows, full_result
from loopscale.fit.validation.once import once_lines
from loopscale.fit.validation.record import Approach2, Conventions, LrSection, ValidationRecord


def _pct(x) -> str:
    return "-" if x is None else f"{x:.2%}"


def _num(x, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def forms_table(record: ValidationRecord) -> list[str]:
    """One row per form on the whole table: k, phi, AICc, its difference from the fit's law, BIC, and the mean
    held-out error over the budget and r folds."""
    lines = [
        "| form | k | phi | AICc | dAICc | BIC | unseen budgets | unseen r |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, form in enumerate(record.forms):
        full = full_result(record, i)
        if form["reason"] or not full or not full["ok"]:
            why = form["reason"] or (full or {}).get("reason") or "not fitted"
            lines.append(f"| {form['label']} | cannot: {why} | | | | | | |")
            continue
        info = full["information"]
        errors = []
        for kind in ("budget", "r"):
            done = [r["held_out"]["mean_abs_rel_error"] for r in fold_rows(record, i, kind) if r["ok"]]
            errors.append(_pct(sum(done) / len(done)) if done else "-")
        lines.append(
            f"| {form['label']} | {info['k']} | {_num(full['params'].get('phi'))} | {_num(info['aicc'], '.1f')} | "
            f"{_num(delta_aicc(record, i), '+.1f')} | {_num(info['bic'], '.1f')} | {errors[0]} | {errors[1]} |"
        )
    return lines


def folds_table(record: ValidationRecord) -> list[str]:
    """One row per (form, held-out fold): rows held out, mean and worst |error|, bias, error over the refit's own
    residuals, phi; a fold that cannot be done, with why."""
    lines = [
        "| form | held out | rows | mean abs error | worst | bias | x noise | phi |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for fold in record.folds:
        if fold["kind"] != "full" and fold["reason"]:
            lines.append(f"| every form | {fold['label']} | cannot: {fold['reason']} | | | | | |")
    for r in record.results:
        fold = record.folds[r["fold"]]
        if fold["kind"] == "full":
            continue
        label = record.forms[r["form"]]["label"]
        if not r["ok"]:
            lines.append(f"| {label} | {fold['label']} | cannot: {r['reason']} | | | | | |")
            continue
        h = r["held_out"]
        ratio = h["rms_log"] / max(r["train_rms_log"], 1e-12)
        lines.append(
            f"| {label} | {fold['label']} | {fold['n_test']} | {_pct(h['mean_abs_rel_error'])} | "
            f"{_pct(h['max_abs_rel_error'])} | {h['mean_rel_error']:+.2%} | {ratio:.1f} | "
            f"{_num(r['params'].get('phi'))} |"
        )
    return lines


def approach2_lines(a2: Approach2) -> list[str]:
    """Approach 2's table (per budget: its sizes, the window around the lowest, N* and its bootstrap interval)
    and the exponent with its interval, beside the law's."""
    lines = [
        f"Per budget: {a2.get('method', 'a parabola in ln N')}; 95% intervals from a parametric bootstrap "
        f"(sigma of log L {_num(a2.get('sigma_log'), '.3g')}, from {a2.get('sigma_source') or 'n/a'}).",
        "",
        "| budget C | sizes | window (N) | N* | 95% interval |",
        "|---|---|---|---|---|",
    ]
    for b in a2["budgets"]:
        win = "-" if not b.get("window") else f"{b['window'][0]:.3g}-{b['window'][1]:.3g} ({b['n_window']})"
        star = _num(b["N_star"], ".3g") if b["N_star"] else "none: " + str(b["reason"])
        interval = "-" if not b.get("interval") else f"[{b['interval'][0]:.3g}, {b['interval'][1]:.3g}]"
        lines.append(f"| {b['C']:.3g} | {b.get('n_sizes', '-')} | {win} | {star} | {interval} |")
    if a2["a"] is None:
        lines.append(f"\nApproach 2: no exponent ({a2['reason']}).")
    else:
        iv = a2.get("a_interval")
        span = f" [{iv[0]:.3f}, {iv[1]:.3f}]" if iv else ("" if a2["a_se"] is None else f" +- {1.96 * a2['a_se']:.3f}")
        lines.append(
            f"\nApproach 2: N* ~ C^{a2['a']:.3f}{span} (95%, weighted by each budget's se"
            + (
                f" and the budgets' scatter about the line, tau = {a2['tau_log']:.3f} in ln N*"
                if a2.get("tau_log")
                else ""
            )
            + f"); the law's beta / (alpha + beta) = {_num(a2['a_law'])}."
        )
        if a2.get("a_interp") is not None:
            lines.append(
                f"The interpolation rule (per budget the argmin of an Akima spline through every size, as in Porian "
                f"et al. 2024's released analysis; an unweighted line) gives C^{a2['a_interp']:.3f}."
            )
    return lines


def lr_lines(lr: LrSection) -> list[str]:
    if lr.get("reason"):
        return [f"No lr grid: {lr['reason']}."]
    lines = [
        f"Grid step x{_num(lr.get('step'), '.3g')}.",
        "",
        "| r | multipliers | best lr multiplier | 95% interval | steps from r = 1 | L shared lr | L best lr |",
        "|---|---|---|---|---|---|---|",
    ]
    for g in lr["groups"]:
        recipe = f" ({g['recipe']})" if "recipe" in g else ""
        interval = "-" if not g.get("interval") else f"[{g['interval'][0]:.3g}, {g['interval'][1]:.3g}]"
        best = _num(g.get("best"), ".3g") + (" (edge)" if g.get("at_edge") else "")
        mults = ", ".join(f"{m:.3g}" for m in sorted(set(g["multipliers"])))
        lines.append(
            f"| {g['r']:g}{recipe} | {mults} | {best} | {interval} | {_num(g.get('steps_from_r1'), '+.2f')} | "
            f"{_num(g.get('L_shared'), '.4f')} | {_num(g.get('L_best'), '.4f')} |"
        )
    shared = lr.get("phi_shared")
    for key, what in (("phi_best_points", "each r's grid point at its best lr"),
                      ("phi_penalty_all", "every run scaled by its r's lr penalty")):  # fmt: skip
        if lr.get(key) is not None and shared is not None:
            lines.append(
                f"\nphi with {what}: {lr[key]:.3f} (shared lr {shared:.3f}, |dphi| = {abs(lr[key] - shared):.3f})"
            )
    return lines


def convention_lines(conv: Conventions) -> list[str]:
    lines = ["| convention | phi | dphi | N*(C) exponent | d exponent | flagged |", "|---|---|---|---|---|---|"]
    for row in conv["rows"]:
        if row.get("reason"):
            lines.append(f"| {row['convention']} | cannot: {row['reason']} | | | | |")
            continue
        lines.append(
            f"| {row['convention']} | {_num(row['phi'])} | {_num(row['delta_phi'], '+.3f')} | {_num(row['a'])} | "
            f"{_num(row['delta_a'], '+.3f')} | {'yes' if row['flagged'] else ''} |"
        )
    hw = conv.get("phi_half_width")
    if hw is not None:
        lines.append(f"\nFlagged: a change beyond phi's interval half-width ({hw:.3f}) or the exponent's.")
    return lines


def table_line(record: ValidationRecord) -> str:
    """Which fit and which table(s): the table validated is named, not only the one the fit records."""
    fit = record.fit
    tables = record.get("tables") or ([fit["path"]] if fit.get("path") else [])
    made_from = f" (made from {fit['path']})" if fit.get("path") and [str(fit["path"])] != tables else ""
    on = f"validated on {', '.join(map(str, tables))}" if tables else "validated"
    return f"Fit {fit.get('json') or 'of the ' + fit['law'] + ' law'}{made_from}, {on}: {record.n_rows} rows."


def markdown(record: ValidationRecord, heading: str = "#") -> str:
    """The whole record as Markdown: the verdict, the forms, the folds, Approach 2, the lr grid, the conventions."""
    fit, v = record.fit, record.verdict
    interval = fit.get("phi_interval")
    h2 = heading + "#"
    out = [f"{heading} Validation of the {fit['law']} fit", ""]
    out += [table_line(record), ""]
    if record.get("seed_repeats"):
        reps = record["seed_repeats"]
        out += [f"seed repeats: {reps['n_rows']} rows averaged into {reps['n_points']} points (in log L), so the "
                "folds and the AICc count points, not seed copies.", ""]  # fmt: skip
    out += [f"- warning: {w}" for w in record.get("warnings") or []] + ([""] if record.get("warnings") else [])
    changed = (record.get("table_check") or {}).get("changed")
    if changed:
        out += ["**Changed table:** the table validated is not the one the fit was made from (its sha256 differs); "
                "validated on it by --allow-changed-table.", ""]  # fmt: skip
    if interval:
        ends = ", ".join("open" if x is None else f"{x:.3f}" for x in interval)  # a profile open on a side
        out += [f"phi interval ({fit['interval_source']}): [{ends}].", ""]
    out += [f"**Verdict:** {v['line']}.", ""]
    out += [f"- FLAG: {f}" for f in v["flags"]] or ["No flags: the law holds within its noise on every check."]
    out += ["", f"{h2} Rival forms on the whole table", "", *forms_table(record), ""]
    out += ["AICc and BIC from the Gaussian likelihood of each form's log residuals; dAICc against the fit's law "
            "(below -4: the form is clearly better; the MSE form minimises the squared residuals these criteria read, "
            "so its AICc is the lowest the fit's law can reach).", ""]  # fmt: skip
    out += [f"{h2} Held-out folds", "", *folds_table(record), ""]
    out += ["x noise: the held-out RMS log error over the refit's own residual RMS (flagged above 2).", ""]
    if record.get("approach2") is not None:  # none for a curves table (its runs are not iso-FLOP points)
        out += [f"{h2} Approach 2 (iso-FLOP parabolas, r = 1)", "", *approach2_lines(record["approach2"]), ""]
    if record.get("lr_confound") is not None:
        out += [f"{h2} The learning-rate confound", "", *lr_lines(record["lr_confound"]), ""]
    if record.get("once") is not None:
        out += [f"{h2} The loop against its block run once (equal data)", "", *once_lines(record["once"]), ""]
    if record.get("conventions") is not None:
        out += [f"{h2} Counting conventions", "", *convention_lines(record["conventions"]), ""]
    return "\n".join(out)
