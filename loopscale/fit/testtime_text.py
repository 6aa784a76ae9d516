"""A test-time record as the lines `fit --law testtime` prints: per model and joint, parameters with intervals and
the verdict; the shapes' held-out errors; the gain of one more pass; phi_tt when asked."""

from __future__ import annotations

from loopscale.fit.result_text import open_end
from loopscale.fit.verdict_render import verdict_lines


def testtime_lines(record) -> list[str]:
    """What `fit --law testtime` prints (`record`: a `testtime_record.TestTimeRecord` or its JSON form)."""
    lines = [f"test-time law ({record['shape']}): {record['formula']}"]
    fits = [(f"model {m}", f) for m, f in record["per_model"].items()]
    if record.get("joint"):
        fits.append((f"joint ({len(record['joint']['models'])} models, one rate)", record["joint"]))
    for title, fit in fits:
        lines.append(f"{title}: {fit['n_rows']} rows, {fit['n_free']} free parameters")
        for name, value in fit["params"].items():
            ci = fit["intervals"].get(name)
            held = " (held)" if _is_held(name, fit) else ""
            shown = f"[{open_end(ci[0], '.4g')}, {open_end(ci[1], '.4g')}]" if ci else "—"
            lines.append(f"  {name:<24} {value:>12.6g}  95% {shown}{held}")
        lines += ["  " + line for line in verdict_lines(fit["conditioning"])]
    shapes = record.get("shapes")
    if shapes and shapes.get("better"):
        errs = ", ".join(f"{s} {100 * e:.3g}%" for s, e in shapes["mean_abs_rel_error"].items() if e is not None)
        lines.append(
            f"held-out rows ({shapes['method']}, {len(shapes['rows'])} rows): mean |rel err| {errs}; "
            f"better: {shapes['better']}"
        )
    elif shapes is not None:
        lines.append("held-out rows: none can be left out without holding a parameter (shapes not compared)")
    for model, s in record["models"].items():
        k = min(range(len(s["curve_r"])), key=lambda i: abs(s["curve_r"][i] - s["quoted_r"]))
        lines.append(
            f"{model} ({s['trained']}): one more pass at r = {s['curve_r'][k]:g} gains "
            f"{s['gain_next_pass'][k]:.4g} (loss units)"
        )
    for model, p in (record.get("testtime_phi") or {}).items():
        if "reason" in p:
            lines.append(f"{model}: phi_tt not computed ({p['reason']})")
        else:
            lines.append(
                f"{model}: at r = {p['r']:g} one more pass is worth {p['params_worth_next_pass']:.4g} unique "
                f"parameters; phi_tt = {p['phi_tt']:.3g}"
            )
    return lines


def _is_held(name: str, fit) -> bool:
    internal = "log_tau" if name == "tau" else name
    return internal in fit["held"]
