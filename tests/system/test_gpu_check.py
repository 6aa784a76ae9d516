"""benchmarks/gpu_check.py in its CPU smoke mode, as a subprocess, so the prepared GPU check cannot rot: every
section runs at tiny sizes (the production runs compiled with Dynamo's aot_eager backend) and passes its own
checks, and the JSON it writes holds every section."""

from __future__ import annotations

import json

import pytest

from support.paths import REPO_ROOT
from support.procs import run_python


@pytest.mark.slow  # 2-3 min here: the grid plan, three production runs and a kill + resume at toy size
def test_gpu_check_smoke_runs_every_section(tmp_path):
    out = tmp_path / "gpu_check.json"
    proc = run_python(
        [REPO_ROOT / "benchmarks" / "gpu_check.py", "--smoke", "--out", out, "--workdir", tmp_path],
        cwd=tmp_path,
        timeout_s=900,
    )
    assert out.exists(), proc.stderr[-3000:]
    sections = json.loads(out.read_text())["sections"]
    assert list(sections) == ["device", "grid", "resume", "production"]
    failed = {name: r.get("error", r) for name, r in sections.items() if not r["ok"]}
    assert not failed and proc.returncode == 0, failed
    assert sections["grid"]["jobs"] == 308 and set(sections["grid"]["heaviest"]) == {"8", "16", "32"}
    assert sections["resume"]["resumed_from_step"] == 5 and sections["resume"]["optimizer"] == "muonh"
    rows = sections["production"]["rows"]
    assert [r["point"] for r in rows] == ["s16-hyper-r8", "s28-hyper-r8", "s34-r1"]
    assert all(r["tokens_per_s"] > 0 and r["grad_accum"] == 2 and r["compiled_graphs"] > 0 for r in rows)
    assert all(r["graph_breaks"] == 0 and r["recompile_limit_hits"] == 0 for r in rows)
    assert "section" in proc.stdout and "production" in proc.stdout.split("section")[-1]
