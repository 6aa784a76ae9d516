"""A fit record's `noise` block (`loopscale.fit.noise.noise_block`) as lines of text: what `loopscale fit`
prints and the report lists. Reads the record only (no numpy, no optimiser)."""

from __future__ import annotations

from loopscale.fit.record_blocks import Noise


def noise_lines(noise: Noise | None) -> list[str]:
    """The seed noise in a few lines: the replicates, the sigma model of log L with sigma per r, how the fit used
    it; or the statement that the intervals omit seed noise. [] for a record written before the block existed."""
    if not noise:
        return []
    seeds = ", ".join(
        f"{n} with {k} seed{'s' if k != '1' else ''}"
        for k, n in sorted(noise.get("seeds_per_point", {}).items(), key=lambda kv: int(kv[0]))
    )
    head = f"seed noise: {noise.get('n_points')} points ({seeds}); {noise.get('dof', 0)} degrees of freedom"
    if noise.get("model") is None:
        return [head, f"  {noise['statement']}", *position_lines(noise.get("position_sigma"))]
    model = noise["model"]
    params = model["params"]
    if model["kind"] == "constant":
        form = f"{params['sigma']:.3g}"
    elif model["kind"] == "per r":
        form = ", ".join(f"r={r} {s:.3g}" for r, s in params["sigma_r"].items())
    else:
        x = params["covariate"].replace("_", " ")
        form = f"exp({params['a']:.3g} {params['b']:+.3g} ({x} - {params['x_mean']:.4g}))"
    lines = [
        head,
        f"  sigma of log L: {model['kind']} ({form}; rule: lowest AICc, another model must beat the constant by 2); "
        f"RMS {noise['sigma_log']:.3g}, i.e. {noise['sigma_L_nats']:.3g} nats of L",
    ]
    per_r = [
        f"r={r} {v['sigma_log']:.3g} ({v['sigma_L_nats']:.3g} nats, {v['n_replicated_points']} of {v['n_points']} "
        f"points repeated)"
        if v["sigma_log"] is not None
        else f"r={r} not repeated (model {v['model_sigma_log']:.3g})"
        for r, v in noise.get("per_r", {}).items()
    ]
    if per_r:
        lines.append("  per r, pooled from that r's points: " + "; ".join(per_r))
    used = f"  {noise['weights']}"
    if noise.get("lack_of_fit") is not None:
        used += f"; scatter about the law / seed noise S^2 = {noise['lack_of_fit']:.3g}"
    lines.append(used)
    scale = noise.get("scale")
    if scale:
        if scale["scale"] > 1:
            lines.append(
                f"  the law misses its points by more than seed noise: sigma x {scale['scale']:.3g} (the scatter "
                f"about the law, {scale['scatter_dof']} degrees of freedom) in the fit and its intervals"
            )
        lines.append(f"  profile intervals on F(1, {scale['reference_dof']}) (the degrees of freedom of the scale)")
    if noise.get("bootstrap"):
        lines.append(f"  bootstrap {noise['bootstrap']}")
    return lines


def position_lines(position: dict | None) -> list[str]:
    """`fit --curve-sigma position`: the sigma of log L by position along the run that weighed the curve fit
    (`loopscale.fit.position_sigma`); [] without it."""
    if not position:
        return []
    model = position["model"]
    params = model["params"]
    if model["kind"] == "per band":
        edges = params["edges"]
        form = ", ".join(f"{edges[i]:g}-{min(edges[i + 1], 1):g} {s:.3g}" for i, s in enumerate(params["sigma_band"]))
    elif model["kind"] == "constant":
        form = f"{params['sigma']:.3g}"
    else:
        form = f"exp({params['a']:.3g} {params['b']:+.3g} (ln share - {params['x_mean']:.4g}))"
    return [
        f"  curve sigma by position (share of the job's steps): {model['kind']} ({form}), from the unweighted fit's "
        "residuals; the fit refitted on them standardised (Huber 1.345 on z), its intervals on their pooled scale",
    ]
