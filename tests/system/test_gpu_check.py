"""benchmarks/gpu_check.py in its CPU smoke mode, run exactly as the GPU node runs it (issue 34): from a `git
archive` of HEAD with an interpreter that has the node image's packages and the GPU bundle but not loopscale,
an empty HOME and no network (tests/support/bare_tree.py). Every section runs at tiny sizes (the production
points compiled with Dynamo's aot_eager backend, each in its own process) and passes its own checks, and the
JSON holds every section and every per-point field the GPU call reports. A point past its cap is killed and
keeps what it measured; the compile cache a point saves is loaded by the warm section (Inductor on CPU)."""

from __future__ import annotations

import json

import pytest

from support.bare_tree import archive, bare_python, node_site, run_bare

POINTS = ["s16-hyper-r8", "s34-r1", "s28-hyper-r8"]  # in order of value
POINT_FIELDS = {
    "point", "why", "status", "cache", "run", "d_model", "n_layer", "r", "compile", "backend", "device_batch",
    "grad_accum", "steps", "tokens_per_step", "startup_s", "time_to_first_step_s", "first_step_s", "step_s",
    "steady_samples", "steady_step_s", "tokens_per_s", "compile_s", "compile_phases_s", "compiled_graphs",
    "graph_breaks", "recompile_limit_hits", "flops_per_token", "causal_flops_per_token", "mfu", "memory",
    "problems", "ok", "wall_s",
}  # fmt: skip
MEMORY_FIELDS = {
    "terms", "predicted_peak_gib", "model_gib", "after_first_step_gib", "peak_allocated_gib", "peak_reserved_gib",
    "peak_ratio", "reserved_ratio", "implied_backward_bytes_per_d", "fits",
}  # fmt: skip
MODEL_TERMS = {"weights", "grads", "optimizer", "activations", "transient"}
CARDS = {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    root = tmp_path_factory.mktemp("bare")
    return archive("HEAD", root / "tree"), bare_python(root / "venv"), node_site(root / "site"), root / "home"


def _gpu_check(bare, tmp_path, *args, timeout_s: float = 1200):
    tree, python, site, home = bare
    out = tmp_path / "gpu_check.json"
    cmd = ["benchmarks/gpu_check.py", "--smoke", "--out", out, "--workdir", tmp_path / "work", *args]
    proc = run_bare(python, site, cmd, cwd=tree, home=home, timeout_s=timeout_s)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(out.read_text())["sections"]


@pytest.mark.slow  # 9 min at load 13 on 2 cores: the grid, three production children, the resume check (toy size)
def test_gpu_check_smoke_runs_every_section_from_the_bare_tree(bare, tmp_path):
    proc, sections = _gpu_check(bare, tmp_path)
    assert list(sections) == ["device", "production", "grid", "warm", "resume"]
    failed = {name: r.get("error", r) for name, r in sections.items() if not r["ok"]}
    assert not failed and proc.returncode == 0, json.dumps(failed, default=str)[-6000:]
    device = sections["device"]
    assert device["measured_bf16_flops"] > 0 and device["compile_probe"]["ok"]
    rows = sections["production"]["rows"]
    assert [r["point"] for r in rows] == POINTS
    for row in rows:
        assert POINT_FIELDS <= set(row), POINT_FIELDS - set(row)
        assert MEMORY_FIELDS <= set(row["memory"]) and set(row["memory"]["terms"]) == MODEL_TERMS
        assert set(row["memory"]["fits"]) == CARDS
        assert set(row["mfu"]) == {"datasheet", "datasheet_causal", "measured_peak", "measured_peak_causal"}
        assert row["mfu"]["measured_peak"] > 0  # CPU: no datasheet peak, the measured one
        assert row["status"] == "done" and row["steps"] == 5 and len(row["step_s"]) == 5
        assert row["steady_samples"] == 3 and row["tokens_per_s"] > 0 and row["grad_accum"] == 2
        assert row["compiled_graphs"] > 0 and row["graph_breaks"] == 0 and row["recompile_limit_hits"] == 0
        assert row["compile_s"] > 0 and row["time_to_first_step_s"] > row["first_step_s"] > 0
        assert row["cache"] == "cold"
    grid = sections["grid"]
    assert grid["jobs"] == 308 and set(grid["heaviest"]) == {"8", "16", "32"}
    assert sections["resume"]["resumed_from_step"] == 5 and sections["resume"]["optimizer"] == "muonh"
    assert "section" in proc.stdout and "resume" in proc.stdout.split("section")[-1]


@pytest.mark.slow  # 80 s: a point that trains far past its 60 s cap
def test_a_point_past_its_cap_is_killed_and_keeps_what_it_measured(bare, tmp_path):
    proc, sections = _gpu_check(
        bare, tmp_path, "--sections", "production", "--points", "s34-r1", "--steps", "100000", "--point-cap-s", "60"
    )
    assert proc.returncode == 1 and list(sections) == ["device", "production"]
    (row,) = sections["production"]["rows"]
    assert row["status"] == "timeout" and not row["ok"] and "60 s" in row["error"]
    assert row["log_tail"]  # the child's output up to the kill
    assert row["why"].startswith("throughput") and row["wall_s"] >= 60
    # what the child wrote before the kill: its steps so far, each timed
    assert len(row.get("step_s", [])) == row.get("steps_done", 0)


@pytest.mark.slow  # 4-5 min: Inductor compiles a toy block on CPU twice (cold, then warm from the saved cache)
def test_the_saved_compile_cache_is_loaded_by_a_fresh_process(bare, tmp_path):
    cache = tmp_path / "out"
    proc, sections = _gpu_check(
        bare, tmp_path, "--backend", "inductor", "--sections", "production,warm", "--points", "s16-hyper-r8",
        "--save-compile-cache", cache,
    )  # fmt: skip
    (cold,) = sections["production"]["rows"]
    assert cold["status"] == "done" and cold["cache"] == "cold" and cold["cache_saved"]["mib"] > 0, cold
    assert (cache / "compile-s16-hyper-r8.bin").stat().st_size < 16 * 2**20  # comes back from the node
    assert not cold["cache_counters"].get("inductor/fxgraph_cache_hit", 0) or cold["cache_counters"].get(
        "inductor/fxgraph_cache_miss"
    )  # cold: every graph compiled here first (later layers may hit what the first one wrote)
    (warm,) = sections["warm"]["rows"]
    assert warm["status"] == "done" and warm["ok"], warm
    assert warm["cache_loaded"]["file"] == "compile-s16-hyper-r8.bin" and warm["cache_loaded"]["artifacts"]
    hits = warm["cache_counters"]
    assert hits.get("aot_autograd/autograd_cache_hit", 0) + hits.get("inductor/fxgraph_cache_hit", 0) > 0, hits
    assert not hits.get("inductor/fxgraph_cache_miss") and not hits.get("aot_autograd/autograd_cache_miss"), hits
    assert set(warm["compile_s"]) == {"cold", "warm"} and warm["compile_s"]["warm"] > 0
