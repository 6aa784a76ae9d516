"""Which table and fits `notebooks/phi_diagnostics.ipynb` opens.

After `make demo` the notebook shows the user's own result: runs/demo/runs.csv with its fit.json and
fit_free.json. Without a demo it falls back to the test fixtures (a published-shaped synthetic sweep with
three recipes and a joint fit), so it always runs. LOOPSCALE_TABLE, LOOPSCALE_FIT,
LOOPSCALE_COMPARE (comma-separated fits), LOOPSCALE_FREE and LOOPSCALE_JOINT override any of them; an empty
value turns an optional one off. LOOPSCALE_ADVISE_COMPUTE (FLOPs) and LOOPSCALE_ADVISE_MAX_PARAMS (unique
parameters) set the budget of the advice section (default: the table's largest budget, no cap).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def diagnostics_inputs(root: str | Path = "..", env: Mapping[str, str] | None = None) -> dict:
    """{"source", "table", "fit", "compare" (list), "free", "joint", "advise_compute", "advise_max_params"
    (floats or None)} for a notebook in root/notebooks."""
    env = os.environ if env is None else env
    root = Path(root)
    demo = root / "runs" / "demo"
    fixtures = root / "tests" / "fixtures" / "plots"
    if (demo / "runs.csv").exists() and (demo / "fit.json").exists():
        free = demo / "fit_free.json"
        defaults = {
            "source": f"the demo's own runs ({demo})",
            "table": demo / "runs.csv",
            "fit": demo / "fit.json",
            "compare": "",
            "free": free if free.exists() else "",
            "joint": "",
        }
    else:
        defaults = {
            "source": f"the test fixtures ({fixtures}); run `make demo` to see your own",
            "table": fixtures / "runs.csv",
            "fit": fixtures / "fit.baseline.json",
            "compare": f"{fixtures / 'fit.tbptt.json'},{fixtures / 'fit.hyper.json'}",
            "free": fixtures / "free.baseline.json",
            "joint": fixtures / "fit.joint.json",
        }
    keys = ("table", "fit", "compare", "free", "joint")
    chosen = {k: str(env.get(f"LOOPSCALE_{k.upper()}", defaults[k])) for k in keys}
    if any(f"LOOPSCALE_{k.upper()}" in env for k in keys):
        defaults["source"] = "LOOPSCALE_* environment variables, " + defaults["source"]
    return {
        "source": defaults["source"],
        "table": chosen["table"],
        "fit": chosen["fit"],
        "compare": [p for p in chosen["compare"].split(",") if p],
        "free": chosen["free"] or None,
        "joint": chosen["joint"] or None,
        **{k: float(env[f"LOOPSCALE_{k.upper()}"]) if env.get(f"LOOPSCALE_{k.upper()}") else None for k in ADVICE_KEYS},
    }


ADVICE_KEYS = ("advise_compute", "advise_max_params")
