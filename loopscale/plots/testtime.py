"""The test-time figure: loss against r_eval, one colour per model, its rows as points and its fitted test-time
law (`loopscale.fit.testtime`) as a line; fixed-r models drawn solid with their r_train marked, sampled-r models
dashed. Drawn from a canonical test-time table and its record; nothing is fitted here."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from loopscale.fit.laws.testtime import TestTime
from loopscale.fit.testtime_record import TestTimeRecord


def testtime_figure(table: pd.DataFrame, record: TestTimeRecord, ylabel: str = "loss") -> Figure:
    """One panel: every model's rows and its per-model fit over r_eval (log2 axis)."""
    fig = Figure(figsize=(7.0, 4.6), layout="constrained")
    ax = fig.subplots()
    models = sorted(record["per_model"], key=str)
    colours = [f"C{i % 10}" for i in range(len(models))]
    for model, colour in zip(models, colours):
        rows = table[table["model"].astype(str) == model]
        first = rows.iloc[0]
        fixed = bool(first["fixed"])
        trained = f"fixed r = {first['r_train']:g}" if fixed else "sampled r"
        label = f"{model} ({trained})"
        ax.scatter(rows["r_eval"], rows["L"], color=colour, marker="o" if fixed else "s", s=28, zorder=3, label=label)
        r = np.geomspace(rows["r_eval"].min(), rows["r_eval"].max(), 200)
        grid = pd.DataFrame({"r_eval": r, "model": model, "r_scale": first["r_scale"], "fixed": fixed})
        fitted = TestTime.predict_table(record["per_model"][model]["params"], grid)
        ax.plot(r, fitted, color=colour, ls="-" if fixed else "--", lw=1.3)
        if fixed:
            ax.axvline(first["r_train"], color=colour, lw=0.6, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(r"passes at evaluation $r_\mathrm{eval}$ (log$_2$)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"test-time law ({record['shape']}): points measured, lines fitted per model", fontsize=10)
    ax.legend(fontsize=8, frameon=False)
    return fig
