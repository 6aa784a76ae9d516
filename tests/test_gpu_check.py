"""benchmarks/gpu_check.py in its CPU smoke mode, as a subprocess, so the prepared GPU check cannot rot: every
section runs at tiny sizes and passes its own checks, and the JSON it writes holds every section."""

from __future__ import annotations

import json

import pytest
from conftest import REPO_ROOT
from train_helpers import run_python


@pytest.mark.slow  # 45 s; every section of the prepared GPU check at toy size
def test_gpu_check_smoke_runs_every_section(tmp_path, data_dir):
    out = tmp_path / "gpu_check.json"
    proc = run_python(
        [
            REPO_ROOT / "benchmarks" / "gpu_check.py",
            "--smoke",
            "--out",
            out,
            "--workdir",
            tmp_path,
            "--data-dir",
            data_dir,
        ],
        cwd=tmp_path,
        timeout_s=900,
    )
    assert out.exists(), proc.stderr[-3000:]
    sections = json.loads(out.read_text())["sections"]
    assert list(sections) == ["device", "memory", "dtypes", "recompile", "throughput", "optimizer", "resume"]
    failed = {name: r.get("error", r) for name, r in sections.items() if not r["ok"]}
    assert not failed and proc.returncode == 0, failed
    assert sections["dtypes"]["hyper r4"] == ["torch.float32"]
    assert sections["recompile"]["limit_hits"] == []
    assert sections["resume"]["resumed_from_step"] == 5 and sections["resume"]["grad_accum"] == 2
    assert all(row["tokens_per_s"] > 0 for row in sections["throughput"]["rows"])
    assert "section" in proc.stdout and "resume" in proc.stdout.split("section")[-1]
