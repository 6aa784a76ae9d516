"""Issue 29 (4): `loopscale demo experiment=X` was silently ignored (the demo's own experiment won); it is
refused in one line naming the command that runs X on the same worker pool, before anything is trained."""

from __future__ import annotations

import pytest

from support.cli import run_cli


@pytest.mark.parametrize("override", ["experiment=isodepth_cpu", "+experiment=mine", "experiment@_global_=mine"])
def test_demo_refuses_another_experiment(tmp_path, override):
    res = run_cli(["demo", "--out", tmp_path / "demo", override], cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    line = res.stderr.strip()
    assert line.startswith(f"loopscale demo: error: {override}: the demo trains experiment=isodepth_cpu_demo only")
    assert "hydra/launcher=local_pool" in line
    assert not (tmp_path / "demo").exists()  # nothing prepared, trained or written
