"""Every `loopscale` command once as a user runs it: `python -m loopscale COMMAND ...` in a child process
(`loopscale` the console script is the same `main`). What each command does, and every error case, is
tested in-process through loopscale.cli.main (support.cli.run_cli, in tests/unit and tests/integration);
here is what only a real process shows: the entry point, the command's imports in a fresh interpreter, the
exit code and the two streams as a shell sees them. `demo` runs as a process in test_demo.py and
test_demo_failures.py, `loopscale-train` in the tests marked `system` that train."""

from __future__ import annotations

import json
from pathlib import Path

from loopscale.train.run_json import TABLE_COLUMNS
from support.corpus import SMALL_PACK
from support.paths import FIXTURES
from support.procs import run_loopscale

PLOTS = FIXTURES / "plots"  # a runs table and real fits of it (tests/fixtures/plots/make_fixture.py)
SMALL = FIXTURES / "looped_synthetic_small.csv"


def loopscale(*args, cwd):
    """`python -m loopscale ARGS` in `cwd`; it must exit 0 without a traceback."""
    proc = run_loopscale(list(args), cwd=cwd, timeout_s=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def test_params(tmp_path):
    report = json.loads(loopscale("params", "--preset", "paper", "--size", "6", "--r", "2", cwd=tmp_path).stdout)
    assert (report["N_once"], report["N_rec"]) == (7_377_024, 14_161_920)


def test_data_prepare(data_dir):
    """The session's data cache (support/corpus.py) is `loopscale data prepare` run as a child process with
    the hub cut off; it holds the default corpus, finished."""
    assert [p for p in data_dir.glob("shakespeare-bpe2048-*") if (p / "meta.json").exists()]


def test_data_pack(tmp_path):
    out = loopscale(
        "data", "pack", "--data-dir", tmp_path / "cache", "--seq-len", "32", "--no-progress", *SMALL_PACK, cwd=tmp_path
    )
    first = out.stdout.splitlines()[0]
    assert first.startswith("packed ") and tmp_path / "cache" in Path(first.split(" ", 1)[1]).parents
    assert (Path(first.split(" ", 1)[1]) / "meta.json").exists()


def test_sweep_counts_the_published_grid(tmp_path):
    assert loopscale("sweep", "experiment=isodepth", "--count", cwd=tmp_path).stdout.strip() == "116"


def test_plan(tmp_path):
    # --no-probe: 12 CPU probes and a stand-in worker would be most of this smoke test's time (19 CPU s); the
    # probes are tests/unit/test_cost_probe.py's (and test_train_one_line.py's plans probe through the CLI)
    lines = loopscale("plan", "experiment=isodepth_cpu_wsd", "--json", "--no-probe", cwd=tmp_path).stdout.splitlines()
    total = json.loads(lines[-1])["total"]
    assert (total["jobs"], total["points"]) == (12, 60) and len(lines) == 13


def _record(i: int) -> dict:
    record = {col: float(10 + i) for col in TABLE_COLUMNS}
    record.update(r=1 + i, status="done", recipe="baseline", run_name=f"run{i}", injection=None, parent=None)
    return {**record, "run_dir": f"run{i}", "identity": f"{i:016x}"}


def test_collect_and_status(tmp_path):
    sweep = tmp_path / "sweep"
    for i in range(2):
        (sweep / f"run{i}").mkdir(parents=True)
        (sweep / f"run{i}" / "run.json").write_text(json.dumps(_record(i)))
    assert "2 finished runs" in loopscale("collect", sweep, cwd=tmp_path).stdout
    assert (sweep / "runs.csv").read_text().count("\n") == 3  # the header and two rows
    assert json.loads(loopscale("status", sweep, "--json", cwd=tmp_path).stdout)["counts"]["done"] == 2


def test_fit(tmp_path):
    loopscale("fit", SMALL, "--no-profile", "--out", tmp_path / "fit.json", cwd=tmp_path)
    assert json.loads((tmp_path / "fit.json").read_text())["law"] == "looped"


def test_compare(tmp_path):
    out = loopscale("compare", PLOTS / "fit.baseline.json", PLOTS / "fit.tbptt.json", cwd=tmp_path).stdout
    assert "delta phi = B - A" in out and "95% CI" in out


def test_equiv(tmp_path):
    out = loopscale("equiv", "--r", "4", "--n-once", "220e6", "--n-rec", "190e6", "--phi", "0.46", cwd=tmp_path)
    assert "N_eff = N_once + r^phi N_rec = 580M" in out.stdout


def test_advise(tmp_path):
    out = loopscale("advise", PLOTS / "fit.baseline.json", "--compute", "1e20", cwd=tmp_path).stdout
    assert out.startswith("advice for C = 1e+20 FLOPs")


def test_plot_and_report(tmp_path):
    loopscale("plot", PLOTS / "runs.csv", PLOTS / "fit.baseline.json", "--out", tmp_path / "figures", cwd=tmp_path)
    assert list((tmp_path / "figures").glob("*.png"))
    report = tmp_path / "report.md"
    loopscale("report", PLOTS / "runs.csv", "--fit", PLOTS / "fit.baseline.json", "--out", report, cwd=tmp_path)
    assert report.read_text().startswith("#")


def test_help_loads_no_heavy_library():
    """`loopscale --help` imports no figure, table or tensor library: it imports no command's module at all
    (loopscale/cli/__init__.py COMMANDS), and a command imports only its own (tests/unit/test_deferred_imports.py)."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom loopscale.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('matplotlib', 'pandas', 'scipy', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
