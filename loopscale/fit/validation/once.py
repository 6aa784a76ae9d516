"""The loop against its block run once, at equal data: the law-free check of what r passes are worth (issue 54).

A looped run has k / r unique middle layers run r times; its **once-stack** is the r = 1 model of the same width,
prelude and coda whose middle is that block run once (depth p + k / r + c). Trained on the same tokens D, the looped
run beats its once-stack exactly when its extra passes are worth something: in the law's terms m_r > 1, phi > 0,
read without A N^-alpha (which the iso-depth grid measures across widths, so a phi from it is a width-based reading
of a depth effect). Each looped run's gain is L_once(D) - L_looped (nats; positive: the passes pay), L_once read at
the looped run's own D linearly in ln D between its once-stack's runs, and beyond them along the end segment's slope
by at most a factor EXTRAPOLATE in D (a looped run's injection costs FLOPs, so at one budget it sees a few % fewer
tokens than its r = 1 stacks).

Train the once-stacks on the grid's tokens (the demo's: docs/results.md, "The optimizer at the demo's scale"):
    loopscale-train -m experiment=isodepth_cpu_demo model.r=1 model.depth=6,4,3 point=C2.5e11-d24 model.d_model=24 \\
        budget.fork_flops=null 'budget.fork_tokens=[369664,524288,740352]' 'run_name=once-L${model.depth}-d24'
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np
import pandas as pd

NEEDS = ("r", "D", "L", "width", "n_rec")  # the runs table's columns (loopscale collect)
SHAPE = ("width", "n_prelude", "n_coda")  # what a once-stack shares with its looped run, where the table has it
EXTRAPOLATE = 1.25  # how far past its once-stack's tokens a looped run is still read (factor in D)


class OnceRow(TypedDict):
    r: int
    block_layers: int
    width: float
    D: float
    L_looped: float
    L_once: float
    gain: float  # L_once - L_looped, nats: > 0 when the r passes beat one


class OnceSummary(TypedDict):
    r: int
    block_layers: int
    runs: int
    mean_gain: float
    min_gain: float
    max_gain: float
    better: int  # looped runs that beat their once-stack


class OnceSection(TypedDict):
    rows: list[OnceRow]
    by_r: list[OnceSummary]
    skipped: int  # looped runs with a once-stack whose tokens do not reach theirs


def loss_at(D_once: np.ndarray, L_once: np.ndarray, D: float) -> float | None:
    """L of a once-stack at D: linear in ln D through its (D, L) points (seeds of one D averaged), the end segment's
    slope within a factor EXTRAPOLATE past them; None farther out or with one D."""
    frame = pd.DataFrame({"x": np.log(D_once), "L": L_once}).groupby("x", as_index=False)["L"].mean()
    x, L = frame["x"].to_numpy(), frame["L"].to_numpy()
    at = np.log(D)
    if len(x) < 2 or at < x[0] - np.log(EXTRAPOLATE) or at > x[-1] + np.log(EXTRAPOLATE):
        return None
    i = int(np.clip(np.searchsorted(x, at) - 1, 0, len(x) - 2))  # the segment at D, or the end one past the range
    return float(L[i] + (L[i + 1] - L[i]) * (at - x[i]) / (x[i + 1] - x[i]))


def once_section(table: pd.DataFrame) -> OnceSection | None:
    """Each looped run against its once-stack (module docstring), and per r the gain's mean, range and count of
    wins; None when the table lacks a column it reads or has no once-stack of any looped run."""
    if any(c not in table.columns for c in NEEDS):
        return None
    shape = [c for c in SHAPE if c in table.columns]
    r = table["r"].to_numpy(dtype=float)
    dense, looped = table[r == 1], table[r > 1]
    rows, skipped = [], 0
    for _, run in looped.iterrows():
        same = (dense[shape] == run[shape]).all(axis=1) & (dense["n_rec"] == run["n_rec"])
        once = dense[same]
        if once.empty:
            continue
        L_once = loss_at(once["D"].to_numpy(dtype=float), once["L"].to_numpy(dtype=float), float(run["D"]))
        if L_once is None:
            skipped += 1
            continue
        rows.append(
            OnceRow(
                r=int(run["r"]),
                block_layers=int(run["n_rec"]),
                width=float(run["width"]),
                D=float(run["D"]),
                L_looped=float(run["L"]),
                L_once=L_once,
                gain=L_once - float(run["L"]),
            )
        )
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    by_r = [
        OnceSummary(
            r=int(r_),
            block_layers=int(g["block_layers"].iloc[0]),
            runs=len(g),
            mean_gain=float(g["gain"].mean()),
            min_gain=float(g["gain"].min()),
            max_gain=float(g["gain"].max()),
            better=int((g["gain"] > 0).sum()),
        )
        for r_, g in frame.groupby("r")
    ]
    return OnceSection(rows=rows, by_r=by_r, skipped=skipped)


def once_lines(section: OnceSection) -> list[str]:
    """The section as validate's markdown prints it."""
    out = [
        "Each looped run against the r = 1 stack of its width whose middle is its block run once, at the looped "
        "run's tokens D (linear in ln D between that stack's runs). Gain = L_once - L_looped: positive when the r "
        "passes are worth more than one (phi > 0), read without the law.",
        "",
        "| r | block layers | runs | gain, mean [min, max] (nats) | looped better |",
        "|---|---|---|---|---|",
    ]
    for s in section["by_r"]:
        out.append(
            f"| {s['r']} | {s['block_layers']} | {s['runs']} | {s['mean_gain']:+.4f} [{s['min_gain']:+.4f}, "
            f"{s['max_gain']:+.4f}] | {s['better']} of {s['runs']} |"
        )
    if section["skipped"]:
        out += ["", f"{section['skipped']} looped run(s) left out: their once-stack's tokens do not reach theirs."]
    return out
