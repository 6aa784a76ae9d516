"""Issue 29 (13): Lightning's device banner ("GPU available: False, used: False") once per job, not twice.
Lightning's top-level logger has a console handler of its own and its records also reach the root logger,
to which Hydra gives one: each line came out in both formats."""

from __future__ import annotations

from support.procs import run_loopscale
from support.train import TINY


def test_lightning_banner_once_per_job(tmp_path, data_dir):
    args = ["-m", "seed=0,1", *TINY, "budget.tokens=2048", f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}"]
    proc = run_loopscale(args, cwd=tmp_path, module="loopscale.train.entry", timeout_s=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert out.count("GPU available:") == 2, out[-3000:]  # two jobs, one banner each
    log = "".join(p.read_text() for p in (tmp_path / "runs").rglob("*.log"))
    assert log.count("GPU available:") == 2  # Hydra's job logs keep it
