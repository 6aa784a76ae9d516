"""A fit record as the lines `loopscale fit` prints below its parameter table (the optimum, the bootstrap, the phi
profile, the holdout), and a joint fit's delta-phi lines with its shared-parameter check (`fit --joint`,
`compare JOINT`). Reads the record only (no optimiser)."""

from __future__ import annotations

from loopscale.fit.verdict import shared_check_verdict


def summary_lines(result) -> list[str]:
    """The optimum (rows, objective, gradient, starts in the best basin) and, when the record has them, the
    bootstrap, the phi profile interval and the held-out budget's errors."""
    lines = [
        f"rows {result.n_rows}; objective {result.objective:.6g} ({result.settings['loss']}"
        + (f", delta {result.settings['delta']:g}" if result.settings.get("delta") else "")
        + f"); |grad| {result.grad_norm:.2e}; {result.n_best_basin} of {result.n_refined} "
        f"refined starts reached the best optimum ({result.n_starts} screened)"
    ]
    if result.bootstrap:
        how = f"clusters of {result.bootstrap['cluster']}" if result.bootstrap.get("cluster") else "rows"
        lines.append(f"bootstrap: {result.bootstrap['n_replicates']} replicates resampling {how}")
    if result.profile_phi:
        lo, hi = result.profile_phi["interval"]
        lines.append(f"phi profile interval (robust LR, 95%): [{open_end(lo, '.4g')}, {open_end(hi, '.4g')}]")
    if result.holdout:
        h = result.holdout
        lines.append(
            f"holdout (budget {h['held_out_budget']:.3g}, {h['n_holdout']} runs): mean |rel "
            f"err| {h['mean_abs_rel_error']:.3%}, max {h['max_abs_rel_error']:.3%}"
        )
    return lines


def joint_lines(j) -> list[str]:
    """Plain-text lines for a joint fit's delta-phi (joint vs separate) and shared-parameter check."""
    lines = []
    ref = j["reference"]
    for g, d in j["delta_phi"].items():
        head = f"delta phi = phi[{g}] - phi[{ref}] = {d['estimate']:+.4g}"
        if d.get("bootstrap_ci"):
            lo, hi = d["bootstrap_ci"]
            head += f"; joint bootstrap 95% CI [{lo:+.4g}, {hi:+.4g}] (width {hi - lo:.4g}, se {d['se']:.3g})"
        lines.append(head)
        if d.get("profile_interval"):
            lo, hi = d["profile_interval"]
            lines.append(f"  joint profile 95% interval [{open_end(lo, '+.4g')}, {open_end(hi, '+.4g')}]")
        lr = d["lr_test"]
        lines.append(
            f"  LR test of delta phi = 0: statistic {lr['statistic']:.3g} (chi2, 1 df), p = {lr['p_value']:.3g}"
        )
        sep = d.get("separate")
        if sep:
            if sep.get("ci"):
                lo, hi = sep["ci"]
                lines.append(
                    f"  separate fits: delta phi = {sep['delta']:+.4g}, 95% CI [{lo:+.4g}, {hi:+.4g}] "
                    f"(width {hi - lo:.4g}, {sep['n_replicates']} randomly paired replicates)"
                )
            else:
                lines.append(f"  separate fits: delta phi = {sep['delta']:+.4g} (no CI without --bootstrap)")
    chk = j.get("shared_check")
    if chk:
        verdict = shared_check_verdict(chk)
        lines.append(
            f"shared-parameter check (joint vs separate fits): LR statistic {chk['statistic']:.3g} "
            f"({chk['df']} df), p = {chk['p_value']:.3g}: {verdict}"
        )
    return lines


def open_end(value, spec: str) -> str:
    """An interval's end, or "open" where the profile never crossed its threshold."""
    return "open" if value is None else format(value, spec)
