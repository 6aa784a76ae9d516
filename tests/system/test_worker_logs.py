"""Issue 57: `make demo`'s log repeated Lightning's "GPU available / TPU available" banners and checkpoint restore lines
for every job (208 of 801 lines): the pool's workers keep them out of the terminal, and each job's own log,
run_dir/entry.log as loopscale-train writes it, keeps them. Two tiny jobs on two spawned workers, as the demo
trains (loopscale/launch/local_workers.py), in a child process whose output is the terminal's."""

from __future__ import annotations

from support.paths import REPO_ROOT
from support.procs import run_python


def test_pool_workers_keep_lightnings_banners_in_the_jobs_log(tmp_path, data_dir):
    runs = tmp_path / "runs"
    code = f"""
import sys
sys.path.insert(0, {str(REPO_ROOT / "tests")!r})
from support.train import TINY, train_config
from loopscale.launch.local_workers import train_in_workers
base = [*TINY, "budget.tokens=3072", "runs_dir={runs}", "data.data_dir={data_dir}"]
cfgs = [train_config([*base, f"seed={{s}}"]) for s in (0, 1)]
for cfg, record, wall_s in train_in_workers(cfgs, workers=2):
    print("trained", cfg.run_name, record["status"])
"""
    proc = run_python(["-c", code], cwd=tmp_path, timeout_s=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and out.count("trained ") == 2, out[-3000:]
    assert "GPU available" not in out and "TPU available" not in out, out[-3000:]
    logs = sorted(runs.rglob("entry.log"))
    assert len(logs) == 2 and all("GPU available" in log.read_text() for log in logs), logs
