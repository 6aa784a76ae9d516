"""The same fit under counting conventions that change conclusions in the literature (docs/design.md, "Out
of sample: loopscale validate"; Li et al. 2025's checklist; nanochat's N* ~ C^0.37 / 0.54 / 0.70 by parameter
convention; Porian et al. 2024 on last-layer FLOPs): phi and Approach 2's N*(C) exponent per convention, each
flagged when it moves by more than its 95% interval's half-width. Pure refits of the same table.

- embedding and head in N: N_once + embedding + lm_head (Chinchilla counts every parameter; Kaplan and the
  published study leave them out). Reads `embedding` and `lm_head`, or `vocab_size` x `width` for each;
- injection in N_rec: the injection's N_once parameters (loopscale/injections/) move to N_rec, so r^phi scales
  them. Reads `injection` and `width` (and `r`);
- FLOPs without attention's T x T term: C - D x 4 d T (3 passes with gradient + 1 without). phi is unchanged
  (the law reads D); the iso-FLOP minima move. Reads `width`, `seq_len`, `n_prelude`, `n_coda`, `n_rec`,
  `bptt_k`;
- truncated passes at 6N (not 2N): C + D x 4 (r - bptt_k) (N_rec + 2 T d n_rec) for runs with truncated
  backprop. Same columns.

A column the table lacks can be given as one value for every row (`fill`, `validate --column NAME=VALUE`); a
convention whose columns are missing is listed with the reason.
"""

from __future__ import annotations

import math

import numpy as np

from loopscale.config.model import ModelConfig
from loopscale.errors import InputError, LoopscaleError, not_one_of
from loopscale.fit.runs_table import budget_column
from loopscale.fit.validation.approach2 import iso_flop_exponent
from loopscale.fit.validation.flags import Z_95, interval_half_width
from loopscale.fit.validation.forms import Form
from loopscale.fit.validation.record import ConventionRow, Conventions
from loopscale.fit.validation.refit import refit
from loopscale.injections.form import N_ONCE
from loopscale.injections.registry import form as injection_form

# the columns the conventions read: counts, and the injection's name (`validate --column NAME=VALUE` fills them)
COUNT_COLUMNS = ("seq_len", "vocab_size", "width", "depth", "n_rec", "r", "embedding", "lm_head")
MAY_BE_ZERO = ("n_prelude", "n_coda")
TEXT_COLUMNS = ("injection",)
Fill = dict[str, float | str]  # a column given one value for every row: a count (a whole float), or the injection


def fill_columns(items: list[str]) -> Fill:
    """NAME=VALUE pairs: a count the conventions read as a whole number (> 0; >= 0 for the prelude and coda layers),
    the injection as text; another name, or a count that is text, NaN, inf, negative or 0, is refused in one line
    (it gave a traceback, or "+0.000")."""
    out = {}
    known = (*COUNT_COLUMNS, *MAY_BE_ZERO, *TEXT_COLUMNS)
    for item in items:
        name, sep, value = (x.strip() for x in item.partition("="))
        if not sep or not name or not value:
            raise InputError(f"--column takes NAME=VALUE; got {item!r}")
        if name not in known:
            raise not_one_of("--column", name, known, error=InputError, what="a column the conventions read")
        if name in TEXT_COLUMNS:
            out[name] = value
            continue
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        least = 0 if name in MAY_BE_ZERO else 1
        if not (math.isfinite(number) and number == int(number) and number >= least):
            raise InputError(f"--column {name}={value}: {name} is a whole number {'>= 0' if least == 0 else '> 0'}")
        out[name] = number
    return out


class Missing(Exception):
    """A convention's columns are not in the table (the message names them)."""


def _column(table, name: str, fill: Fill) -> np.ndarray:
    if name in table.columns and not table[name].isna().all():
        return table[name].to_numpy()
    if name in fill:
        return np.full(len(table), fill[name])
    raise Missing(f"needs column {name!r} (or --column {name}=VALUE)")


def _floats(table, names, fill) -> list[np.ndarray]:
    return [np.asarray(_column(table, n, fill), dtype=float) for n in names]


def with_embedding(table, fill):
    if "embedding" in table.columns or "embedding" in fill:
        emb, head = _floats(table, ("embedding", "lm_head"), fill)
    else:
        vocab, width = _floats(table, ("vocab_size", "width"), fill)
        emb = head = vocab * width
    return table.assign(N_once=table["N_once"] + emb + head), "N_once + embedding + lm_head"


def injection_once(name: str, d_model: int, r: int) -> int:
    """The N_once parameters of injection `name` at width d_model and r passes (its spec's count)."""
    cfg = ModelConfig(
        d_model=int(d_model), head_dim=int(d_model), n_prelude=1, n_rec=1, n_coda=1, r=int(r), injection=name
    )
    return int(injection_form(name).counts(cfg)[N_ONCE])


def injection_in_rec(table, fill):
    names = _column(table, "injection", fill)
    width, r = _floats(table, ("width", "r"), fill)
    try:
        moved = np.array([injection_once(str(n), w, k) for n, w, k in zip(names, width, r)], dtype=float)
    except (LoopscaleError, ValueError, TypeError) as err:
        raise Missing(f"cannot count the injection's parameters: {str(err).splitlines()[0]}") from None
    return table.assign(N_once=table["N_once"] - moved, N_rec=table["N_rec"] + moved), "injection moved to N_rec"


def _passes(table, fill):
    width, T, p, c, r = _floats(table, ("width", "seq_len", "n_prelude", "n_coda", "r"), fill)
    try:
        (k,) = _floats(table, ("n_rec",), fill)
    except Missing:  # the iso-depth layout: L_eff = p + k r + c
        (depth,) = _floats(table, ("depth",), fill)
        k = (depth - p - c) / r
    bptt = np.asarray(table["bptt_k"], dtype=float) if "bptt_k" in table.columns else np.full(len(table), np.nan)
    grad = np.where(np.isfinite(bptt) & (bptt < r), bptt, r)
    return width, T, p, c, k, r, grad


def without_attention(table, fill):
    width, T, p, c, k, r, grad = _passes(table, fill)
    attn = 4 * width * T * (3 * (p + c + k * grad) + k * (r - grad))  # accounting.attention_flops_per_token
    if not (table["C"].to_numpy(float) > table["D"].to_numpy(float) * attn).all():
        raise Missing("the table's C does not hold attention's FLOPs (C <= D x attention): nothing to take out")
    return table.assign(C=table["C"] - table["D"] * attn), "C - D x attention (T x T)"


def truncated_at_6n(table, fill):
    width, T, p, c, k, r, grad = _passes(table, fill)
    extra = 4 * (r - grad) * (table["N_rec"].to_numpy(float) + 2 * T * width * k)
    if not (extra > 0).any():
        raise Missing("the table has no runs with truncated backprop: nothing changes")
    return table.assign(C=table["C"] + table["D"] * extra), "passes without gradient counted 6x"


CONVENTIONS = (
    ("embedding and head in N", with_embedding),
    ("injection in N_rec, not N_once", injection_in_rec),
    ("FLOPs without attention's T x T term", without_attention),
    ("truncated passes at 6N, not 2N", truncated_at_6n),
)


def convention_table(table, form: Form, params: dict[str, float], interval: dict, starts, fill=None) -> Conventions:
    """Each counting convention's recount of the table refitted (module docstring). starts: the fit's optima the
    refits start from."""

    fill = dict(fill or {})
    if "C_budget" not in table.columns:  # a FLOPs convention moves C: runs stay grouped by the budget they were given
        table = table.assign(C_budget=budget_column(table))
    base_a2 = iso_flop_exponent(table, params)
    hw = interval_half_width(interval.get("phi_interval"))
    if not {"N_once", "N_rec", "r"} <= set(table.columns):
        why = "the table has no N_once, N_rec and r (a dense law): nothing to recount"
        return {"rows": [{"convention": name, "reason": why, "flagged": False} for name, _ in CONVENTIONS],
                "flags": [], "phi_half_width": hw}  # fmt: skip
    recorded = {
        "phi": params.get("phi"),
        "delta_phi": 0.0,
        "a": base_a2["a"],
        "delta_a": None if base_a2["a"] is None else 0.0,
    }
    rows = [{"convention": "as recorded", "change": "", **recorded, "flagged": False, "reason": None}]
    flags = []
    for name, convert in CONVENTIONS:
        try:
            changed, what = convert(table, fill)
        except Missing as err:
            rows.append({"convention": name, "reason": str(err), "flagged": False})
            continue
        row = ConventionRow(convention=name, change=what, reason=None)
        if not np.array_equal(changed[["N_once", "N_rec"]].to_numpy(), table[["N_once", "N_rec"]].to_numpy()):
            refitted = refit(form, form.law.data_from_table(changed), starts)
            row["phi"] = refitted.get("phi")
            a2 = iso_flop_exponent(changed, refitted)
        else:  # the law reads N and D: a FLOPs convention leaves the fit as it is
            row["phi"] = params.get("phi")
            a2 = iso_flop_exponent(changed, params)
        row["delta_phi"] = None if row["phi"] is None or params.get("phi") is None else row["phi"] - params["phi"]
        row["a"] = a2["a"]
        row["delta_a"] = None if a2["a"] is None or base_a2["a"] is None else a2["a"] - base_a2["a"]
        over_phi = hw is not None and row["delta_phi"] is not None and abs(row["delta_phi"]) > hw
        a_hw = None if not base_a2.get("a_se") else Z_95 * base_a2["a_se"]
        over_a = a_hw is not None and row["delta_a"] is not None and abs(row["delta_a"]) > a_hw
        row["flagged"] = bool(over_phi or over_a)
        if over_phi:
            flags.append(f"{name}: phi moves by {row['delta_phi']:+.3f} (the interval's half-width is {hw:.3f})")
        if over_a:
            flags.append(f"{name}: the N*(C) exponent moves by {row['delta_a']:+.3f} (its half-width is {a_hw:.3f})")
        rows.append(row)
    return {"rows": rows, "flags": flags, "phi_half_width": hw}
