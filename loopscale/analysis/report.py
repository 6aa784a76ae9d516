"""A short Markdown report of a sweep: the fitted law with its 95% intervals, the diagnostic figures,
the runs, and the runs that failed or are missing.

The law reported (docs/design.md):

    L = E + A * (N_once + r^phi * N_rec)^-alpha + B * D^-beta

Everything in the report is read from the runs table and the fit record (`loopscale fit --out`);
nothing is fitted or recomputed here beyond formatting (and 4^phi, to say what phi means).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from loopscale.analysis.published_laws import published_comparison
from loopscale.atomic import write_text_atomic
from loopscale.fit.laws.registry import find_law
from loopscale.fit.noise_text import noise_lines
from loopscale.fit.result import FitResult, file_sha256, load_fit, recorded_tables
from loopscale.fit.runs_table import budgets
from loopscale.fit.validation.text import markdown as validation_markdown
from loopscale.fit.verdict import shared_check_verdict
from loopscale.fit.verdict_record import Conditioning
from loopscale.fit.verdict_render import closing_lines, verdict_lines, verdict_rows

# Runs-table columns shown in the report, in order (those the table has).
RUN_COLUMNS = ("recipe", "r", "width", "C_budget", "C", "N_once", "N_rec", "N", "D", "L", "steps", "seed")
CAPTIONS = {
    "iso_flop": "iso-FLOP curves: loss vs N at each budget (budgets binned into at most 9 panels), a colour per r "
    "and a marker per recipe; lines are the fitted law.",
    "collapse": "Collapse: L - B D^-beta vs N_eff at the fitted phi (a joint fit: each recipe at its own phi), "
    "phi = 0 and phi = 1. All r on one curve at the fitted phi is the visual test of the law.",
    "phi_profile": "The objective profiled in phi (a joint fit: in delta-phi per recipe) with its 95% interval, "
    "and the bootstrap replicates.",
    "residuals": "Residuals log L - log L_hat by r and by budget (and free multipliers k_r against r^phi, given a "
    "looped-free fit).",
    "delta_phi": "phi across recipes, and its difference from the first, with 95% intervals.",
    "loop_gap": "The loop's price at equal tokens: L(r) - L(1) of runs that share a width and a budget with an r = 1 "
    "run, against N_c = N_once + r N_rec (points), and the fitted law's (dashed). r^phi has it shrink with size.",
    "compute_optimal": "Compute-optimal N* and D* vs C for each r (lines), with the best run at each budget.",
}


def fmt(x: Any, digits: int = 4) -> str:
    """A number for a table: `digits` significant digits; text and missing values as they are."""
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return ""
    if isinstance(x, (int, np.integer)) and abs(int(x)) < 10**6:
        return str(int(x))
    if isinstance(x, (float, np.floating, int, np.integer)):
        return f"{float(x):.{digits}g}"
    return str(x)


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; cells are formatted with `fmt` and '|' escaped."""

    def cell(v):
        return fmt(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def parameter_table(fit) -> pd.DataFrame:
    """One row per fitted parameter: estimate and 95% bootstrap interval (NaN when not bootstrapped)."""
    fit = load_fit(fit)
    rows = []
    for name, value in fit.params.items():
        lo, hi = (fit.ci95 or {}).get(name) or (np.nan, np.nan)
        rows.append({"parameter": name, "estimate": value, "ci95_low": lo, "ci95_high": hi})
    return pd.DataFrame(rows, columns=["parameter", "estimate", "ci95_low", "ci95_high"])


def law_section(fit: FitResult) -> str:
    """The fitted law: formula (`Law.formula`; the law's name for a law this process does not know), parameter
    table with CIs, what phi means, and how far to trust it."""
    law = find_law(fit.law)
    out = ["## Fitted law", "", f"`{law.formula if law is not None else fit.law}`", ""]
    group = fit.group or {}
    if group.get("column"):
        out += [f"Fitted on the {fit.n_rows} runs with {group['column']} = {group.get('value')}.", ""]
    params = parameter_table(fit)
    out.append(
        markdown_table(
            ["parameter", "estimate", "95% CI"],
            [
                (
                    row.parameter,
                    row.estimate,
                    "" if np.isnan(row.ci95_low) else f"[{fmt(row.ci95_low)}, {fmt(row.ci95_high)}]",
                )
                for row in params.itertuples()
            ],
        )
    )
    n_boot = (fit.bootstrap or {}).get("n_replicates")
    out += [
        "",
        f"Intervals: percentile bootstrap over {n_boot} replicates."
        if n_boot
        else "Intervals: none (the fit was not bootstrapped).",
    ]
    if "phi" in fit.params:
        phi = fit.params["phi"]
        out += [
            "",
            f"phi = {phi:.3f}: looping the recurrent block r times is worth r^phi unique copies of "
            f"it, e.g. {4**phi:.2f} at r = 4 (phi = 1 would be 4, phi = 0 would be 1).",
        ]
    out += ["", *quality_lines(fit)]
    if fit.joint:
        out += ["", joint_section(fit)]
    return "\n".join(out)


def delta_phi_table(fit) -> pd.DataFrame:
    """One row per non-reference recipe of a joint fit: delta-phi from the joint fit (bootstrap CI,
    profile interval, LR p-value of delta-phi = 0) and from the separate fits (randomly paired
    bootstrap CI), with the ratio of the two CI widths."""
    fit = load_fit(fit)
    j = fit.joint or {}
    rows = []
    for g, d in j.get("delta_phi", {}).items():
        boot = d.get("bootstrap_ci") or [np.nan, np.nan]
        prof = [np.nan if v is None else v for v in (d.get("profile_interval") or [np.nan, np.nan])]
        sep = d.get("separate") or {}
        sep_ci = sep.get("ci") or [np.nan, np.nan]
        rows.append(
            {
                "recipe": g,
                "delta_phi": d["estimate"],
                "joint_ci95_low": boot[0],
                "joint_ci95_high": boot[1],
                "profile_low": prof[0],
                "profile_high": prof[1],
                "lr_p_value": d["lr_test"]["p_value"],
                "separate_delta_phi": sep.get("delta", np.nan),
                "separate_ci95_low": sep_ci[0],
                "separate_ci95_high": sep_ci[1],
                "width_ratio": (boot[1] - boot[0]) / (sep_ci[1] - sep_ci[0]),
            }
        )
    return pd.DataFrame(rows)


def joint_section(fit) -> str:
    """delta-phi from the joint fit next to the separate fits', and the shared-parameter check."""
    fit = load_fit(fit)
    j = fit.joint
    ref = j["reference"]
    runs = ", ".join(f"{k}: {v}" for k, v in j.get("n_rows_by_recipe", {}).items())
    out = [
        "### delta-phi across recipes (joint fit)",
        "",
        f"One law over the recipes in `{j['column']}` ({runs} runs): E, A, alpha, B, beta shared, one phi "
        f"per recipe; delta-phi = phi[recipe] - phi[{ref}].",
        "",
    ]
    t = delta_phi_table(fit)

    def interval(lo, hi):
        return "" if np.isnan(lo) and np.isnan(hi) else f"[{fmt(lo) or 'open'}, {fmt(hi) or 'open'}]"

    out.append(
        markdown_table(
            [
                "recipe",
                "delta-phi",
                "joint bootstrap 95% CI",
                "joint profile 95%",
                "LR p (delta-phi = 0)",
                "separate fits",
                "separate 95% CI",
                "CI width joint / separate",
            ],
            [
                (
                    r.recipe,
                    r.delta_phi,
                    interval(r.joint_ci95_low, r.joint_ci95_high),
                    interval(r.profile_low, r.profile_high),
                    fmt(r.lr_p_value, 3),
                    r.separate_delta_phi,
                    interval(r.separate_ci95_low, r.separate_ci95_high),
                    fmt(r.width_ratio, 3),
                )
                for r in t.itertuples()
            ],
        )
    )
    chk = j.get("shared_check")
    if chk:
        verdict = shared_check_verdict(chk)
        out += [
            "",
            f"- shared-parameter check: joint fit vs the separate fits, robust LR statistic "
            f"{fmt(chk['statistic'], 3)} on {chk['df']} df, p = {fmt(chk['p_value'], 3)}: {verdict}.",
        ]
    return "\n".join(out)


def quality_lines(fit: FitResult) -> list[str]:
    """Bullet points on how far the fit can be trusted, from what the fitter recorded."""
    lines = [
        f"- objective (sum of Huber residuals) {fmt(fit.objective)}, gradient norm at the optimum "
        f"{fmt(fit.grad_norm, 2)}; {fit.n_best_basin} of {fit.n_refined} refined starts reached the "
        f"best optimum ({fit.n_starts} screened); {fit.n_rows} runs."
    ]
    if fit.residual_rms_log is not None:
        lines.append(f"- RMS residual in log L: {fmt(fit.residual_rms_log, 3)}.")
    prof = fit.profile_phi or {}
    if prof.get("interval"):
        lo, hi = prof["interval"][:2]
        lines.append(f"- profile interval for phi (95%): [{fmt(lo) or 'below grid'}, {fmt(hi) or 'above grid'}].")
    hold = fit.holdout or {}
    if "mean_abs_rel_error" in hold:
        lines.append(
            f"- holdout: refit without the largest budget (C = {fmt(hold.get('held_out_budget'))}); "
            f"on its {hold.get('n_holdout')} runs the mean |relative error| is "
            f"{100 * hold['mean_abs_rel_error']:.2f}% (max {100 * hold['max_abs_rel_error']:.2f}%)."
        )
    noise = noise_lines(fit.noise)  # the seed sigma and how the fit used it, or that intervals omit seed noise
    lines += [f"- {line}" if not line.startswith(" ") else f"  - {line.strip()}" for line in noise]
    lines += [f"- warning: {w}" for w in fit.warnings or []]
    return lines


def figure_name(path: Path) -> str:
    """The figure a file holds (FIGURE name), with a report's prefix stripped (report_iso_flop -> iso_flop)."""
    stem = Path(path).stem
    return next((name for name in CAPTIONS if stem == name or stem.endswith(f"_{name}")), stem)


def figures_section(figures: Sequence[Path], out_dir: Path) -> str:
    """Each PNG figure as a relative image link (so the report and its figures can move together), with a
    link to its PDF when one was written."""
    out = ["## Figures", ""]
    paths = [Path(p) for p in figures]
    pdfs = {p.with_suffix("") for p in paths if p.suffix.lower() == ".pdf"}

    def rel(path: Path) -> str:
        return Path(os.path.relpath(path.resolve(), out_dir.resolve())).as_posix()

    for path in paths:
        if path.suffix.lower() == ".pdf" and path.with_suffix(".png") in paths:
            continue  # linked under its PNG
        caption = CAPTIONS.get(figure_name(path), path.stem)
        if path.with_suffix("") in pdfs and path.suffix.lower() != ".pdf":
            caption += f" ([PDF]({rel(path.with_suffix('.pdf'))}))"
        out += [f"![{path.stem}]({rel(path)})", "", caption, ""]
    return "\n".join(out).rstrip()


def conditioning_section(cond: Conditioning | dict | None) -> str:
    """The fit's conditioning as Markdown: the checks as a table (with what each protects), then the warnings,
    the minimum detectable delta-phi and the verdict, the same content `loopscale fit` prints
    (`loopscale.fit.verdict`: `verdict_rows`, `closing_lines`); "" when the record has none."""
    if not cond:
        return ""
    rows = verdict_rows(cond)
    out = ["## Can the fit be trusted?", ""]
    if rows:
        cells = [
            (name, protects, target, value, {"ok": "ok", "warn": "warning"}.get(status, "**FAILS**"))
            for status, protects, name, value, target in rows
        ]
        out += [markdown_table(["check", "protects", "target", "value", "result"], cells), ""]
    *notes, verdict = closing_lines(cond)
    out += [f"- {line}" for line in notes] + ([""] if notes else [])
    out.append(f"**verdict: {verdict}**")
    return "\n".join(out)


def conditioning_lines(cond: Conditioning | dict | None) -> list[str]:
    """The conditioning for the terminal (`loopscale report`): `verdict.verdict_lines`, the verdict last ([]
    without a block)."""
    if not cond:
        return []
    *lines, verdict = verdict_lines(cond)
    return [*lines, f"verdict: {verdict}"]


def published_section(fit: FitResult, table: pd.DataFrame | None = None) -> str:
    """A fit of a dense law (`Law.dense`: the chinchilla law) next to the published parameters
    (analysis/published_laws.py: quoted, not refitted), with each parameter set's RMS log residual on the runs
    of this report."""
    law = find_law(fit.law)
    if law is None or not law.dense:
        return ""
    headers, rows = published_comparison(fit.params, table)
    return "\n".join(
        [
            "### Published parameters",
            "",
            "The published columns are the papers' own figures (Hoffmann et al. 2022, Approach 3; Besiroglu et "
            "al. 2024, their replication on the points of Hoffmann et al.'s Figure 4 with the 5 highest losses "
            "dropped), quoted, not fitted here.",
            "",
            markdown_table(headers, rows),
        ]
    )


def runs_section(table: pd.DataFrame, drop_top_k: int = 0) -> str:
    """The runs, sorted by budget, r and size (drop_top_k: how many highest-loss rows were left out)."""
    cols = [c for c in RUN_COLUMNS if c in table and table[c].notna().any()]
    if len(table) and "N_rec" in table and (table["N_rec"] == 0).all() and (table["r"] == 1).all():
        cols = [c for c in cols if c not in ("r", "N_once", "N_rec")]  # a plain (chinchilla) table: N is all
    if len(table) == 0:
        return "## Runs\n\nNo finished runs."
    t = table.assign(_budget=budgets(table) if "C" in table else 0.0)
    t = t.sort_values(["_budget", "r", "N"] if "N" in t else ["_budget", "r"], kind="stable")
    header = f"## Runs\n\n{len(t)} finished runs; r in {{{', '.join(fmt(v) for v in sorted(t['r'].unique()))}}}"
    if "C" in table:
        header += (
            f"; {t['_budget'].nunique()} compute budgets from {fmt(t['_budget'].min())} to "
            f"{fmt(t['_budget'].max())} FLOPs"
        )
    if drop_top_k:
        header += f"; the {drop_top_k} highest-loss rows were left out (--drop-top-k {drop_top_k})"
    return header + ".\n\n" + markdown_table(cols, t[cols].itertuples(index=False))


def problems_section(problems: Sequence[dict], out_dir: Path) -> str:
    """Runs that did not finish (failed, diverged, incomplete): they are not in the fit."""
    if not problems:
        return "## Failed or missing runs\n\nNone: every run found in the sweep finished."
    rows = []
    for p in problems:
        run_dir = p.get("run_dir", "")
        try:
            run_dir = os.path.relpath(run_dir, out_dir)
        except ValueError:
            pass
        rows.append((run_dir, p.get("status", ""), p.get("reason", "")))
    return (
        f"## Failed or missing runs\n\n{len(rows)} run(s) did not finish and are not in the table:\n\n"
        + markdown_table(["run", "status", "reason"], rows)
    )


def input_warning(fit, sources: Sequence[Path]) -> str | None:
    """A line when the fit was not made from this report's table, else None. The fit records the table it
    was fitted on (`input`: path and sha256; a joint fit, each of its tables); the report reads `sources`
    (tables, or sweep dirs, whose table is the runs.csv `collect` writes there). Matched by content (sha256),
    so a table moved or renamed since still matches; a fit that records no input is not judged."""
    recorded = recorded_tables(load_fit(fit))
    if not recorded:
        return None
    tables = [Path(s) if Path(s).is_file() else Path(s) / "runs.csv" for s in sources]
    ours = {file_sha256(t) for t in tables if t.is_file()}
    if ours & {t["sha256"] for t in recorded}:
        return None
    theirs = ", ".join(f"{t.get('path')} (sha256 {t['sha256'][:12]})" for t in recorded)
    mine = ", ".join(str(t) + ("" if t.is_file() else " (none)") for t in tables)
    return (
        f"the fit was made from {theirs}, not from this report's table {mine}: its law and verdict may not "
        "describe these runs (fit this table, or give the fit's own table)"
    )


def build_report(
    table: pd.DataFrame,
    fit=None,
    figures: Sequence[Path] = (),
    out_dir=".",
    problems: Sequence[dict] | None = None,
    title: str = "loopscale report",
    conditioning: Conditioning | None = None,
    drop_top_k: int = 0,
    warnings: Sequence[str] = (),
    validation: dict | None = None,
) -> str:
    """The report as Markdown text. table: the runs table (as `collect` writes it); fit: a FitResult, its JSON
    dict, a path, or None; figures: figure paths (e.g. from `plots.save_all`: PNG and PDF), linked relative to
    out_dir; problems: the second value of `collect.collect(sweep_dir)` (None: the section is left out, as for a
    bare table); conditioning: the fit JSON's "conditioning" block (default: read from `fit` when it carries one);
    drop_top_k: how many highest-loss rows the table was read without (said in the report); warnings: lines shown
    above the law (input_warning); validation: a `loopscale validate` record (its section follows the checks)."""
    out_dir = Path(out_dir)
    parts = [f"# {title}", *(f"> **Warning:** {line}" for line in warnings)]
    if fit is not None:
        fit = load_fit(fit)
        cond = conditioning if conditioning is not None else fit.conditioning
        parts.append(law_section(fit))
        parts += [s for s in (published_section(fit, table), conditioning_section(cond)) if s]
    else:
        parts.append(
            "## Fitted law\n\nNo fit given (`loopscale fit TABLE --out FIT.json`, then "
            "`loopscale report ... --fit FIT.json`)."
        )
    parts += [validation_markdown(validation, heading="##")] if validation is not None else []
    if figures:
        parts.append(figures_section(figures, out_dir))
    parts.append(runs_section(table, drop_top_k))
    if problems is not None:
        parts.append(problems_section(problems, out_dir))
    return "\n\n".join(parts) + "\n"


def write_report(table: pd.DataFrame, fit=None, figures: Sequence[Path] = (), out_path="report.md", **sections) -> Path:
    """Write the Markdown report (`build_report`, its figures linked relative to out_path) to out_path and return
    it. `sections`: build_report's problems, title, conditioning, drop_top_k, warnings, validation."""
    out_path = Path(out_path)
    write_text_atomic(out_path, build_report(table, fit, figures, out_path.parent, **sections))
    return out_path
