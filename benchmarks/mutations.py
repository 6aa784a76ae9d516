"""Mutation benchmark (issue 35): does a green suite mean what the docs promise? A curated list of
behaviour-level mutations of the code, each one a promise of README.md or docs/operations.md broken on
purpose; each is applied to a scratch copy of the tree and the tests that should catch it run against it.

    .venv/bin/python benchmarks/mutations.py                  # every mutation (~30 min on 2 busy cores)
    .venv/bin/python benchmarks/mutations.py --check          # do the snippets still apply? (seconds)
    .venv/bin/python benchmarks/mutations.py --only verdict-phi-width-never-fails,pool-stops-handing-out-jobs
    .venv/bin/python benchmarks/mutations.py --from ROUND.json -- -m "not slow and not slurm"   # a blind round
    make mutations MUTATION_ARGS="--only ..."

A mutation is data (MUTATIONS below): an id, the file, an exact snippet of it and its replacement, the tests
that must fail on it, and the promise it breaks. The scratch copy is the working tree's files (git's tracked
and untracked-but-not-ignored files) copied to a temporary folder, never the tree itself; the tests run there
with this venv's Python, `python -m pytest` from the copy, PYTHONPATH pointing at it (so the copy's loopscale,
not the editable install's, is what the tests and every child process they start import; checked before the
first mutation) and PYTHONDONTWRITEBYTECODE=1 (no stale bytecode of a file mutated twice in one second).

Per mutation: `caught` (a named test failed), `SURVIVED` (they all passed: the suite does not guard the
promise), `stale` (the snippet is not in the file, or not once: the code moved; update the snippet),
`not-run` (no test ran, so nothing measured it: every named test skipped, e.g. the full-disk tests without
root, or was deselected; never counted as caught), `broken` (pytest did not run the tests: a collection
error, no test of that name; or a named test fails on the clean copy, so the mutation cannot be measured) or
`timeout`. The clean copy is checked first: every named test runs on it once. Prints each mutation as it
finishes, then caught / applied, the survivors and the stale snippets; `--json PATH` writes the same. Exit 0
when every mutation was caught (none survived, none not-run, stale or broken), else 1.

When code moves (a refactor), update `old` / `new` of the entries it names; when a promise lands, add its
mutation. Keep snippets short and about behaviour (a comparison, a constant, a call), so they survive edits
around them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 1200.0  # one mutation's tests; a hang beyond this is reported as a timeout


@dataclass(frozen=True)
class Mutation:
    id: str
    file: str  # relative to the repository root
    old: str  # an exact snippet of the file, found exactly once
    new: str  # what replaces it
    tests: tuple[str, ...]  # pytest node ids or files that must fail
    promise: str  # what a user relies on that this breaks (README.md / docs/operations.md)


VERDICT = "loopscale/fit/verdict.py"
ISOFLOP = "loopscale/fit/isoflop.py"
T_VERDICT = "tests/unit/test_verdict.py"
ADVISE = "loopscale/analysis/advise/optimum.py"
T_ADVISE = "tests/unit/test_advise.py"
MEMORY = "loopscale/model/memory.py"
T_MEMORY = "tests/unit/test_memory.py"
POOL = "loopscale/launch/pool_launcher.py"
WORKERS = "loopscale/launch/local_workers.py"
WORKER_POOL = "loopscale/launch/worker_pool.py"
T_POOL = "tests/system/test_local_pool.py"
T_POOL_FAILED = T_POOL + "::test_a_failed_run_is_recorded_and_the_others_go_on_then_the_sweep_exits_1"
T_POOL_SIGTERM = T_POOL + "::test_sigterm_records_terminated_and_exits_143_with_the_longest_jobs_first"
T_RESAMPLE = "tests/unit/test_fit_resample.py"
T_JOBS = (
    T_RESAMPLE + "::test_jobs_runs_the_replicates_in_that_many_worker_processes_and_by_default_on_every_usable_core"
)
T_GOLDEN = "tests/unit/test_authors_golden.py"
T_IDENTITY = "tests/integration/test_run_identity.py"
T_COLLECT = "tests/integration/test_collect_records.py"
T_CHECKS_FIRST = "tests/integration/test_fit_checks_first.py"
T_DEMO_FAILURES = "tests/system/test_demo_failures.py"
T_POOL_STOPS = "tests/system/test_pool_stops.py"

MUTATIONS: tuple[Mutation, ...] = (
    # -- the twelve of issue 35 ------------------------------------------------------------------------
    Mutation(
        "advise-snaps-below",
        ADVISE,
        "candidates = np.stack([below, above], axis=1)",
        "candidates = np.stack([below, below], axis=1)",
        (T_ADVISE + "::test_paper_advice_is_the_best_valid_width_of_an_exhaustive_search",),
        "advise: the advised width is the best valid width (snapped to the better neighbour)",
    ),
    Mutation(
        "advise-within-noise-never",
        "loopscale/analysis/advise/advice.py",
        'out["within_noise"].append(r)',
        "pass",
        (
            T_ADVISE + "::test_a_close_call_is_within_the_noise_and_says_so",
            "tests/unit/test_advise_cli.py::test_a_close_call_prints_within_the_noise",
        ),
        'advise: the best r with its replicate share, or "within the noise"',
    ),
    Mutation(
        "verdict-joint-isoflop-always-ok",
        VERDICT,
        "        if iso is not None:\n            checks.append(iso)",
        "        if iso is not None:\n            checks.append(replace(iso, ok=True))",
        (T_VERDICT,),
        "a joint fit's verdict: each recipe's iso-FLOP minima inside the sampled sizes",
    ),
    Mutation(
        "verdict-phi-width-never-fails",
        VERDICT,
        "        width <= PHI_CI_WIDTH_MAX,",
        "        True,",
        (T_VERDICT,),
        "the verdict: phi's 95% interval at most 0.16 wide (separates the published recipes)",
    ),
    Mutation(
        "joint-dphi-jacobian-unmasked",
        "loopscale/fit/laws/looped_joint.py",
        "data.log_r * (data.recipe == g)",
        "data.log_r",
        ("tests/unit/test_law_hessians.py", "tests/unit/test_joint_groundtruth.py"),
        "a joint fit's delta-phi: the gradient of each recipe's phi on its own rows only",
    ),
    Mutation(
        "memory-activations-plus-12-percent",
        MEMORY,
        "    per_token = (22 * d if compiled else 40 * d) + mlp + 12 * heads + 8\n    return per_token * tokens\n",
        "    per_token = (22 * d if compiled else 40 * d) + mlp + 12 * heads + 8\n"
        "    return int(1.12 * per_token * tokens)\n",
        (T_MEMORY,),
        "memory model: activations within 0.3% of what autograd keeps",
    ),
    Mutation(
        "memory-activations-plus-5-percent",
        MEMORY,
        "    per_token = (22 * d if compiled else 40 * d) + mlp + 12 * heads + 8\n    return per_token * tokens\n",
        "    per_token = (22 * d if compiled else 40 * d) + mlp + 12 * heads + 8\n"
        "    return int(1.05 * per_token * tokens)\n",
        (T_MEMORY,),
        "memory model: activations within 0.3% of what autograd keeps",
    ),
    Mutation(
        "memory-transient-zero",
        MEMORY,
        "    return max(head, BACKWARD_BYTES_PER_D * cfg.d_model * tokens)",
        "    return 0",
        (T_MEMORY,),
        "memory model: the head chunk's transient is part of the peak",
    ),
    Mutation(
        "muonh-without-nesterov",
        "loopscale/train/optim/muonh.py",
        "nesterov = torch._foreach_lerp(grads, bufs, mu)",
        "nesterov = [b.clone() for b in bufs]",
        (T_GOLDEN,),
        "the published optimizer (MuonH with Nesterov momentum), bit for bit against the authors' code",
    ),
    Mutation(
        "muonh-norm-safety-1.05",
        "loopscale/train/optim/muonh.py",
        "NORM_SAFETY = 1.02",
        "NORM_SAFETY = 1.05",
        (T_GOLDEN,),
        "the published optimizer's Polar Express normalisation",
    ),
    Mutation(
        "pool-stops-at-the-first-failure",
        POOL,
        "    return JobResult(False, error=str(err) or type(err).__name__)",
        "    raise RuntimeError(str(err) or type(err).__name__)",
        (T_POOL_FAILED,),
        "local pool: a failed run is recorded and the sweep goes on (exit 1 at the end)",
    ),
    Mutation(
        "pool-stops-handing-out-jobs",
        WORKER_POOL,
        "                if worker is not None and pending:\n",
        '                if worker is not None and pending and getattr(result, "completed", True) is not False:\n',
        (T_POOL_FAILED,),
        "local pool: a failed run is recorded and the other jobs are still trained",
    ),
    Mutation(
        "fit-jobs-ignored",
        "loopscale/fit/task_pool.py",
        "        if jobs <= 1 or len(tasks) <= 1:",
        "        if True:",
        (T_JOBS,),
        "fit: bootstrap replicates over --jobs worker processes",
    ),
    Mutation(
        "usable-cores-ignores-affinity",
        "loopscale/machine.py",
        "return max(1, len(os.sched_getaffinity(0)))",
        "return max(1, os.cpu_count() or 1)",
        (
            "tests/unit/test_pool_size.py::test_usable_cores_is_the_affinity_mask_not_the_machine",
            T_JOBS,
        ),
        "every pool uses the cores of the process's affinity mask (a SLURM allocation, taskset)",
    ),
    # -- verdicts --------------------------------------------------------------------------------------
    Mutation(
        "verdict-bound-never-fails",
        VERDICT,
        "        not (low or high),",
        "        True,",
        (T_VERDICT, "tests/integration/test_fit_verdict.py"),
        "the verdict: E and phi off the bounds of the fitter's box",
    ),
    Mutation(
        "verdict-holdout-never-fails",
        VERDICT,
        "        mre <= limit,",
        "        True,",
        (T_VERDICT,),
        "the verdict: the held-out largest budget predicted within 3 sigma of the noise (a warning beyond)",
    ),
    Mutation(
        "verdict-forked-ungrouped-profile-accepted",
        VERDICT,
        '    if forked and not (profile or {}).get("groups"):',
        "    if False:",
        (T_VERDICT,),
        "the verdict: a forked sweep's interval must sum each parent's branches as one draw",
    ),
    Mutation(
        "verdict-delta-phi-always-real",
        VERDICT,
        "    if lo > 0 or hi < 0:",
        "    if True:",
        (T_VERDICT,),
        "the verdict: Δφ is real only when its 95% interval excludes 0",
    ),
    Mutation(
        "verdict-edge-minimum-never-within-noise",
        ISOFLOP,
        "within = margin <= Z_LEVEL * sigma_log",
        "within = margin < 0 * sigma_log",
        (T_VERDICT,),
        "the verdict: an iso-FLOP minimum on the edge by less than the noise is bracketed (seeds averaged)",
    ),
    Mutation(
        "verdict-edge-minimum-counts-as-inside",
        ISOFLOP,
        "    if k in (0, len(y) - 1):\n",
        "    if False:\n",
        (T_VERDICT, "tests/unit/test_conditioning.py"),
        "the verdict: each iso-FLOP minimum strictly inside the sampled sizes",
    ),
    Mutation(
        "fit-forked-default-cluster-rows",
        "loopscale/analysis/fitting.py",
        "        return PARENT_COLUMN\n",
        "        return None\n",
        ("tests/integration/test_fit_verdict.py::test_a_forked_sweep_is_bootstrapped_by_parent_job_by_default",),
        "fit: a forked sweep is bootstrapped by parent job by default",
    ),
    Mutation(
        "fit-profile-lower-point-ignored",
        "loopscale/fit/fit_table.py",
        "    if better is not None:\n        note = (",
        "    if False:\n        note = (",
        (T_CHECKS_FIRST + "::test_a_profile_below_the_fit_refits_from_there",),
        "fit: when the phi profile finds a lower objective, the fit moves there",
    ),
    # -- refusals before work --------------------------------------------------------------------------
    Mutation(
        "fit-holdout-too-few-rows-accepted",
        "loopscale/fit/uncertainty.py",
        "    if train.sum() < n_min:",
        "    if False:",
        (T_CHECKS_FIRST + "::test_holdout_that_leaves_too_few_rows_fails_before_any_solve",),
        "fit: a --holdout-largest that leaves too few rows fails in one line before any solve",
    ),
    Mutation(
        "fit-out-overwrites-its-input",
        "loopscale/atomic.py",
        "            if given is not None and same_file(path, given):",
        "            if False:",
        ("tests/integration/test_fit_outputs.py",),
        "fit: refuses an --out or --plot that is one of its input tables",
    ),
    Mutation(
        "pool-zero-workers-accepted",
        POOL,
        "value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1)",
        "value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)",
        ("tests/unit/test_pool_size.py::test_pool_size_refuses_nonsense",),
        "local pool: nonsense worker counts refused in one line before any run",
    ),
    # -- resume exactness, identity, locks, records -----------------------------------------------------
    Mutation(
        "resume-replays-from-step-0",
        "loopscale/data/windows.py",
        "        micro_step = self.start_step\n",
        "        micro_step = 0\n",
        (
            "tests/integration/test_datamodule.py::test_restarted_stream_continues_exactly_and_ranks_differ",
            "tests/integration/test_datamodule.py::test_lightning_resume_sees_the_batches_an_uninterrupted_run_saw",
        ),
        "relaunching resumes interrupted runs exactly where they stopped",
    ),
    Mutation(
        "identity-ignores-the-learning-rate",
        "loopscale/train/identity.py",
        '        "trainer.nan_at_step",\n',
        '        "trainer.nan_at_step",\n        "optim.lr",\n',
        (T_IDENTITY + "::test_identity_ignores_what_does_not_change_the_result",),
        "a run dir resumes or is skipped only when the relaunch has the same identity",
    ),
    Mutation(
        "identity-ignores-the-data",
        "loopscale/train/identity.py",
        "    identity = whole = {**identity_of(config), **(data or {})}",
        "    identity, whole = identity_of(config), {**identity_of(config), **(data or {})}",
        ("tests/integration/test_data_identity.py::test_a_run_refuses_to_resume_on_a_changed_corpus",),
        "a corpus edited after a kill is noticed, not trained on (the data's content hash in the identity)",
    ),
    Mutation(
        "lock-live-owner-taken-over",
        "loopscale/train/lock.py",
        "    if abs(age) > STALE_AFTER_S:",
        "    if abs(age) >= 0:",
        (T_IDENTITY + "::test_stale_and_live_locks_of_other_hosts",),
        'one process per run dir: a second launch prints "running elsewhere" and touches nothing',
    ),
    Mutation(
        "record-of-a-copy-trusted",
        "loopscale/train/run_json.py",
        "    if name is not None and name != run_dir.name:",
        "    if False:",
        (T_COLLECT + "::test_a_copied_run_dir_is_a_problem_not_a_second_row",),
        "a record is trusted only where it belongs: a copied run dir is a problem run, not a second row",
    ),
    Mutation(
        "collect-ignores-linked-runs",
        "loopscale/train/collect.py",
        "_walk(sweep_dir, followlinks=True)",
        "_walk(sweep_dir, followlinks=False)",
        (T_COLLECT + "::test_a_run_moved_to_scratch_and_linked_back_is_collected",),
        "collect follows symlinked run dirs (a run moved to scratch and linked back)",
    ),
    Mutation(
        "outputs-written-in-place",
        "loopscale/atomic.py",
        "        yield temps\n",
        "        yield [Path(p) for p in paths]\n        return\n",
        (T_COLLECT + "::test_a_full_disk_replaces_none_of_the_three_outputs",),
        "outputs are whole or absent: a full disk leaves the previous files intact",
    ),
    Mutation(
        "json-outputs-write-nan",
        "loopscale/atomic.py",
        "json.dumps(json_safe(value), indent=indent, sort_keys=sort_keys, default=str, allow_nan=False)",
        "json.dumps(value, indent=indent, sort_keys=sort_keys, default=lambda x: x.tolist())",
        ("tests/integration/test_power_cli.py::test_power_json_stays_strict_json_where_no_interval_closes",),
        "every JSON file loopscale writes is strict JSON (NaN as null): `power --json` where no interval closes",
    ),
    # -- advise's constraints -------------------------------------------------------------------------
    Mutation(
        "advise-unique-parameter-cap-ignored",
        ADVISE,
        "    if cons.max_unique_params is not None:",
        "    if False:",
        (T_ADVISE + "::test_binding_memory_cap_gives_the_capped_closed_form",),
        "advise: the loss-minimising model under --max-unique-params",
    ),
    Mutation(
        "advise-inference-cap-ignored",
        ADVISE,
        "    if cons.max_inference_flops is not None:",
        "    if False:",
        (T_ADVISE + "::test_inference_cap_and_lifetime_cost_against_a_brute_force_search",),
        "advise: the loss-minimising model under --max-inference-flops",
    ),
    # -- the pool's failures and signals ----------------------------------------------------------------
    Mutation(
        "pool-sigterm-recorded-as-interrupted",
        WORKER_POOL,
        "    raise Interrupted() if interrupted else Terminated()",
        "    raise Interrupted()",
        (T_POOL_SIGTERM,),
        'SIGTERM: the runs record "terminated", exit 143 (interrupted is Ctrl-C\'s)',
    ),
    Mutation(
        "pool-ctrl-c-recorded-as-terminated",
        WORKER_POOL,
        "        interrupt.value = 1\n",
        "        pass\n",
        (T_POOL + "::test_ctrl_c_stops_the_pool_and_records_interrupted",),
        'Ctrl-C: every worker\'s run records "interrupted", exit 130',
    ),
    Mutation(
        "pool-ctrl-c-line-per-worker",
        WORKER_POOL,
        "    stop_line_in_parent()  # one line for the sweep, the parent's, not one per worker\n",
        "",
        (T_POOL + "::test_ctrl_c_stops_the_pool_and_records_interrupted",),
        "Ctrl-C on the local pool: one line for the sweep (exit 130)",
    ),
    Mutation(
        "ctrl-c-before-the-pool-is-a-traceback",
        "loopscale/train/entry.py",
        '    except KeyboardInterrupt:\n        _exit_stopped("interrupted", EXIT_INTERRUPTED)\n'
        "    except Terminated:\n"
        '        _exit_stopped("terminated", EXIT_TERMINATED)\n\n\n@contextlib',
        "    finally:\n        pass\n\n\n@contextlib",
        (T_POOL_STOPS + "::test_a_stop_while_hydra_plans_the_jobs",),
        "Ctrl-C before a sweep's runs start: one line, exit 130 (no traceback)",
    ),
    Mutation(
        "test-children-inherit-an-ignored-ctrl-c",
        "loopscale/signals.py",
        "    signal.signal(signal.SIGINT, signal.default_int_handler)\n    try:\n        yield\n",
        "    try:\n        yield\n",
        (T_POOL_STOPS + "::test_a_stop_while_the_workers_start",),
        "the tests' Ctrl-C reaches the command they start, also when pytest runs in the background",
    ),
    Mutation(
        "workers-outlive-a-killed-parent",
        WORKER_POOL,
        "    die_with_parent(signal.SIGTERM, parent_pid)\n",
        "    pass\n",
        (T_DEMO_FAILURES + "::test_workers_end_when_the_demo_is_killed_outright",),
        "a pool's workers end when the process that started them is killed outright",
    ),
    Mutation(
        "pool-threads-ignore-trainer-num-threads",
        POOL,
        "threads_per_worker = job_threads if isinstance(job_threads, int) and job_threads > 0 else None",
        "threads_per_worker = None",
        (T_POOL_SIGTERM,),
        "local pool: threads_per_worker unset takes the sweep's trainer.num_threads",
    ),
    Mutation(
        "pool-shortest-job-first",
        "loopscale/launch/compile_order.py",
        "key=lambda i: -tokens[i]",
        "key=lambda i: tokens[i]",
        (T_POOL_SIGTERM,),
        "local pool: the longest jobs are handed out first (the ETA weighs jobs by tokens)",
    ),
    Mutation(
        "pool-eta-forked-job-weighs-its-parent-only",
        "loopscale/train/job_plan.py",
        "points, round(forks.C_forked / forks.F), forks.C_forked",
        "points, run.D, forks.C_forked",
        ("tests/unit/test_pool_size.py::test_a_jobs_share_of_the_eta_is_its_training_tokens",),
        "local pool: the ETA weighs a forked job by its parent's and every cooldown's tokens",
    ),
    Mutation(
        "sigterm-exit-code-1",
        "loopscale/signals.py",
        "EXIT_TERMINATED = 128 + signal.SIGTERM",
        "EXIT_TERMINATED = 1",
        ("tests/system/test_signals.py::test_sigterm_exits_143_and_the_record_says_terminated",),
        "SIGTERM (kill, a timeout, a scheduler's cancel) exits 143",
    ),
    # -- seeds ----------------------------------------------------------------------------------------
    Mutation(
        "windows-ignore-the-seed",
        "loopscale/data/windows.py",
        "np.random.default_rng([seed, step, rank])",
        "np.random.default_rng([0, step, rank])",
        ("tests/integration/test_datamodule.py::test_same_seed_same_batches_and_each_input_matters",),
        "a run's batches are a function of (seed, step, rank)",
    ),
    Mutation(
        "bootstrap-ignores-the-seed",
        "loopscale/fit/resample.py",
        "rng = np.random.default_rng([seed, k])",
        "rng = np.random.default_rng([0, k])",
        (T_RESAMPLE + "::test_chunks_draw_their_own_weights_whole_clusters_at_a_time",),
        "fit: the bootstrap's replicates are set by --seed (the same for any --jobs)",
    ),
    Mutation(
        "seeds-share-a-run-dir",
        "loopscale/config/naming.py",
        '    return "" if int(seed) == 0 else f"-seed{int(seed)}"',
        '    return ""',
        ("tests/integration/test_provenance.py::test_a_seed_sweep_with_the_default_run_name_trains_every_seed",),
        "runs that differ only in their seed never share a run dir (-m seed=0,1,2 trains every seed)",
    ),
    Mutation(
        "stop-behind-a-failed-clean-up-lost",
        "loopscale/train/entry.py",
        "        if stop is not None:  # a stop raised inside",
        "        if False:  # a stop raised inside",
        ("tests/unit/test_entry_stops.py",),
        "loopscale-train: a SIGTERM while Hydra plans the sweep is 143 and one line, not omegaconf's AttributeError",
    ),
    Mutation(
        "stops-while-importing-unhandled",
        "loopscale/train/command.py",
        "    raise_on_sigterm()\n    try:\n",
        "    try:\n",
        ("tests/system/test_pool_stops.py::test_a_stop_while_the_training_stack_imports",),
        "loopscale-train: a stop while torch, Lightning and Hydra import is 130 / 143 and one line",
    ),
    Mutation(
        "stop-inside-omegaconf-while-importing-lost",
        "loopscale/train/command.py",
        "        stop = stop_behind(err)\n",
        "        stop = None\n",
        ("tests/unit/test_entry_stops.py::test_a_stop_inside_omegaconf_while_hydra_imports_is_the_stop",),
        "loopscale-train: a stop that lands in omegaconf while Hydra's import stores its configs is 130 / 143",
    ),
    Mutation(
        "refusals-after-the-stack",
        "loopscale/train/command.py",
        "        refuse_before_the_stack(sys.argv[1:])\n",
        "",
        ("tests/unit/test_refusals.py::test_a_refused_launch_never_imports_the_training_stack",),
        "loopscale-train: an unsafe run name or config path is refused before torch and Lightning import",
    ),
    Mutation(
        "verdict-interval-on-the-box-closed",
        VERDICT,
        "    if box is not None and (ci[0] <= box[0] + ON_BOUND_TOL or ci[1] >= box[1] - ON_BOUND_TOL):",
        "    if False:",
        (T_VERDICT,),
        "the verdict: an interval with an end on the fitter's box is open (not measured), never real",
    ),
    Mutation(
        "figure-layout-left-frozen",
        "loopscale/plots/files.py",
        "        if engine is not None:\n            fig.set_layout_engine(engine)",
        "        pass",
        ("tests/unit/test_plots.py::test_write_figure_lays_out_once_and_leaves_the_figure_as_it_was",),
        "figures: a figure's PNG and PDF share one layout, and the figure keeps its layout engine afterwards",
    ),
    Mutation(
        "head-left-eager-when-compiled",
        "loopscale/train/compiling.py",
        "        model.head_backend = backend",
        "        pass",
        ("tests/integration/test_compile.py::test_a_compiled_model_compiles_its_head_with_its_backend",),
        "compiled training: a compiled model runs its head's chunk math compiled, with the model's backend",
    ),
    Mutation(
        "head-gradient-misses-the-softcap",
        "loopscale/model/head_loss.py",
        "        g = torch.ops.aten.tanh_backward(g, th)",
        "        g = g",
        (
            "tests/unit/test_head_loss.py::test_value_and_gradients_equal_the_unchunked_loss",
            "tests/unit/test_head_loss.py::test_the_compiled_chunk_math_equals_the_unchunked_loss",
        ),
        "the head: the written-out gradients are the soft-capped loss's, eager and compiled",
    ),
    Mutation(
        "matmul-attention-sees-the-future",
        "loopscale/model/attention.py",
        "dtype=q.dtype, device=q.device).triu(1)",
        "dtype=q.dtype, device=q.device).triu(2)",
        ("tests/unit/test_attention.py::test_the_matmul_form_is_causal",),
        "causal attention: the batched-matmul form masks every later position",
    ),
    Mutation(
        "matmul-attention-for-long-sequences",
        "loopscale/model/attention.py",
        "        and T <= MATMUL_MAX_T\n",
        "",
        ("tests/unit/test_attention.py::test_the_form_taken_by_shape_device_dtype_and_autocast",),
        "causal attention: SDPA beyond the shapes the matmul form is faster for",
    ),
    Mutation(
        "power-draws-without-per-pass-parameters",
        "loopscale/fit/synthetic.py",
        '    if "N_pass" in table.columns:\n',
        "    if False:\n",
        ("tests/unit/test_power.py::test_the_synthetic_loss_counts_per_pass_parameters_as_once_parameters",),
        # power has drawn through the law's own predict_table since e5824e3, so the synthetic truth is what this
        # line still sets: the calibration benchmark's and the synthetic sweeps' (found surviving at 1d2ab95)
        "synthetic sweeps: per-pass parameters count in the loss drawn (N_once + N_pass + r^phi N_rec)",
    ),
    Mutation(
        "eager-rate-ignores-the-width",
        "loopscale/train/compile_choice.py",
        "    return min(EAGER_CPU_PEAK_FLOPS, EAGER_CPU_FLOPS_PER_WIDTH * d_model)\n",
        "    return 4e9\n",
        (
            "tests/unit/test_compile_cache.py::"
            "test_an_unprobed_wide_job_is_priced_at_its_width_and_a_short_one_stays_eager",
        ),
        "compile=auto without a probe: the eager step priced at the width's FLOP rate, not one rate for all",
    ),
    Mutation(
        "power-pools-the-recipes-of-a-table",
        "loopscale/fit/power.py",
        "        if len(looped) > 1:\n",
        "        if False:\n",
        (
            "tests/unit/test_power.py::test_a_recipes_design_is_its_runs_and_the_baseline_r1_runs_it_shares",
            "tests/integration/test_power_cli.py::test_power_takes_one_recipes_runs_from_a_table_of_several",
        ),
        "power --table: several recipes' looped runs are one design only when a recipe is named (one phi)",
    ),
    Mutation(
        "huginn-adapter-reads-e-first",
        "loopscale/injections/huginn.py",
        "            return self(torch.cat((s.to(e.dtype), e), dim=-1)), s\n",
        "            return self(torch.cat((e, s.to(e.dtype)), dim=-1)), s\n",
        (
            "tests/unit/test_design_equations.py::test_each_injection_computes_its_published_equation_at_r3",
            "tests/unit/test_design_equations.py::test_each_recipe_computes_its_design_at_r3",
        ),
        "huginn: the adapter reads [s; e], the state first (Geiping et al.'s torch.cat([x, input_embeds]))",
    ),
    Mutation(
        "concat-reads-s-first",
        "loopscale/injections/concat.py",
        "            return self(torch.cat((e, s), dim=-1)), s  # the full 2d -> d matmul on every pass\n",
        "            return self(torch.cat((s, e), dim=-1)), s  # the full 2d -> d matmul on every pass\n",
        ("tests/unit/test_design_equations.py::test_each_injection_computes_its_published_equation_at_r3",),
        "concat: u = W [e; s], the published injection",
    ),
    Mutation(
        "huginn-state-std",
        "loopscale/injections/huginn.py",
        "STATE_STD = math.sqrt(2.0 / 5.0)  # sqrt(2 / (5 d)) x sqrt(d): the like-init state's std\n",
        "STATE_STD = math.sqrt(2.0 / 3.0)  # sqrt(2 / (5 d)) x sqrt(d): the like-init state's std\n",
        ("tests/unit/test_design_equations.py::test_huginns_adapter_and_initial_state_at_init",),
        "huginn: the initial state is Huginn's like-init draw, std sqrt(2/5)",
    ),
    Mutation(
        "huginn-adapter-std",
        "loopscale/injections/huginn.py",
        "    return math.sqrt(2.0 / (5.0 * d_model))\n",
        "    return math.sqrt(2.0 / (3.0 * d_model))\n",
        ("tests/unit/test_design_equations.py::test_huginns_adapter_and_initial_state_at_init",),
        "huginn: the adapter starts from Huginn's truncated normal, std sqrt(2 / (5 d))",
    ),
    Mutation(
        "parcae-decay-ignores-A",
        "loopscale/injections/parcae.py",
        "            return torch.exp(-F.softplus(self.dt) * torch.exp(self.A_log))\n",
        "            return torch.exp(-F.softplus(self.dt))\n",
        ("tests/unit/test_design_equations.py::test_each_injection_computes_its_published_equation_at_r3",),
        "parcae: the decay is exp(-softplus(dt) exp(A_log)) (equal to it at init only, where A_log = 0)",
    ),
    Mutation(
        "parcae-drive-without-the-prelude-norm-gain",
        "loopscale/injections/parcae.py",
        "            e_n = F.rms_norm(e, (e.shape[-1],), self.prelude_norm.weight, self.eps)\n",
        "            e_n = F.rms_norm(e, (e.shape[-1],), None, self.eps)\n",
        ("tests/unit/test_design_equations.py::test_each_injection_computes_its_published_equation_at_r3",),
        "parcae: the drive is softplus(dt) (.) B RMSNorm_g(e), Parcae's prelude_norm with its gain",
    ),
    Mutation(
        "hyper-lanes-mixed-by-M-transposed",
        "loopscale/injections/hyper.py",
        "                return M.to(dtype) @ lanes + beta",
        "                return M.transpose(-1, -2).to(dtype) @ lanes + beta",
        ("tests/unit/test_design_equations.py::test_each_injection_computes_its_published_equation_at_r3",),
        "hyper: lane_n <- sum_m M_i[n, m] lane_m + beta_i[n] s (equal at init, where M = I)",
    ),
    Mutation(
        "hyper-every-pass-mixes-with-M0",
        "loopscale/injections/hyper.py",
        "            alpha, M, beta = self.alpha[i], self.M[i], self.beta[i]\n",
        "            alpha, M, beta = self.alpha[i], self.M[0], self.beta[i]\n",
        ("tests/unit/test_design_equations.py::test_each_injection_computes_its_published_equation_at_r3",),
        "hyper: every pass has its own (alpha, M, beta)",
    ),
    Mutation(
        "hyper-dynamic-alpha-beta-columns-swapped",
        "loopscale/injections/hyper.py",
        "            return alpha + s_a * z[..., 0], M + s_m * z[..., 2:], beta + s_b * z[..., 1]\n",
        "            return alpha + s_a * z[..., 1], M + s_m * z[..., 2:], beta + s_b * z[..., 0]\n",
        ("tests/unit/test_design_equations.py::test_each_injection_computes_its_published_equation_at_r3",),
        "hyper-dynamic: W_dyn = [w_alpha | w_beta | W_M] (the dynamic corrections of docs/design.md)",
    ),
    Mutation(
        "loop-index-adds-the-first-pass-embedding",
        "loopscale/injections/loop_index.py",
        "            return u + self.index[i].to(u.dtype), state\n",
        "            return u + self.index[0].to(u.dtype), state\n",
        (
            "tests/unit/test_design_equations.py::test_each_injection_computes_its_published_equation_at_r3",
            ""
            "tests/unit/test_accounting_classes.py::test_an_n_pass_slice_acts_first_in_its_pass_and_n_rec_from_the_first",
        ),
        "loop_index: pass i adds its own p_i",
    ),
    Mutation(
        "lora-every-pass-uses-the-first-pair",
        "loopscale/blocks/lora.py",
        "            return F.linear(F.linear(x, self.A[i]), self.B[i])\n",
        "            return F.linear(F.linear(x, self.A[0]), self.B[0])\n",
        (
            "tests/unit/test_design_equations.py::test_each_block_form_computes_its_published_equation_at_r3",
            ""
            "tests/unit/test_accounting_classes.py::test_an_n_pass_slice_acts_first_in_its_pass_and_n_rec_from_the_first",
        ),
        "lora: pass i uses its own low-rank pair B_i A_i (Bae et al.)",
    ),
    Mutation(
        "recurrent-layers-told-pass-zero",
        "loopscale/model/transformer.py",
        "self._layers(self.recurrent, u, T, i if self.pass_indexed else None)",
        "self._layers(self.recurrent, u, T, 0 if self.pass_indexed else None)",
        ("tests/unit/test_design_equations.py::test_each_recipe_computes_its_design_at_r3",),
        "a block form that reads the pass index gets the pass's own index",
    ),
    Mutation(
        "sandwich-norm-after-the-residual-add-dropped",
        "loopscale/blocks/sandwich.py",
        "            x = self.norm_2(self.attn(self.norm_1(x), cos, sin) + x)\n",
        "            x = self.norm_2(self.attn(self.norm_1(x), cos, sin)) + x\n",
        ("tests/unit/test_design_equations.py::test_each_block_form_computes_its_published_equation_at_r3",),
        "sandwich: x = norm_2(attn(norm_1(x)) + x), Huginn's SandwichBlock",
    ),
    Mutation(
        "scaled-residual-writes-unscaled",
        "loopscale/blocks/prenorm.py",
        "            return x + y if self.residual_scale == 1.0 else x + self.residual_scale * y\n",
        "            return x + y\n",
        ("tests/unit/test_design_equations.py::test_each_block_form_computes_its_published_equation_at_r3",),
        "stable_residual: the recurrent block's writes are scaled by lambda / (r sqrt(k))",
    ),
    Mutation(
        "loop-index-counted-in-n-once",
        "loopscale/injections/loop_index.py",
        '            Param("index", (cfg.r, cfg.d_model), SCALAR, N_PASS, zero_init=True),\n',
        '            Param("index", (cfg.r, cfg.d_model), SCALAR, zero_init=True),\n',
        (
            ""
            "tests/unit/test_accounting_classes.py::test_every_parameter_is_declared_in_its_documented_class_and_counted_there",
        ),
        "loop_index: p_i counts in N_pass (else power and fit silently use the plain looped law)",
    ),
    Mutation(
        "lora-pairs-counted-with-the-block",
        "loopscale/blocks/lora.py",
        '"adapters.{key}.B", (cfg.r, out, rank(cfg)), SCALAR, N_PASS, zero_init=True))\n',
        '"adapters.{key}.B", (cfg.r, out, rank(cfg)), SCALAR, zero_init=True))\n',
        (
            ""
            "tests/unit/test_accounting_classes.py::test_every_parameter_is_declared_in_its_documented_class_and_counted_there",
        ),
        "lora: the per-pass pairs count in N_pass, not N_rec",
    ),
    Mutation(
        "multipower-counts-the-warmups-rises",
        "loopscale/fit/curves/multipower.py",
        "        first = 0 if self.warmup_drops else curve.warmup_end\n",
        "        first = 0\n",
        ("tests/unit/test_curve_laws.py::test_multipower_is_the_published_formula",),
        "fit --curves: the multi-power law's drops are counted after the warmup, as the paper writes it",
    ),
    Mutation(
        "multipower-bins-the-recent-drops",
        "loopscale/fit/curves/drops.py",
        "    window = window_bins * b\n",
        "    window = b\n",
        ("tests/unit/test_curve_laws.py::test_binned_drop_sum_is_the_published_sum",),
        "fit --curves: the drops G is still rising on are summed step by step (the binned sum is the published one)",
    ),
    Mutation(
        "fit-curves-fits-the-held-out-runs",
        "loopscale/fit/curves/fit.py",
        "    fitted = [c for c in curves if c.run not in holdout]\n",
        "    fitted = list(curves)\n",
        ("tests/integration/test_fit_curves_cli.py::test_fit_curves_holds_out_and_writes",),
        "fit --curves --holdout RUN: the held-out runs are predicted, never fitted",
    ),
    Mutation(
        "sigma-model-margin-dropped",
        "loopscale/fit/seed_sigma.py",
        "AICC_MARGIN = 2.0\n",
        "AICC_MARGIN = 0.0\n",
        (
            ""
            "tests/unit/test_statistics_off_defaults.py::test_a_trend_is_chosen_only_when_its_aicc_beats_the_constants_by_two",
        ),
        "the seed sigma: a trend is claimed only when its AICc beats the constant's by 2",
    ),
    Mutation(
        "sigma-aicc-without-its-small-sample-term",
        "loopscale/fit/seed_sigma.py",
        "(2 * k * (k + 1) / (n - k - 1) if n - k - 1 > 0 else np.inf)",
        "(0.0 if n - k - 1 > 0 else np.inf)",
        (
            ""
            "tests/unit/test_statistics_off_defaults.py::test_each_sigma_model_is_the_maximum_likelihood_of_the_contrasts_and_counts_its_parameters",
        ),
        "the seed sigma model is chosen by AICc (n = the pooled degrees of freedom), not AIC",
    ),
    Mutation(
        "seed-duplicates-not-averaged",
        "loopscale/fit/seed_sigma.py",
        "    unit_y = unit_sum / np.maximum(unit_n, 1)\n",
        "    unit_y = unit_sum\n",
        (
            ""
            "tests/unit/test_statistics_off_defaults.py::test_within_point_deviations_with_unequal_seeds_and_a_duplicate_equal_a_groupby",
        ),
        "a seed's duplicate rows count once, at their mean, in the seed sigma",
    ),
    Mutation(
        "per-r-sigma-counted-as-one-parameter",
        "loopscale/fit/seed_sigma.py",
        "_loglik(ss, df, sig), len(r_rep)))",
        "_loglik(ss, df, sig), 1))",
        (
            ""
            "tests/unit/test_statistics_off_defaults.py::test_each_sigma_model_is_the_maximum_likelihood_of_the_contrasts_and_counts_its_parameters",
        ),
        "the per-r sigma model pays AICc for one sigma per replicated r",
    ),
    Mutation(
        "two-stage-resample-skips-the-last-seed",
        "loopscale/fit/two_stage.py",
        "np.floor(rng.random(len(rep)) * self.group_size[rep])",
        "np.floor(rng.random(len(rep)) * (self.group_size[rep] - 1))",
        ("tests/unit/test_statistics_off_defaults.py::test_two_stage_weights_have_the_moments_of_their_design",),
        "--seed-bootstrap resample draws each point's seeds uniformly with replacement",
    ),
    Mutation(
        "two-stage-draws-one-cluster-too-few",
        "loopscale/fit/two_stage.py",
        "rng.integers(0, self.n_outer, self.n_outer)",
        "rng.integers(0, self.n_outer, self.n_outer - 1)",
        ("tests/unit/test_statistics_off_defaults.py::test_two_stage_weights_have_the_moments_of_their_design",),
        "the bootstrap draws as many outer clusters as the table has",
    ),
    Mutation(
        "power-parent-share-not-square-rooted",
        "loopscale/fit/pilot.py",
        "math.sqrt(share) * shared + math.sqrt(1 - share) * own",
        "share * shared + (1 - share) * own",
        (
            ""
            "tests/unit/test_statistics_off_defaults.py::test_the_simulated_noise_shares_rho_of_its_variance_within_a_forked_job",
        ),
        "power --parent-share: a forked job's branches share rho of a run's noise variance, the variance stays sigma^2",
    ),
    Mutation(
        "power-pilot-parent-share-ignored",
        "loopscale/fit/pilot.py",
        "parent_share = 1.0 if measured_share is None else float(measured_share)",
        "parent_share = 1.0",
        ("tests/unit/test_power_honest.py::test_the_pilot_shows_how_much_of_a_runs_noise_its_forked_job_shares",),
        "power: a forked pilot's parent share is the one its residuals show, not 1 (the demo's MDE 24% too large)",
    ),
    Mutation(
        "power-no-seed-pilot-calls-the-misfit-zero",
        "loopscale/fit/pilot.py",
        "    if not truth.split_unknown:\n        return truth.sigma_log, truth.misfit_log",
        "    if True:\n        return truth.sigma_log, truth.misfit_log",
        (
            "tests/unit/test_power_honest.py::"
            "test_a_pilot_without_seed_repeats_does_not_promise_that_seeds_average_its_misfit_away",
        ),
        "power: a pilot without seed repeats does not promise that more seeds average its misfit away",
    ),
    Mutation(
        "power-sigma-dof-ignores-tails",
        "loopscale/fit/pilot.py",
        "    if tail_dof is None:\n        return float(dof)",
        "    if True:\n        return float(dof)",
        (
            "tests/unit/test_power_honest.py::"
            "test_sigma_from_heavy_tailed_noise_is_drawn_wider_than_a_chi_square_on_its_dof",
        ),
        "power: sigma from heavy-tailed noise is drawn as uncertain as its kurtosis makes it, not chi2 on its dof",
    ),
    Mutation(
        "power-tails-drawn-only-past-the-kurtosis-gate",
        "loopscale/fit/pilot.py",
        "    if pool is not None:\n",
        "    if False:\n",
        (
            "tests/unit/test_power_honest.py::"
            "test_a_pilot_with_heavy_tails_below_the_kurtosis_gate_is_drawn_with_them_and_a_gaussian_one_is_not",
        ),
        "power draws the noise's shape from the pilot's own residuals, heavy tails with no significance gate",
    ),
    Mutation(
        "power-parent-share-drawn-as-known",
        "loopscale/fit/pilot.py",
        "    if not truth.parent_share_se:\n        return truth.parent_share",
        "    if True:\n        return truth.parent_share",
        (
            "tests/unit/test_power_honest.py::"
            "test_a_forked_pilot_says_how_sure_it_is_of_its_parent_share_and_power_draws_the_share_from_that",
        ),
        "power draws a forked pilot's parent share per simulated sweep from its standard error, not as known",
    ),
    Mutation(
        "delta-phi-margin-rounded-to-nearest",
        "loopscale/fit/verdict.py",
        "    margin = math.ceil(max(-lo, hi) * 100 - 1e-9) / 100\n",
        "    margin = round(max(-lo, hi), 2)\n",
        ("tests/unit/test_statistics_off_defaults.py::test_delta_phi_answers_on_asymmetric_and_one_sided_intervals",),
        "no difference detected: |Δφ| < x with x the interval's larger side rounded UP to 0.01",
    ),
    Mutation(
        "delta-phi-negative-never-real",
        "loopscale/fit/verdict.py",
        "    if lo > 0 or hi < 0:\n",
        "    if lo > 0:\n",
        ("tests/unit/test_statistics_off_defaults.py::test_delta_phi_answers_on_asymmetric_and_one_sided_intervals",),
        "Δφ real when its interval excludes 0 on either side",
    ),
    Mutation(
        "validate-counts-pinned-parameters",
        "loopscale/fit/validation/scores.py",
        "    return int(sum(lo < hi for lo, hi in law.bounds()))\n",
        "    return len(law.bounds())\n",
        (
            ""
            "tests/unit/test_statistics_off_defaults.py::test_aicc_and_bic_count_free_parameters_only_and_are_recomputed_from_the_residuals",
        ),
        "validate's AICc and BIC count free parameters only (a pinned E is not one)",
    ),
    Mutation(
        "validate-aicc-is-aic",
        "loopscale/fit/validation/scores.py",
        "float(log_like + 2 * k + 2 * k * (k + 1) / (n - k - 1))",
        "float(log_like + 2 * k)",
        (
            ""
            "tests/unit/test_statistics_off_defaults.py::test_aicc_and_bic_count_free_parameters_only_and_are_recomputed_from_the_residuals",
        ),
        "validate compares forms by AICc (the small-sample correction), as docs/design.md says",
    ),
    Mutation(
        "validate-fold-refit-sees-its-held-out-rows",
        "loopscale/fit/validation/run.py",
        "    train, test = data.subset(fold.train), data.subset(fold.test)\n",
        "    train, test = data, data.subset(fold.test)\n",
        (
            ""
            "tests/unit/test_statistics_off_defaults.py::test_every_fold_is_a_refit_on_its_training_rows_that_predicts_exactly_the_held_out_ones",
        ),
        "validate: a held-out budget or r is predicted by a refit that never saw it",
    ),
    Mutation(
        "testtime-fixed-r-gains-past-r-train",
        "loopscale/fit/laws/testtime.py",
        "    return np.where(fixed > 0, np.minimum(x, 1.0), x)\n",
        "    return x\n",
        (
            "tests/unit/test_testtime_law.py::test_fixed_r_degrades_past_r_train_and_sampled_r_saturates",
            "tests/unit/test_testtime_law.py::test_noise_free_rows_are_recovered_exactly",
        ),
        "test-time law: a fixed-r model gains nothing from passes past r_train (x_eff = min(x, 1))",
    ),
    Mutation(
        "testtime-intervals-not-t-widened",
        "loopscale/fit/testtime.py",
        "    sigma = max(sigma, 1e-9) * float(student_t.ppf(0.975, dof) / norm.ppf(0.975))\n",
        "    sigma = max(sigma, 1e-9)\n",
        ("tests/unit/test_testtime_law.py::test_noise_scale_is_widened_to_a_t_interval",),
        "test-time law: with few rows left over the profile interval is a t-interval, not an overconfident normal one",
    ),
    Mutation(
        "hyper-alpha-one-hot-does-not-wrap",
        "loopscale/injections/hyper.py",
        "F.one_hot(torch.arange(r) % K, K)",
        "F.one_hot(torch.arange(r).clamp(max=K - 1), K)",
        (
            "tests/unit/test_design_equations.py::test_hyper_lanes_at_init",
            "tests/unit/test_authors_golden.py::test_logits_loss_and_three_steps_equal_the_authors",
        ),
        "hyper: alpha_i = one-hot(i mod K) at init, as the authors' code (pass K reads lane 0 again)",
    ),
    Mutation(
        "additive-starts-from-e",
        "loopscale/injections/additive.py",
        "            return torch.zeros_like(e)\n",
        "            return e\n",
        (
            "tests/unit/test_design_equations.py::test_additive_starts_from_zero_and_passthrough_from_e",
            "tests/unit/test_authors_golden.py::test_logits_loss_and_three_steps_equal_the_authors",
        ),
        "additive: u = s + e with s_0 = 0, so the first pass sees e (the authors' additive injection)",
    ),
    Mutation(
        "power-table-seeds-are-one-seed-copied",
        "loopscale/analysis/power_designs.py",
        '    design["seed"] = np.tile(np.arange(spec["seeds"]), len(points))\n',
        '    design["seed"] = 0\n',
        (
            ""
            "tests/unit/test_statistics_off_defaults.py::test_power_on_a_runs_table_with_more_seeds_draws_each_seed_anew",
        ),
        "power --table T --seeds K: each point gets K independent seeds, not one seed K times",
    ),
    Mutation(
        "validate-phi-shift-is-the-smallest",
        "loopscale/fit/validation/flags.py",
        "    return max(shifts) if shifts else None\n",
        "    return min(shifts) if shifts else None\n",
        ("tests/unit/test_statistics_off_defaults.py::test_the_validation_verdict_reads_the_folds_numbers",),
        "validate: phi moves by at most the LARGEST leave-one-r-out shift",
    ),
    Mutation(
        "validate-flags-held-out-folds-at-1.5x",
        "loopscale/fit/validation/flags.py",
        "RATIO_FLAG = 2.0\n",
        "RATIO_FLAG = 1.5\n",
        ("tests/unit/test_statistics_off_defaults.py::test_the_validation_verdict_reads_the_folds_numbers",),
        "validate: a held-out fold is flagged beyond 2x the refit's own residuals",
    ),
    Mutation(
        "huginn-initial-state-zero-in-evaluation",
        "loopscale/injections/huginn.py",
        "            return self.initial_state(e, STATE_STD)\n",
        "            return self.initial_state(e, STATE_STD) if self.training else torch.zeros_like(e)\n",
        (
            ""
            "tests/unit/test_design_equations.py::test_the_random_initial_state_is_drawn_anew_in_every_forward_in_evaluation_too",
        ),
        "huginn: s_0 is a fresh like-init draw in every forward, training and evaluation alike",
    ),
    Mutation(
        "per-r-noise-pools-every-r",
        "loopscale/fit/noise.py",
        "        dof = int(df[on].sum())\n",
        "        dof = int(df.sum())\n",
        ("tests/unit/test_statistics_off_defaults.py::test_the_per_r_noise_summary_pools_each_r_alone",),
        "fit's noise block: sigma of log L per r from that r's seed repeats alone",
    ),
    Mutation(
        "r-eval-past-r-train-has-no-pass",
        "loopscale/model/transformer.py",
        "            k = min(i, last)  # the pass whose own parameters this pass uses\n",
        "            k = i % (last + 1)  # the pass whose own parameters this pass uses\n",
        ("tests/unit/test_testtime_eval.py::test_scoring_at_r_eval_equals_the_model_rebuilt_at_that_r",),
        "scored past its trained r, a per-pass design repeats its last pass's own parameters",
    ),
    Mutation(
        "r-eval-scores-the-trained-r",
        "loopscale/train/lightning_module.py",
        "            loss = forward_recovering(self.model, x, y, r=self.eval_r)\n",
        "            loss = forward_recovering(self.model, x, y)\n",
        (
            ""
            "tests/integration/test_testtime_run.py::test_a_run_records_its_scores_and_collect_writes_the_testtime_table",
        ),
        "trainer.r_eval: each r_eval is scored at that many passes",
    ),
    Mutation(
        "power-forked-jobs-drawn-as-independent-runs",
        "loopscale/fit/cluster_se.py",
        "    if PARENT_COLUMN not in table.columns:\n        return np.arange(len(table))\n",
        "    if True:\n        return np.arange(len(table))\n",
        ("tests/unit/test_statistics_off_defaults.py::test_power_at_a_parent_share_below_one_matches_the_sandwich_se",),
        "power --parent-share: a forked job's branches share part of their noise (the se a forked design really has)",
    ),
    Mutation(
        "tuned-lr-rule-not-applied",
        "loopscale/train/optim/lr_transfer.py",
        "lr * optim.lr_rule * optim.lr_scale",
        "lr * optim.lr_scale",
        ("tests/integration/test_tune.py::test_the_rule_is_written_read_back_applied_and_cached",),
        "loopscale tune: every later run of the experiment trains at its tuned lr (the rule's multiplier of r)",
    ),
    Mutation(
        "tune-edge-optimum-not-extended",
        "loopscale/launch/tune.py",
        "if fits[id(g)] is not None and fits[id(g)].side != 0]",
        "if False]",
        ("tests/integration/test_tune.py::test_an_edge_optimum_grows_the_grid",),
        "loopscale tune: a grid whose lowest loss is on its edge grows past it by itself",
    ),
    Mutation(
        "tune-cache-ignored",
        "loopscale/launch/tune.py",
        'if stored.get("key") != key:',
        "if True:",
        ("tests/integration/test_tune.py::test_the_rule_is_written_read_back_applied_and_cached",),
        "loopscale tune: the same tune again is answered from the rule file, not retrained or refitted",
    ),
    Mutation(
        "tune-reads-another-configs-runs",
        "loopscale/launch/tune.py",
        "        if old != new:\n            raise ConfigError(",
        "        if False:\n            raise ConfigError(",
        ("tests/integration/test_tune.py::test_an_edge_optimum_grows_the_grid",),
        "loopscale tune: a finished run of another config in its dir (same name, other model) is refused, not read",
    ),
    Mutation(
        "lr-optimum-interval-without-the-curvature-error",
        "loopscale/fit/lr_optimum.py",
        "g = np.array([0.0, -1 / (2 * c2), c1 / (2 * c2**2)])",
        "g = np.array([0.0, -1 / (2 * c2), 0.0])",
        ("tests/unit/test_lr_optimum.py::test_vertex_and_interval_match_the_closed_form_of_a_symmetric_grid",),
        "loopscale tune: a best lr's interval holds the error of the parabola's curvature (delta method)",
    ),
    # -- issue 57 (round-5 robustness) -------------------------------------------------------------------
    Mutation(
        "random-start-evaluation-draws-the-training-stream",
        "loopscale/injections/form.py",
        'name = "train" if self.training else "eval"',
        'name = "train"',
        (
            "tests/unit/test_injections.py::test_a_random_initial_state_comes_from_the_models_own_streams",
            "tests/integration/test_designs_train.py::test_every_recipe_resumes_bit_identically_after_a_kill",
        ),
        "Huginn and Parcae resume bit-identically: validation never draws from the training stream of s_0",
    ),
    Mutation(
        "unknown-recipe-trains-under-its-label",
        "loopscale/config/model.py",
        "    if near is None and described is None:\n        return\n",
        "    if True:\n        return\n",
        (
            "tests/unit/test_unknown_names.py::test_an_unregistered_recipe_on_a_registered_design_is_refused",
            "tests/unit/test_unknown_names.py::test_sweep_count_refuses_an_unknown_name_in_one_line",
        ),
        "a typo'd recipe (model.recipe=hugin) is refused with the known names and the closest, not trained",
    ),
    Mutation(
        "sweep-count-checks-no-config",
        "loopscale/cli/sweep.py",
        "        jobs = expand(args.overrides)  # every job's config checked",
        "        jobs = [None] * len(__import__('loopscale.launch.sweep').launch.sweep.sweep_overrides("
        "args.overrides))  #",
        ("tests/unit/test_unknown_names.py::test_sweep_count_refuses_an_unknown_name_in_one_line",),
        "sweep --count refuses a job whose config names what no registry knows",
    ),
    Mutation(
        "validate-writes-over-its-inputs",
        "loopscale/atomic.py",
        "            if given is not None and same_file(path, given):",
        "            if False:",
        ("tests/unit/test_validate_inputs.py::test_validate_refuses_to_write_over_the_fit_it_reads",),
        "validate --out (and report, plot, advise, power, notebook) never replaces one of its inputs",
    ),
    Mutation(
        "validate-takes-a-changed-table",
        "loopscale/cli/validate.py",
        '    if check["changed"] and not args.allow_changed_table:',
        "    if False:",
        (
            ""
            "tests/unit/test_validate_inputs.py::test_validate_refuses_a_table_changed_since_the_fit_and_says_when_allowed",
        ),
        "validate refuses a table whose content is not the fit's (its recorded sha256) unless --allow-changed-table",
    ),
    Mutation(
        "report-takes-another-fits-validation",
        "loopscale/analysis/report_inputs.py",
        '    if fit is None or (of.get("law"), of.get("params")) == (fit.law, json.loads(json.dumps(fit.params))):',
        "    if True:",
        ("tests/unit/test_validate_inputs.py::test_report_refuses_the_validation_record_of_another_fit",),
        "report --validation refuses the validation record of another fit unless --allow-other-fit",
    ),
    Mutation(
        "corrupt-graph-cache-kills-every-relaunch",
        "loopscale/train/compiling.py",
        "        if cache is None or cache.folder is None or not cache.warm or cache.recovered or cause is None:",
        "        if True:",
        (
            ""
            "tests/integration/test_graph_cache_corrupt.py::test_a_corrupt_cached_kernel_is_set_aside_and_the_run_compiles_afresh",
        ),
        "a corrupt kernel in the compiled-graph cache is set aside and the run compiles afresh, said in one line",
    ),
    Mutation(
        "sampled-r-draws-not-keyed-by-step",
        "loopscale/model/r_sampling.py",
        "    return int(_draw(cfg, np.random.default_rng([SEED_TAG, seed, step]), 1)[0])\n",
        "    return int(_draw(cfg, np.random.default_rng([SEED_TAG, seed]), 1)[0])\n",
        ("tests/unit/test_r_sampling.py::test_draws_are_keyed_by_seed_and_step",),
        "model.r_sampling: each step draws its own pass count, keyed by (seed, step)",
    ),
    Mutation(
        "sampled-r-budget-overshoots",
        "loopscale/model/r_sampling.py",
        "            if abs(after - compute_flops) >= abs(spent - compute_flops):",
        "            if after > 2 * compute_flops:",
        ("tests/unit/test_r_sampling.py::test_the_budget_is_met_in_realised_flops_and_n_rec_is_unchanged",),
        "model.r_sampling: the steps are those whose realised FLOPs come closest to the budget",
    ),
    Mutation(
        "sampled-r-pmf-drops-the-tail",
        "loopscale/model/r_sampling.py",
        "    return values, np.append(probs, max(0.0, 1.0 - probs.sum()))\n",
        "    return values, np.append(probs, 0.0)\n",
        ("tests/unit/test_r_sampling.py::test_poisson_lognormal_pmf_is_the_mixture",),
        "model.r_sampling: draws above r_max run r_max passes, so the pmf lumps the tail there (expected F exact)",
    ),
    Mutation(
        "sampled-r-compiles-the-whole-model",
        "loopscale/train/lightning_module.py",
        '            self.compile_mode = "blocks"\n',
        "            pass\n",
        ("tests/integration/test_sampled_r_run.py::test_compile_model_becomes_blocks_under_sampled_r",),
        "model.r_sampling under trainer.compile=model: each layer compiled, the loop in Python (no graph per r)",
    ),
    Mutation(
        "two-stage-ignores-the-cluster-column",
        "loopscale/fit/two_stage.py",
        "    outer = point if clusters is None else np.asarray(clusters).astype(str)\n",
        "    outer = point\n",
        ("tests/unit/test_statistics_off_defaults.py::test_two_stage_weights_with_budgets_as_outer_clusters",),
        "fit --bootstrap N --cluster COL: the outer stage resamples the column's clusters whole",
    ),
    Mutation(
        "noise-scale-not-bounded-by-the-scatter",
        "loopscale/fit/noise_scale.py",
        "    if not s2 > 1:\n",
        "    if True:\n",
        (
            "tests/unit/test_noise_honest.py::test_one_rerun_point_does_not_make_phi_exact",
            "tests/unit/test_noise_honest.py::test_seed_repeats_in_one_recipe_only_do_not_make_a_null_delta_phi_real",
        ),
        "noise model: a seed sigma is bounded below by the scatter about the law (one re-run point is not exact)",
    ),
    Mutation(
        "lack-of-fit-from-bounded-psi",
        "loopscale/fit/noise_scale.py",
        "    return float(np.sum(sums**2) * G / (n * dof)), dof\n",
        "    return float(min(np.sum(sums**2) * G / (n * dof), 1.81)), dof\n",
        (
            "tests/unit/test_noise_honest.py::"
            "test_a_law_missing_its_points_by_5x_the_seed_noise_widens_the_interval_by_the_expected_factor",
        ),
        "noise model: the lack-of-fit factor grows as far as the scatter says (squared residuals, not a bounded psi)",
    ),
    Mutation(
        "lack-of-fit-ignores-shared-misfit",
        "loopscale/fit/noise.py",
        "        return reps.point.copy()\n",
        "        return np.arange(len(table))\n",
        (
            "tests/unit/test_noise_honest.py::"
            "test_a_law_missing_its_points_by_5x_the_seed_noise_widens_the_interval_by_the_expected_factor",
        ),
        "noise model: a point's seeds share the law's misfit there (summed before squaring, not n_g draws)",
    ),
    Mutation(
        "sigma-trend-ignores-heavy-tails",
        "loopscale/fit/seed_sigma.py",
        "    return float(max(1.0, np.average(1 + kappa * (n - 1) / (2 * n), weights=n - 1)))\n",
        "    return 1.0\n",
        ("tests/unit/test_noise_honest.py::test_heavy_tailed_seed_noise_does_not_make_a_spurious_sigma_trend",),
        "the seed sigma model: heavy-tailed seed noise does not make a trend out of a constant sigma",
    ),
    Mutation(
        "verdict-reads-the-bootstrap",
        VERDICT,
        '    if profile is not None and profile.get("interval"):\n',
        '    if (fit.ci95 or {}).get(key):\n        return list(fit.ci95[key]), "bootstrap", None\n'
        '    if profile is not None and profile.get("interval"):\n',
        ("tests/unit/test_verdict.py::test_the_verdict_reads_the_profile_interval_not_the_bootstrap",),
        "the verdict reads the calibrated interval (the profile), not the bootstrap percentile beside it",
    ),
    Mutation(
        "power-accepts-a-law-outside-the-box",
        "loopscale/fit/pilot.py",
        "        if not lo < value < hi:\n",
        "        if False:\n",
        ("tests/unit/test_power_honest.py::test_power_refuses_a_law_or_a_planted_delta_phi_outside_the_fitters_box",),
        "power refuses a law outside the fitter's box instead of printing widths of fits pinned at a bound",
    ),
    Mutation(
        "power-draws-seed-noise-only",
        "loopscale/fit/pilot.py",
        "    if misfit_log and points is not None:\n",
        "    if False:\n",
        (
            "tests/unit/test_power_honest.py::"
            "test_the_pilot_shows_its_misfit_tails_and_sigma_uncertainty_and_power_draws_them",
        ),
        "power draws the misfit the pilot shows, shared by a point's seeds, not seed noise alone",
    ),
    Mutation(
        "power-treats-sigma-as-exact",
        "loopscale/fit/pilot.py",
        "    return 1.0 if dof is None else math.sqrt(dof / rng.chisquare(dof))\n",
        "    return 1.0\n",
        ("tests/unit/test_power_honest.py::test_a_pilot_with_one_dof_of_sigma_plans_with_an_uncertain_sigma",),
        "power draws each sweep's sigma from the pilot's uncertainty about it",
    ),
    Mutation(
        "approach2-one-parabola-over-every-point",
        ISOFLOP,
        "    return slice(max(0, k - WINDOW_NEIGHBOURS), min(len(y), k + WINDOW_NEIGHBOURS + 1)), None\n",
        "    return slice(0, len(y)), None\n",
        (
            "tests/unit/test_approach2.py::"
            "test_each_budgets_n_star_is_recovered_within_its_interval_and_the_exponent_within_its_own",
        ),
        "Approach 2 fits each budget's parabola near its minimum, not over every size",
    ),
    Mutation(
        "approach2-budgets-scatter-ignored",
        "loopscale/fit/validation/approach2.py",
        "    w = 1 / (se**2 + tau2)\n",
        "    w = 1 / se**2\n",
        (
            "tests/unit/test_approach2.py::"
            "test_minima_scattering_about_the_power_law_enter_as_a_between_budget_variance",
        ),
        "Approach 2 weights each budget by 1 / (se^2 + tau^2), tau the budgets' scatter about the line (design.md)",
    ),
    Mutation(
        "approach2-interp-rule-searches-only-the-sizes",
        "loopscale/fit/validation/approach2.py",
        "    grid = np.linspace(x[0], x[-1], (len(x) - 1) * INTERP_STEPS)\n",
        "    grid = x\n",
        (
            ""
            "tests/unit/test_approach2.py::test_the_interpolation_rule_finds_the_minimum_of_the_curve_through_every_size",
        ),
        "isoflop's interpolation rule is the argmin of the spline through every size, not the lowest size",
    ),
    Mutation(
        "parcae-drive-reads-B-transposed",
        "loopscale/injections/parcae.py",
        "F.linear(e_n, self.B).to(e.dtype)",
        "F.linear(e_n, self.B.T).to(e.dtype)",
        (
            "tests/unit/test_design_equations.py::test_parcaes_injection_equals_the_released_code",
            "tests/unit/test_design_equations.py::test_each_injection_computes_its_published_equation_at_r3",
        ),
        "parcae: the drive is softplus(dt) (.) (B e_n), as Parcae's released DiagonalInjection computes it",
    ),
    Mutation(
        "advise-testtime-ignores-the-budget",
        "loopscale/analysis/advise/testtime.py",
        "        feasible = F <= inference_flops\n",
        "        feasible = F > 0\n",
        ("tests/unit/test_advise_testtime.py::test_the_advice_is_the_brute_force_optimum",),
        "advise on a test-time fit: only pass counts within the inference budget are candidates",
    ),
    # -- issue 52: hyper-connections as options, typed records ------------------------------------------
    Mutation(
        "old-hyper-override-not-refused",
        "loopscale/config/model.py",
        '        if key.removeprefix("model.") in MOVED_TO_OPTIONS and key.startswith("model."):',
        "        if False:",
        ("tests/unit/test_train_config.py::test_a_hyper_field_of_an_older_config_is_refused_with_its_option",),
        "an old model.hyper_lanes / hyper_dynamic override is refused in one line naming its option",
    ),
    Mutation(
        "hyper-options-change-the-run-identity",
        "loopscale/config/model.py",
        '    return {**model, "options": options, **fields}',
        "    return model",
        (
            "tests/unit/test_identity_defaults.py::test_the_default_config_hashes_as_before",
            "tests/unit/test_identity_defaults.py::test_hyper_options_hash_as_the_fields_they_were",
        ),
        "runs trained before hyper-connections became options keep their identity (resume, skip when done)",
    ),
    Mutation(
        "record-read-back-as-a-dict",
        "loopscale/train/run_json.py",
        "    return RunRecord.from_json(path)\n",
        "    return load_record(path)\n",
        ("tests/unit/test_run_record_type.py::test_a_record_file_is_read_back_as_the_run_record_it_was_written_as",),
        "a run record is read back as the RunRecord it was written as",
    ),
    Mutation(
        "old-hyper-record-loses-its-lanes",
        "loopscale/config/model.py",
        '    return ModelConfig(**{**rest, "options": {**moved, **(rest.get("options") or {})}})',
        '    return ModelConfig(**{**rest, "options": dict(rest.get("options") or {})})',
        ("tests/unit/test_curve_r_eval_table.py::test_a_record_from_before_the_hyper_options_reads_its_lanes",),
        "a hyper run's record from before the options move reads with its lanes (collect's trained-r FLOPs)",
    ),
    Mutation(
        "params-paper-preset-resolves-its-recipe-first",
        "loopscale/cli/params.py",
        "        return paper_model(6 if args.size is None else args.size, args.r, args.recipe, **overrides)",
        "        cfg = paper_model(6 if args.size is None else args.size, args.r, args.recipe)\n"
        '        return __import__("dataclasses").replace(cfg, **overrides)',
        ("tests/unit/test_params_cli.py::test_a_preset_names_the_design_its_flags_describe",),
        "loopscale params --preset paper labels the design its flags describe (--bptt-k 2: tbptt), as --preset cpu",
    ),
    # -- issue 58 item 4: blind round 1 (written from the docs and code only; /work/notes/blind_round1.md) -------
    Mutation(
        "blind1-sigma-trend-without-its-margin",
        "loopscale/fit/seed_sigma.py",
        "aicc(m) <= constant.aicc - AICC_MARGIN]",
        "aicc(m) < constant.aicc]",
        (
            ""
            "tests/unit/test_statistics_off_defaults.py::test_a_trend_is_chosen_only_when_its_aicc_beats_the_constants_by_two",
        ),
        "the noise model: a sigma trend is chosen only when its AICc beats the constant sigma's by 2",
    ),
    Mutation(
        "blind1-validate-reads-the-full-width",
        "loopscale/fit/validation/flags.py",
        "return None if not interval or None in interval else (interval[1] - interval[0]) / 2",
        "return None if not interval or None in interval else interval[1] - interval[0]",
        ("tests/unit/test_statistics_off_defaults.py::test_the_validation_verdict_reads_the_folds_numbers",),
        "validate flags a dropped r that moves phi beyond its interval's half-width",
    ),
    Mutation(
        "blind1-tbptt-probe-floor",
        "loopscale/config/model.py",
        "cfg.bptt_k = -(-cfg.r // 2)  # ceil(r / 2), the published probe",
        "cfg.bptt_k = cfg.r // 2  # ceil(r / 2), the published probe",
        ("tests/unit/test_design_equations.py::test_each_recipe_computes_its_design_at_r3",),
        "the truncated-backprop recipe keeps gradients through ceil(r / 2) passes, the published probe",
    ),
    Mutation(
        "blind1-hyper-every-pass-reads-lane-0",
        "loopscale/injections/hyper.py",
        "self.alpha.copy_(F.one_hot(torch.arange(r) % K, K))",
        "self.alpha.copy_(F.one_hot(torch.zeros(r, dtype=torch.long), K))",
        ("tests/unit/test_design_equations.py::test_hyper_lanes_at_init",),
        "hyper-connections: pass i reads lane i mod K at init (alpha_i one-hot)",
    ),
    Mutation(
        "blind1-lora-every-pass-shares-B",
        "loopscale/blocks/lora.py",
        "return F.linear(F.linear(x, self.A[i]), self.B[i])",
        "return F.linear(F.linear(x, self.A[i]), self.B[0])",
        ("tests/unit/test_design_equations.py::test_each_block_form_computes_its_published_equation_at_r3",),
        "lora: pass i adds its own low-rank adapter B_i A_i",
    ),
    Mutation(
        "blind1-graph-key-without-backend",
        "loopscale/train/compile_cache.py",
        '        "backend": backend,\n',
        "",
        ("tests/unit/test_compile_cache.py::test_a_backend_python_or_machine_has_its_own_folder",),
        "the graph cache: one folder per model, compile mode, backend, torch, Python and machine",
    ),
    Mutation(
        "blind1-later-jobs-count-their-gross-saving",
        "loopscale/train/compile_choice.py",
        "shared = sum(max(0.0, s - WARM_COMPILE_S) for s in later_savings_s)",
        "shared = sum(later_savings_s)",
        ("tests/unit/test_compile_cache.py::test_later_jobs_count_only_what_they_save_beyond_loading_the_graphs",),
        "compile=auto in a sweep: each later job of a model counts only what it saves beyond loading the graphs",
    ),
    Mutation(
        "curve-lost-on-resume",
        "loopscale/train/lightning_module.py",
        '        self.curve = list(checkpoint.get("loopscale_curve", []))\n',
        "        self.curve = []\n",
        ("tests/integration/test_train.py::test_interrupted_run_resumes_to_the_same_loss",),
        "loss curves: a resumed run (and a forked branch) keeps the curve evaluated before its checkpoint",
    ),
    Mutation(
        "curve-ignores-its-flops-share",
        "loopscale/data/heldout.py",
        "        if len(steps) * flops_per_point <= budget:\n",
        "        if True:\n",
        ("tests/unit/test_curve_steps.py::test_thinned_to_the_flops_share",),
        "loss curves: the evaluations cost at most trainer.curve_share (5%) of the run's FLOPs",
    ),
    Mutation(
        "looped-curve-counts-a-parents-stable-phase-per-branch",
        "loopscale/fit/laws/looped_curve.py",
        "            keep &= ~(shared & key.duplicated().to_numpy())\n",
        "            keep &= True\n",
        (
            ""
            "tests/unit/test_looped_curve_law.py::test_rows_fitted_start_after_the_warmup_and_count_a_parents_stable_phase_once",
        ),
        "fit --law looped-curve: a forked parent's stable phase is one set of points, not one per branch",
    ),
    Mutation(
        "looped-curve-ignores-the-anneal",
        "loopscale/fit/laws/looped_curve.py",
        "        S2[rows] = (1.0 - decay) * annealing_area(eta, curve.warmup_end, at, decay) if decay < 1 else 0.0\n",
        "        S2[rows] = 0.0\n",
        ("tests/unit/test_looped_curve_law.py::test_schedule_features_are_the_lr_area_and_the_annealing_area",),
        "fit --law looped-curve: the cooldown's loss drop is the annealing area of the lr's drops",
    ),
    Mutation(
        "looped-entry-curve-prices-the-plain-stack",
        "loopscale/fit/laws/looped_entry_curve.py",
        "        return LoopedEntry.log_multiplier(self, thetas, data)\n",
        "        return thetas[:, 5:6] * data.log_r + thetas[:, 6:7], np.c_[data.log_r, np.ones(len(data.r))]\n",
        ("tests/unit/test_looped_entry_curve.py::test_where_the_schedule_terms_vanish_it_is_looped_entry",),
        "fit --law looped-entry-curve: r = 1 pays no kappa (m_1 = 1, m_r = kappa r^phi for r > 1), as looped-entry",
    ),
    Mutation(
        "power-takes-a-looped-entry-curve-pilot-as-r-to-the-phi",
        "loopscale/fit/pilot.py",
        "single = known.final_law if curves else (known.recipe_law if known.per_recipe else fit.law)",
        "single = Looped.name if curves else (known.recipe_law if known.per_recipe else fit.law)",
        ("tests/unit/test_looped_entry_curve.py::test_power_refuses_it_as_a_pilot_rather_than_dropping_kappa",),
        "power refuses a pilot whose law it would not simulate (a looped-entry-curve fit's kappa), in one line",
    ),
    Mutation(
        "validate-curve-finals-are-first-evaluations",
        "loopscale/fit/validation/folds.py",
        "        last[rows[np.argmax(step[rows])]] = True\n",
        "        last[rows[np.argmin(step[rows])]] = True\n",
        ("tests/unit/test_looped_curve_law.py::test_validate_holds_out_whole_runs_and_every_cooldowns_end",),
        "validate on a curve fit: each cooldown's end (a run's last evaluation) predicted from the curves without it",
    ),
    Mutation(
        "fit-curves-figure-draws-no-prediction",
        "loopscale/plots/loss_curves.py",
        '        ax.plot(curve.steps, pred, color="tab:red" if dashed else "tab:blue", ls="--" if dashed else "-", '
        "lw=1.4)\n",
        "        pass\n",
        ("tests/unit/test_curve_laws.py::test_the_figure_draws_each_runs_measured_loss_and_the_laws_curve",),
        "fit --curves --plot: each run's fitted (or predicted) curve drawn over its measured loss",
    ),
    Mutation(
        "loss-curves-figure-for-a-runs-fit",
        "loopscale/plots/loss_curves.py",
        'tables=("curves",)),',
        'tables=("runs", "curves")),',
        ("tests/unit/test_report.py::test_cli_plot_writes_pngs",),
        "plot / report: a runs-table fit gets the runs-table figures, a curves fit its curves (FitFigure.tables)",
    ),
    # -- issue 58 item 4: blind round 2 (written from the docs and code only; docs/results.md) ---------------
    Mutation(
        "blind2-curves-S_k-exclusive",
        "loopscale/fit/curves/drops.py",
        "parts.append((row, d[kk], area[t[row]] - before[kk],",
        "parts.append((row, d[kk], area[t[row]] - area[kk],",
        ("tests/unit/test_curve_laws.py::test_binned_drop_sum_is_the_published_sum",),
        "the multi-power law's S_k(t) is the lr area from step k to t, step k included",
    ),
    Mutation(
        "blind2-testtime-drift-linear",
        "loopscale/fit/laws/testtime.py",
        "return np.where(fixed > 0, np.maximum(0.0, 1.0 - 1.0 / x), 0.0)",
        "return np.where(fixed > 0, np.maximum(0.0, 0.5 * (x - 1.0)), 0.0)",
        ("tests/unit/test_testtime_law.py::test_noise_free_rows_are_recovered_exactly",),
        "test-time law: a fixed-r model's drift past r_train saturates, delta max(0, 1 - 1/x)",
    ),
    Mutation(
        "blind2-advise-tt-most-passes",
        "loopscale/analysis/advise/testtime.py",
        "k = int(np.flatnonzero(L <= L.min() * (1 + TIE_REL))[0])",
        "k = int(np.argmin(L))",
        (
            ""
            "tests/unit/test_advise_testtime.py::test_a_saturated_model_runs_the_fewest_passes_within_a_hundredth_of_a_percent_of_its_lowest_loss",
        ),
        "advise --max-inference-flops: a model's best is the fewest passes within 0.01% of its lowest loss",
    ),
    Mutation(
        "blind2-advise-tt-bigger-smaller-swapped",
        "loopscale/analysis/advise/testtime.py",
        'if best["N_unique"] < runner["N_unique"]:',
        'if best["N_unique"] > runner["N_unique"]:',
        ("tests/unit/test_advise_testtime.py::test_more_passes_or_a_bigger_model_is_said",),
        "advise --max-inference-flops says whether more passes of the smaller model or the bigger one wins",
    ),
    Mutation(
        "blind2-rsampling-pmf-mean-not-r",
        "loopscale/model/r_sampling.py",
        "mu = math.log(cfg.r) - cfg.r_sigma**2 / 2",
        "mu = math.log(cfg.r)",
        ("tests/unit/test_r_sampling.py::test_poisson_lognormal_pmf_is_the_mixture",),
        "poisson-lognormal r sampling: lambda ~ LogNormal(ln r - sigma^2 / 2, sigma), E[lambda] = r",
    ),
    Mutation(
        "blind2-tune-cochran-df",
        "loopscale/fit/lr_optimum.py",
        "p = float(chdtrc(len(usable) - 1, Q))",
        "p = float(chdtrc(len(usable), Q))",
        (
            ""
            "tests/unit/test_tune_rule.py::test_the_cells_are_weighted_by_their_precision_and_q_is_read_on_cells_minus_one_dof",
        ),
        "tune: Cochran's Q of the cells' optima is read on cells - 1 degrees of freedom",
    ),
    Mutation(
        "blind2-lr-rule-silent-multiplier-1",
        "loopscale/config/lr_rule.py",
        "value = {int(k): v for k, v in by_r.items()}.get(int(r))",
        "value = {int(k): v for k, v in by_r.items()}.get(int(r), 1.0)",
        ("tests/unit/test_tune_rule.py::test_a_sweep_reads_its_tuned_multiplier_and_refuses_an_untuned_r_or_recipe",),
        "an lr rule without the run's r is an error that says how to tune it, never a multiplier of 1",
    ),
    Mutation(
        "blind2-lr-optimum-edge-lowest-ignored",
        "loopscale/fit/lr_optimum.py",
        "side = -1 if vertex < lo - 1e-9 or lowest == lo else 1 if vertex > hi + 1e-9 or lowest == hi else 0",
        "side = -1 if vertex < lo - 1e-9 else 1 if vertex > hi + 1e-9 else 0",
        ("tests/unit/test_lr_optimum.py::test_edges_window_and_flat_losses",),
        "tune: a grid whose lowest loss is on its first or last lr grows on that side",
    ),
    Mutation(
        "blind2-validate-sha-first-table-only",
        "loopscale/fit/validation/inputs.py",
        'ours = {g["sha256"] for g in given}',
        'ours = {g["sha256"] for g in given[:1]}',
        ("tests/unit/test_validate_inputs.py::test_the_fits_table_may_come_in_any_place_among_the_tables_given",),
        "validate: the fit's table may be any of the tables given (an lr grid's beside it)",
    ),
    Mutation(
        "blind2-cache-key-no-run-context",
        "loopscale/train/compile_cache.py",
        '"run": dict(run or {}),',
        '"run": {},',
        ("tests/unit/test_compile_cache.py::test_the_key_holds_the_runs_precision_batch_and_optimizer",),
        "the graph key holds the run's precision, device batch and optimizer",
    ),
    Mutation(
        "blind2-cache-set-aside-second-collides",
        "loopscale/train/compile_cache.py",
        'while (target := folder.with_name(f"{folder.name}.corrupt-{n}")).exists():',
        'if (target := folder.with_name(f"{folder.name}.corrupt-{n}")).exists():',
        ("tests/unit/test_compile_cache.py::test_every_corrupt_folder_is_kept_aside_under_its_own_number",),
        "a corrupt graph folder is set aside as <key>.corrupt-<n>, a new n each time",
    ),
    Mutation(
        "blind2-unknown-pool-runs-typo-job",
        "loopscale/launch/pool_launcher.py",
        "    except UnknownName:  # a typo'd name (a recipe, a form): the whole sweep is refused"
        " before any job starts\n"
        "        raise\n",
        "",
        ("tests/unit/test_unknown_names.py::test_the_pool_refuses_a_sweep_with_an_unknown_name_before_any_job_starts",),
        "the local pool refuses a sweep with an unknown name before any job starts",
    ),
    Mutation(
        "blind2-unknown-variant-label-near-miss",
        "loopscale/config/model.py",
        "    near = None if near is not None and near in cfg.recipe else near\n",
        "",
        (
            ""
            "tests/unit/test_unknown_names.py::test_a_label_that_holds_a_recipes_whole_name_is_a_variant_not_a_near_miss",
        ),
        "a label holding a recipe's whole name (lora2, r1_baseline) is a variant, not a near miss",
    ),
    Mutation(
        "blind2-approach2-window-one-above",
        "loopscale/fit/isoflop.py",
        "return slice(max(0, k - WINDOW_NEIGHBOURS), min(len(y), k + WINDOW_NEIGHBOURS + 1)), None",
        "return slice(max(0, k - WINDOW_NEIGHBOURS), min(len(y), k + WINDOW_NEIGHBOURS)), None",
        ("tests/unit/test_approach2.py::test_the_window_is_the_lowest_size_and_its_two_nearest_on_each_side",),
        "Approach 2's window: the lowest size and its two nearest on each side",
    ),
    Mutation(
        "blind2-approach2-boot-noise-not-per-seed",
        "loopscale/fit/validation/approach2.py",
        "noise = rng.standard_normal((n_boot, len(y))) * sigma / np.sqrt(n)",
        "noise = rng.standard_normal((n_boot, len(y))) * sigma",
        ("tests/unit/test_approach2.py::test_the_bootstrap_moves_a_sizes_mean_by_sigma_over_the_root_of_its_seeds",),
        "Approach 2's bootstrap moves a size's mean by sigma / sqrt(its seeds)",
    ),
    Mutation(
        "blind2-noise-S2-ungrouped",
        "loopscale/fit/noise_scale.py",
        "sums = z if groups is None else np.bincount(groups, weights=z)",
        "sums = z",
        (
            ""
            "tests/unit/test_fit_noise.py::test_seed_repeats_give_a_weighted_fit_with_a_two_stage_bootstrap_and_a_likelihood_profile",
        ),
        "S^2 sums the residuals within each dependence group before squaring",
    ),
    Mutation(
        "blind2-noise-reference-dof-seed-only",
        "loopscale/fit/noise_scale.py",
        "return replace(state, data=replace(data, sigma_dof=seed_dof + dof_scatter)), info",
        "return replace(state, data=replace(data, sigma_dof=seed_dof)), info",
        (
            ""
            "tests/unit/test_fit_noise.py::test_seed_repeats_give_a_weighted_fit_with_a_two_stage_bootstrap_and_a_likelihood_profile",
        ),
        "with S^2 <= 1 the profile's reference is F(1, dof_seed + G - p)",
    ),
    Mutation(
        "blind2-pilot-scale-draw-inverted",
        "loopscale/fit/pilot.py",
        "return 1.0 if dof is None else math.sqrt(dof / rng.chisquare(dof))",
        "return 1.0 if dof is None else math.sqrt(rng.chisquare(dof) / dof)",
        ("tests/unit/test_statistics_off_defaults.py::test_each_sweeps_sigma_is_drawn_as_nu_over_chi2",),
        "power draws each sweep's sigma as sqrt(nu / chi2_nu) x the pilot's",
    ),
    Mutation(
        "blind2-pilot-misfit-per-row",
        "loopscale/fit/pilot.py",
        "eps = eps + misfit_log * at_points[points]",
        "eps = eps + misfit_log * unit_draws(rng, len(points), None, point_units)",
        ("tests/unit/test_statistics_off_defaults.py::test_a_points_misfit_is_shared_by_its_seeds",),
        "power: the law's misfit at a point is shared by the point's seeds",
    ),
    Mutation(
        "muonh-frozen-matrix-not-refused",
        "loopscale/config/model.py",
        'frozen = muonh_frozen(cfg) if optimizer == "muonh" else []',
        "frozen = []",
        ("tests/unit/test_loop_trains.py::test_a_matrix_muonh_cannot_move_is_refused_with_the_fix",),
        "optim=muonh with a zero-initialised matrix (the linear injection's W_s) is refused, naming concat",
    ),
    Mutation(
        "cpu-model-loop-reads-no-state",
        "loopscale/conf/model/cpu.yaml",
        "looped_injection: concat",
        "looped_injection: linear",
        ("tests/unit/test_loop_trains.py::test_the_default_loop_reads_its_state_after_training",),
        "model=cpu at r > 1 loops under either optimizer: its injection's state weight trains",
    ),
    # -- the verdict's JSON form (issue 52: the verdict as dataclasses) ----------------------------------
    Mutation(
        "verdict-record-writes-absent-keys",
        "loopscale/fit/verdict_record.py",
        "        return {k: v for k, v in out.items() if v is not None or k not in optional}",
        "        return out",
        ("tests/unit/test_verdict_record.py::test_an_old_block_reads_back_and_is_written_key_for_key",),
        "a fit JSON's conditioning block keeps the keys fit JSONs always had (an old one is written key for key)",
    ),
    Mutation(
        "verdict-record-check-without-protects",
        "loopscale/fit/verdict_record.py",
        '        if self.protects is None:\n            del out["protects"]',
        '        del out["protects"]',
        ("tests/unit/test_verdict_record.py",),
        "each check in a fit JSON says what its failure costs (`protects`: FAIL or warning in every reader)",
    ),
    Mutation(
        "looped-logr-slope-about-r-1",
        "loopscale/fit/laws/looped_logr.py",
        "data.log_r * (data.log_r - np.log(self.r_ref))",
        "data.log_r * data.log_r",
        ("tests/unit/test_looped_logr.py", "tests/unit/test_law_registry.py"),
        "fit --law looped-logr: phi is the exponent at r = 4 and psi its slope per e-fold of r (docs/design.md)",
    ),
    Mutation(
        "looped-entry-price-paid-at-r-1",
        "loopscale/fit/laws/looped_entry.py",
        "(data.log_r > 0).astype(float)",
        "np.ones_like(data.log_r)",
        ("tests/unit/test_looped_entry.py",),
        "fit --law looped-entry: m_1 = 1 (a plain stack pays no price), m_r = kappa r^phi for r > 1 (docs/design.md)",
    ),
    Mutation(
        "demo-forked-job-line-asks-the-job-its-status",
        "loopscale/demo.py",
        'if isinstance(shown, RunRecord) and shown.status not in ("done", None):',
        'if shown is not None and shown.status not in ("done", None):',
        ("tests/unit/test_demo_job_line.py",),
        "make demo prints a line per trained job and runs to the end (README.md, the first command)",
    ),
    Mutation(
        "power-pilot-drops-the-laws-departure",
        "loopscale/fit/pilot.py",
        "return Looped.name if set(law_params(law)) == set(law_params(Looped.name)) else law",
        "return Looped.name",
        ("tests/unit/test_power.py", "tests/unit/test_power_entry.py"),
        "power simulates the pilot's law (looped-entry with its kappa); a law it cannot draw is refused, not "
        "simulated as r^phi",
    ),
    Mutation(
        "power-holds-kappa-at-the-pilots-estimate",
        "loopscale/fit/pilot.py",
        "theta[i] = float(np.clip(rng.normal(theta[i], se), lo, hi))",
        "theta[i] = float(np.clip(rng.normal(theta[i], 0.0 * se), lo, hi))",
        ("tests/unit/test_power_entry.py",),
        "power with a looped-entry pilot draws kappa per simulated sweep from the pilot's uncertainty of it "
        "(docs/design.md, Power)",
    ),
    Mutation(
        "power-kappa-draw-never-reaches-the-sweep",
        "loopscale/fit/power.py",
        "        if t.params_se:  # the law's own parameters (kappa) as unsure as the pilot's estimate of them",
        "        if False:  # the law's own parameters (kappa) as unsure as the pilot's estimate of them",
        ("tests/unit/test_power_entry.py",),
        "power with a looped-entry pilot draws kappa per simulated sweep from the pilot's uncertainty of it "
        "(docs/design.md, Power)",
    ),
    # -- issue 58 item 4: blind round 3 (written from the docs and code only; docs/results.md) ---------------
    Mutation(
        "blind3-forks-C_forked-drops-first-cooldown",
        "loopscale/train/plan.py",
        "steps = self.parent_steps + sum(b.cooldown_steps for b in self.branches)",
        "steps = self.parent_steps + sum(b.cooldown_steps for b in self.branches[1:])",
        ("tests/integration/test_forks.py::test_plan_branches_and_cost",),
        "a forked plan's FLOPs: the parent plus EVERY branch's cooldown (`loopscale plan`)",
    ),
    Mutation(
        "blind3-wsd-sqrt-cooldown-inverted",
        "loopscale/train/optim/schedule.py",
        'shape = math.sqrt(progress) if optim.decay_shape == "sqrt" else progress',
        'shape = 1 - math.sqrt(1 - progress) if optim.decay_shape == "sqrt" else progress',
        ("tests/unit/test_schedule.py::test_wsd_cooldown_shape_and_endpoints",),
        "optim.decay_shape=sqrt cools down as 1 - (1 - final) sqrt(progress)",
    ),
    Mutation(
        "blind3-packing-best-fit-skips-exact-fit",
        "loopscale/data/document_packing.py",
        "at = bisect.bisect_left(self.free, (len(tail), -1))",
        "at = bisect.bisect_left(self.free, (len(tail) + 1, -1))",
        ("tests/integration/test_packing.py::test_every_document_appears_once_in_order_with_bos_in_front",),
        "data pack's best fit: a tail goes to the open row with the least free space that holds it (an exact fit too)",
    ),
    Mutation(
        "blind3-packing-closes-emptiest-row",
        "loopscale/data/document_packing.py",
        "yield self._close(self.free[0])",
        "yield self._close(self.free[-1])",
        ("tests/integration/test_packing.py::test_every_document_appears_once_in_order_with_bos_in_front",),
        "data pack: past max_open_rows the fullest open row is closed",
    ),
    Mutation(
        "blind3-packed-targets-mask-one-late",
        "loopscale/data/packed_batches.py",
        "y[np.arange(y.shape[1])[None, :] >= n_tokens[:, None] - 1] = IGNORE_INDEX",
        "y[np.arange(y.shape[1])[None, :] >= n_tokens[:, None]] = IGNORE_INDEX",
        ("tests/integration/test_rows.py::test_padding_targets_are_masked_and_inputs_are_shifted",),
        "packed rows: no padding id is ever a target (targets from n_tokens - 1 on are IGNORE_INDEX)",
    ),
    Mutation(
        "blind3-windows-rank-draws-own-windows",
        "loopscale/data/windows.py",
        "offsets = window_offsets(len(tokens), step, 0, seed, batch_size * world_size * grad_accum, seq_len)",
        "offsets = window_offsets(len(tokens), step, rank, seed, batch_size * world_size * grad_accum, seq_len)",
        (
            ""
            "tests/integration/test_datamodule.py::test_a_steps_global_batch_is_the_same_for_any_split_over_ranks_and_accumulation",
        ),
        "a step's global batch is the same however it is split over ranks and accumulation",
    ),
    Mutation(
        "blind3-curve-cooldown-half-not-third",
        "loopscale/data/heldout.py",
        "n_cool = n_regular // 3 if cooldown_start",
        "n_cool = n_regular // 2 if cooldown_start",
        ("tests/unit/test_curve_steps.py::test_log_spaced_regular_corners_and_cooldown",),
        "the loss curve: a third of the regular evaluations inside a wsd cooldown",
    ),
    Mutation(
        "blind3-collect-fork-step-row-not-parent",
        "loopscale/train/collect.py",
        'from_parent = fork_step is not None and point["step"] <= fork_step',
        'from_parent = fork_step is not None and point["step"] < fork_step',
        ("tests/integration/test_collect_records.py::test_collect_writes_the_curves_beside_the_runs",),
        "runs_curves.csv: from_parent marks a branch's rows up to and including its fork step",
    ),
    Mutation(
        "blind3-resume-from-oldest-checkpoint",
        "loopscale/train/checkpoint.py",
        "return max(candidates, key=lambda p: p.stat().st_mtime_ns, default=None)",
        "return min(candidates, key=lambda p: p.stat().st_mtime_ns, default=None)",
        ("tests/unit/test_resume_checkpoint.py::test_the_newer_of_last_ckpt_and_the_hpc_checkpoints_is_resumed",),
        "a requeued run resumes from the newer of last.ckpt and the hpc checkpoints",
    ),
    Mutation(
        "blind3-optimal-size-rho-exponent-sign",
        "loopscale/fit/derived.py",
        'G = (a * params["A"] * eff_per_size**-a / (b * params["B"])) ** (1 / (a + b))',
        'G = (a * params["A"] * eff_per_size**a / (b * params["B"])) ** (1 / (a + b))',
        ("tests/unit/test_derived.py::test_compute_optimal_matches_numerical_minimum",),
        "N* = (alpha A c^-alpha / (beta B))^(1/(alpha+beta)) (C/f)^(beta/(alpha+beta)) at r > 1",
    ),
    Mutation(
        "blind3-inference-flops-keep-truncation",
        "loopscale/model/accounting.py",
        "    full.bptt_k = None\n",
        "    full.bptt_k = cfg.bptt_k\n",
        ("tests/unit/test_inference_flops.py::test_serving_costs_a_third_of_full_backprop_training",),
        "serving F_infer = F / 3 of the same model with full backprop, truncated or not",
    ),
    Mutation(
        "blind3-eval-flops-causal-attention",
        "loopscale/model/accounting.py",
        "layer = block_matrix_params(m) + 2 * m.seq_len * m.d_model",
        "layer = block_matrix_params(m) + m.seq_len * m.d_model",
        (
            ""
            "tests/unit/test_launch.py::test_gpu_hours_follow_from_training_and_validation_at_the_assumed_mfu_and_the_device_peak",
        ),
        "validation FLOPs count the full T x T attention forward (4 d T a layer pass)",
    ),
    Mutation(
        "blind3-pool-wall-shortest-first",
        "loopscale/launch/wall_time.py",
        "jobs = sorted((job_wall_s(t, p, pool) for t, p in zip(train_s, points)), reverse=True)",
        "jobs = sorted(job_wall_s(t, p, pool) for t, p in zip(train_s, points))",
        ("tests/unit/test_cost_probe.py::test_the_pools_wall_time_is_its_list_schedule",),
        "plan's pool wall time: the jobs handed out longest first, whatever their order",
    ),
    Mutation(
        "blind3-collapse-ratio-over-larger",
        "loopscale/analysis/conditioning.py",
        'spreads["phi_fit"] / min(spreads["phi_0"], spreads["phi_1"]),',
        'spreads["phi_fit"] / max(spreads["phi_0"], spreads["phi_1"]),',
        ("tests/unit/test_conditioning.py::test_the_collapse_ratio_is_over_the_better_of_phi_0_and_phi_1",),
        "the collapse check: at most half of the better (smaller) RMS of phi = 0 and phi = 1",
    ),
    Mutation(
        "blind3-advise-winner-one-sided-95",
        "loopscale/analysis/advise/advice.py",
        "    tail = 100 * (1 - level) / 2\n    for r in order:",
        "    tail = 100 * (1 - level)\n    for r in order:",
        (
            ""
            "tests/unit/test_advise.py::test_a_winner_needs_every_other_r_worse_in_more_than_97_5_percent_of_the_replicates",
        ),
        "advise names a winner only when every other r is worse in more than 97.5% of the replicates",
    ),
    Mutation(
        "blind3-estimate-first-attempt-charged-a-requeue",
        "loopscale/launch/estimate.py",
        "allowed_h = limits.attempts * limits.timeout_min / 60 - limits.max_num_timeout * loss_h",
        "allowed_h = limits.attempts * limits.timeout_min / 60 - limits.attempts * loss_h",
        ("tests/unit/test_launch.py::test_a_job_that_cannot_finish_is_named_with_the_overrides_that_let_it_through",),
        "a job fits its launcher when attempts x timeout - requeues x loss >= wall",
    ),
    Mutation(
        "blind3-paper-width-rounds-down",
        "loopscale/config/naming.py",
        "return -(-64 * size // 128) * 128",
        "return (64 * size // 128) * 128",
        ("tests/unit/test_accounting.py::test_paper_preset_equals_the_authors_counts",),
        "a paper size's width: 64 s rounded up to a multiple of 128",
    ),
    Mutation(
        "blind3-lock-future-heartbeat-live",
        "loopscale/train/lock.py",
        "if abs(age) > STALE_AFTER_S:",
        "if age > STALE_AFTER_S:",
        ("tests/integration/test_runlock.py::test_a_heartbeat_far_in_the_future_is_stale",),
        "a lock whose heartbeat is 10 minutes in the future is stale",
    ),
    Mutation(
        "blind3-slurm-mem-from-first-job",
        "loopscale/launch/launchers.py",
        "return JobLayout(first.devices, first.num_nodes, first.accelerator, max(sizes) if sizes else None)",
        "return JobLayout(first.devices, first.num_nodes, first.accelerator, sizes[0] if sizes else None)",
        ("tests/unit/test_launcher.py::test_one_sweep_needs_one_layout_and_takes_the_largest_model",),
        "the SLURM launcher's mem_gb from the sweep's largest model",
    ),
    Mutation(
        "blind3-isoflop-minimum-at-lower-edge-inside",
        "loopscale/fit/isoflop.py",
        "    if k in (0, len(y) - 1):\n",
        "    if k == len(y) - 1:\n",
        ("tests/unit/test_conditioning.py::test_isoflop_minimum_inside_or_at_the_edge",),
        "an r = 1 iso-FLOP minimum at the smallest width is not inside",
    ),
    Mutation(
        "curve-r-eval-scored-at-the-trained-r",
        "loopscale/train/lightning_module.py",
        "total += module.model(x, y, r=passes).double() * targets",
        "total += module.model(x, y).double() * targets",
        (
            "tests/integration/test_curve_r_eval.py::"
            "test_each_curve_point_scores_as_the_model_rebuilt_at_that_r_and_the_plan_prices_them",
        ),
        "trainer.curve_r_eval: each curve point's score at r_eval is what the model rebuilt at that r computes",
    ),
    Mutation(
        "curve-r-eval-priced-at-the-trained-r",
        "loopscale/train/plan.py",
        "        return sum(self.eval_flops[r] for r in self.curve_r_evals)\n",
        "        return len(self.curve_r_evals) * self.eval_flops[self.curve_r_evals[0]]\n",
        (
            "tests/integration/test_curve_r_eval.py::"
            "test_each_curve_point_scores_as_the_model_rebuilt_at_that_r_and_the_plan_prices_them",
            "tests/integration/test_curve_r_eval.py::"
            "test_the_default_records_as_before_and_collect_writes_each_step_at_each_r_eval",
        ),
        "trainer.curve_r_eval: the plan's curve FLOPs count each r_eval at its own forward FLOPs per token",
    ),
    Mutation(
        "fit-curves-mixes-pass-counts",
        "loopscale/fit/curves/table.py",
        '    keep = r_eval.isna() | (r_eval == pd.to_numeric(table["r"], errors="coerce"))\n',
        "    keep = r_eval.notna() | r_eval.isna()\n",
        (
            "tests/integration/test_curve_r_eval.py::test_fit_curves_reads_each_runs_trained_r_alone",
            "tests/unit/test_curve_r_eval_table.py::test_a_curve_law_reads_each_runs_trained_r_alone",
        ),
        "fit --curves / --law looped-curve read each run's curve at its trained r, never a mix of r_eval",
    ),
    Mutation(
        "launch-estimate-leaves-out-scoring",
        "loopscale/launch/estimate.py",
        " + scoring_flops(job, final)\n",
        "\n",
        (
            "tests/unit/test_launch.py::"
            "test_gpu_hours_follow_from_training_and_validation_at_the_assumed_mfu_and_the_device_peak",
            "tests/unit/test_launch.py::test_the_curves_scored_across_r_are_priced_each_r_eval_at_its_own_flops",
        ),
        "launch estimates count the loss curve's evaluations (each curve r_eval at its own FLOPs) and r_eval scoring",
    ),
    Mutation(
        "blind4-annealing-momentum-decays-once-per-stretch",
        "loopscale/fit/curves/drops.py",
        "value = value * decay ** (k - last) + d[k]",
        "value = value * decay + d[k]",
        ("tests/unit/test_curve_laws.py::test_annealing_momentum_decays_at_every_step_between_two_drops",),
        "the LR-annealing law's momentum m_k = 0.999 m_{k-1} + drop_k decays at every step, also between drops",
    ),
    Mutation(
        "blind4-curves-table-empty-r_eval-dropped",
        "loopscale/fit/curves/table.py",
        'keep = r_eval.isna() | (r_eval == pd.to_numeric(table["r"], errors="coerce"))',
        'keep = r_eval == pd.to_numeric(table["r"], errors="coerce")',
        ("tests/unit/test_curve_r_eval_table.py::test_a_curve_law_reads_each_runs_trained_r_alone",),
        "a curves row with an empty r_eval (written before the column) is the trained r",
    ),
    Mutation(
        "blind4-multipower-C-to-user-wrong-sign",
        "loopscale/fit/curves/multipower.py",
        'values["C"] *= self.lr_scale ** (values["gamma"] - 1.0)',
        'values["C"] *= self.lr_scale ** (1.0 - values["gamma"])',
        ("tests/unit/test_curve_laws.py::test_user_parameters_round_trip_whatever_the_lr_scale",),
        "the multi-power law's C is reported in absolute units, C = C' s^(gamma - 1)",
    ),
    Mutation(
        "blind4-logr-multiplier-reads-phi-at-r1",
        "loopscale/fit/laws/looped_logr.py",
        "return np.exp((phi + psi * (log_r - np.log(self.r_ref))) * log_r)",
        "return np.exp((phi + psi * log_r) * log_r)",
        ("tests/unit/test_looped_logr.py::test_the_multiplier_is_r_to_the_exponent_that_runs_with_ln_r",),
        "looped-logr's multiplier r^(phi + psi ln(r / 4)): phi is read at r = 4",
    ),
    Mutation(
        "blind4-logr-counts-r1-as-looped",
        "loopscale/fit/laws/looped_logr.py",
        "if np.count_nonzero(looped > 1) < 2:",
        "if np.count_nonzero(looped >= 1) < 2:",
        ("tests/unit/test_looped_logr.py::test_a_table_with_one_r_above_one_is_refused",),
        "looped-logr needs two or more r > 1 (r = 1 is no slope)",
    ),
    Mutation(
        "blind4-lr-rule-shipped-before-user-dirs",
        "loopscale/config/lr_rule.py",
        "dirs = search if search is not None else [*user_config_dirs(), sweeps_dir()]",
        "dirs = search if search is not None else [sweeps_dir(), *user_config_dirs()]",
        ("tests/unit/test_tune_rule.py::test_a_users_rule_is_read_before_the_shipped_one",),
        "an lr rule in a LOOPSCALE_CONFIG_PATH dir is read before the shipped sweeps/ one",
    ),
    Mutation(
        "blind4-lr-rule-width-transfer-inverted",
        "loopscale/config/lr_rule.py",
        'scaled = float(value) * (float(width) / float(transfer["ref_width"])) ** float(transfer["width_exponent"])',
        'scaled = float(value) * (float(transfer["ref_width"]) / float(width)) ** float(transfer["width_exponent"])',
        (
            ""
            "tests/unit/test_tune_rule.py::test_a_width_transfer_scales_the_multiplier_by_width_over_ref_width_to_the_exponent",
        ),
        "a width-transfer rule multiplies by (width / ref_width)^gamma",
    ),
    Mutation(
        "blind4-lr-rule-write-drops-other-recipes",
        "loopscale/config/lr_rule.py",
        '    rule = read_rule(path) or {"experiment": experiment, "multipliers": {}, "recipes": {}}',
        '    rule = {"experiment": experiment, "multipliers": {}, "recipes": {}}',
        ("tests/unit/test_tune_rule.py::test_tuning_one_recipe_keeps_the_other_recipes_rule",),
        "tuning one recipe keeps the other recipes' multipliers in the rule file",
    ),
    Mutation(
        "blind4-testtime-better-shape-is-worse",
        "loopscale/fit/testtime.py",
        "better = None if not rows_used else min(SHAPES, key=lambda s: mean[s])",
        "better = None if not rows_used else max(SHAPES, key=lambda s: mean[s])",
        ("tests/unit/test_testtime_law.py::test_shapes_compared_on_held_out_rows",),
        "the better test-time shape is the one with the lower held-out error",
    ),
    Mutation(
        "blind4-testtime-gain-next-pass-sign",
        "loopscale/fit/testtime.py",
        '"gain_next_pass": (curve[:-1] - curve[1:]).tolist(),',
        '"gain_next_pass": (curve[1:] - curve[:-1]).tolist(),',
        ("tests/unit/test_testtime_record.py::test_the_record_made_now_is_written_as_before",),
        "the gain of one more pass is L(r) - L(r + 1)",
    ),
    Mutation(
        "blind4-testtime-table-label-merges-shared-run-names",
        "loopscale/train/testtime_eval.py",
        'label = row["run_name"] if names.count(row.get("run_name")) == 1 else row["run_dir"]',
        'label = row["run_name"]',
        (
            ""
            "tests/unit/test_testtime_eval.py::test_the_testtime_tables_model_is_the_run_name_or_the_run_dir_where_two_runs_share_one",
        ),
        "the test-time table's model is the run dir where two runs share a name",
    ),
    Mutation(
        "blind4-testtime-mtt-floor-without-data-term",
        "loopscale/fit/testtime_phi.py",
        'floor = train["E"] + train["B"] * D ** -train["beta"]',
        'floor = train["E"]',
        ("tests/unit/test_testtime_law.py::test_testtime_multiplier_inverts_the_training_law",),
        "m_tt inverts the whole training law, E + B D^-beta its floor",
    ),
    Mutation(
        "blind4-pilot-parent-share-as-amplitude",
        "loopscale/fit/pilot.py",
        "eps = sigma_log * (math.sqrt(share) * shared + math.sqrt(1 - share) * own)",
        "eps = sigma_log * (share * shared + (1 - share) * own)",
        (
            ""
            "tests/unit/test_statistics_off_defaults.py::test_the_simulated_noise_shares_rho_of_its_variance_within_a_forked_job",
        ),
        "power's simulated noise shares rho of its variance (sqrt(rho) amplitudes) within a forked job",
    ),
    Mutation(
        "blind4-pilot-split-draw-seed-share-w",
        "loopscale/fit/pilot.py",
        "return truth.sigma_log * math.sqrt(1 - w), math.sqrt(truth.sigma_log**2 * w + truth.misfit_log**2)",
        "return truth.sigma_log * math.sqrt(w), math.sqrt(truth.sigma_log**2 * w + truth.misfit_log**2)",
        ("tests/unit/test_power_honest.py::test_the_drawn_split_keeps_a_one_run_points_variance_at_the_pilots_sigma",),
        "a pilot without seed repeats draws tau^2 = w sigma^2 and seed variance (1 - w) sigma^2",
    ),
    Mutation(
        "blind4-pilot-rms-correction-inverted",
        "loopscale/fit/pilot.py",
        "sigma = float(fit.residual_rms_log) * math.sqrt(n / (n - p))",
        "sigma = float(fit.residual_rms_log) * math.sqrt((n - p) / n)",
        ("tests/unit/test_power.py::test_the_pilots_noise_is_stated_measured_or_its_corrected_residual",),
        "a pilot's RMS residual is scaled by sqrt(n / (n - p))",
    ),
    Mutation(
        "blind4-record-profile-grid-under-x",
        "loopscale/fit/record_blocks.py",
        'return out if self.x is ABSENT else {**out, self.param or "x": self.x}',
        'return out if self.x is ABSENT else {**out, "x": self.x}',
        ("tests/unit/test_fit_record_blocks.py::test_an_old_record_reads_back_and_is_written_key_for_key",),
        "a fit record's profile_phi holds its grid under the parameter's name",
    ),
    Mutation(
        "blind4-record-replace-drops-unknown-keys",
        "loopscale/fit/record_blocks.py",
        "_remember(new, self._extra, self._keys)",
        "_remember(new, {}, self._keys)",
        (
            ""
            "tests/unit/test_fit_record_blocks.py::test_a_key_the_block_does_not_name_survives_replace_and_is_written_back_in_place",
        ),
        "a record block's unknown keys survive replace() and are written back",
    ),
    Mutation(
        "blind4-identity-unrecorded-data-hash-counts",
        "loopscale/train/identity.py",
        "new = {k: v for k, v in new.items() if k in old or (k in defaults and v != defaults[k])}",
        "new = {k: v for k, v in new.items() if k in old or k not in defaults or v != defaults[k]}",
        (
            ""
            "tests/integration/test_run_identity.py::test_a_run_dir_from_before_the_data_hash_resumes_and_one_that_recorded_it_is_held_to_it",
        ),
        "a run dir from before the data's content hash resumes (the hash counts only where recorded)",
    ),
    Mutation(
        "blind4-approach2-sigma-smaller-of-two",
        "loopscale/fit/validation/approach2.py",
        "return max(found)",
        "return min(found)",
        ("tests/unit/test_approach2.py::test_the_bootstrap_moves_a_sizes_mean_by_sigma_over_the_root_of_its_seeds",),
        "Approach 2's sigma is the larger of the seed sigma and the windows' scatter",
    ),
    Mutation(
        "blind4-approach2-scale-factor-narrows",
        "loopscale/fit/validation/approach2.py",
        "scale = float(np.sqrt(max(1.0, chi2 / dof))) if dof > 0 else 1.0",
        "scale = float(np.sqrt(chi2 / dof)) if dof > 0 else 1.0",
        ("tests/unit/test_approach2.py::test_the_exponents_se_is_widened_by_the_budgets_scatter_and_never_narrowed",),
        "Approach 2's exponent se is widened by sqrt(chi2 / dof), never narrowed",
    ),
    Mutation(
        "blind5-unit-draws-jitter-not-rescaled",
        "loopscale/fit/pilot.py",
        "return (values[rng.integers(0, len(values), n)] + h * rng.standard_normal(n)) / math.sqrt(1 + h * h)",
        "return values[rng.integers(0, len(values), n)] + h * rng.standard_normal(n)",
        (
            ""
            "tests/unit/test_power_honest.py::test_a_pools_smoothed_draws_have_unit_variance_and_each_level_draws_from_its_own_pool",
        ),
        "power's smoothed bootstrap of the pilot's residuals is scaled back to unit variance",
    ),
    Mutation(
        "blind5-draw-noise-run-from-point-pool",
        "loopscale/fit/pilot.py",
        "own = unit_draws(rng, len(clusters), tail_dof, seed_units)",
        "own = unit_draws(rng, len(clusters), tail_dof, point_units)",
        (
            ""
            "tests/unit/test_power_honest.py::test_a_pools_smoothed_draws_have_unit_variance_and_each_level_draws_from_its_own_pool",
        ),
        "power draws u_job and u_run from the seed-level pool, u_point from the point-level one",
    ),
    Mutation(
        "blind5-share-draw-se-as-variance",
        "loopscale/fit/pilot.py",
        "return float(np.clip(rng.normal(truth.parent_share, truth.parent_share_se), 0.0, 1.0))",
        "return float(np.clip(rng.normal(truth.parent_share, truth.parent_share_se**2), 0.0, 1.0))",
        (
            ""
            "tests/unit/test_power_honest.py::test_a_forked_pilot_says_how_sure_it_is_of_its_parent_share_and_power_draws_the_share_from_that",
        ),
        "each simulated sweep draws the parent share from N(rho, se^2)",
    ),
    Mutation(
        "blind5-stated-share-keeps-measured-se",
        "loopscale/fit/pilot.py",
        'shape["parent_share_se"] = share_se',
        'shape["parent_share_se"] = float(noise.get("parent_share_se") or 0.0)',
        (
            ""
            "tests/unit/test_power_honest.py::test_a_stated_parent_share_is_exact_and_a_measured_one_carries_its_standard_error",
        ),
        "a stated --parent-share is exact (no se drawn)",
    ),
    Mutation(
        "blind5-mde-point-scales-up",
        "loopscale/fit/power_summary.py",
        "point = mde_of(up / f, down / f)",
        "point = mde_of(up * f, down * f)",
        ("tests/unit/test_power_honest.py::test_a_pilot_with_one_dof_of_sigma_plans_with_an_uncertain_sigma",),
        "the MDE at sigma's point value divides each sweep's distances by its sigma draw f",
    ),
    Mutation(
        "blind5-comparison-copy-shares-parent-jobs",
        "loopscale/fit/power.py",
        'copy[PARENT_COLUMN].astype(str).map(lambda p: f"{p}@{recipe}" if p else p)',
        "copy[PARENT_COLUMN].astype(str)",
        ("tests/unit/test_power.py::test_a_comparison_copies_the_looped_runs_as_new_jobs_and_shares_the_dense_ones",),
        "power's second recipe copies the looped runs as jobs of their own",
    ),
    Mutation(
        "blind5-recommend-fewer-seeds",
        "loopscale/analysis/power_designs.py",
        'k = max(k, d["seeds"])',
        "k = max(k, 1)",
        ("tests/unit/test_power.py::test_detect_never_recommends_fewer_seeds_than_a_design_has",),
        "--detect never recommends fewer seeds than a design has",
    ),
    Mutation(
        "blind5-approach2-weights-without-tau",
        "loopscale/fit/validation/approach2.py",
        "w = 1 / (se**2 + tau2)",
        "w = 1 / se**2",
        ("tests/unit/test_approach2.py::test_tau_is_dersimonian_lairds_moment_rule_written_out",),
        "Approach 2's line is weighted by 1 / (se^2 + tau^2)",
    ),
    Mutation(
        "blind5-approach2-dl-trace-sign",
        "loopscale/fit/validation/approach2.py",
        "trace_p = float(np.sum(w) - np.trace(",
        "trace_p = float(np.sum(w) + np.trace(",
        ("tests/unit/test_approach2.py::test_tau_is_dersimonian_lairds_moment_rule_written_out",),
        "Approach 2's tau^2 is DerSimonian-Laird's (Q - dof) / tr(P)",
    ),
    Mutation(
        "blind5-interp-vertex-upper-edge-counted",
        "loopscale/fit/validation/approach2.py",
        "return None if k in (0, len(grid) - 1) else float(grid[k])",
        "return None if k == 0 else float(grid[k])",
        (
            ""
            "tests/unit/test_approach2.py::test_the_interpolation_rule_finds_the_minimum_of_the_curve_through_every_size",
        ),
        "the interpolation rule's N* is None at either edge of the sizes",
    ),
    Mutation(
        "blind5-scatter-S2-not-normalised-by-group-size",
        "loopscale/fit/noise_scale.py",
        "return float(np.sum(sums**2) * G / (n * dof)), dof",
        "return float(np.sum(sums**2) / dof), dof",
        (
            ""
            "tests/unit/test_fit_noise.py::test_seed_repeats_give_a_weighted_fit_with_a_two_stage_bootstrap_and_a_likelihood_profile",
        ),
        "S^2 = sum_g (sum z)^2 / (n (G - p) / G)",
    ),
    Mutation(
        "blind5-seed-scale-reference-dof-without-scatter",
        "loopscale/fit/noise_scale.py",
        "return replace(state, data=replace(data, sigma_dof=seed_dof + dof_scatter)), info",
        "return replace(state, data=replace(data, sigma_dof=seed_dof)), info",
        (
            ""
            "tests/unit/test_fit_noise.py::test_seed_repeats_give_a_weighted_fit_with_a_two_stage_bootstrap_and_a_likelihood_profile",
        ),
        "with S^2 <= 1 the profile's reference is F(1, seed dof + G - p)",
    ),
    Mutation(
        "blind5-point-pool-from-runs",
        "loopscale/fit/noise_scale.py",
        "seed, at_points = _unit_pool(dev), _unit_pool(zbar)",
        "seed, at_points = _unit_pool(dev), _unit_pool(z)",
        (
            ""
            "tests/unit/test_noise_honest.py::test_the_misfit_at_a_point_and_the_residual_pools_are_their_formulas_written_out",
        ),
        "the point-level residual pool is the points' mean residuals",
    ),
    Mutation(
        "blind5-point-misfit-seed-noise-not-averaged",
        "loopscale/fit/noise_scale.py",
        "var_mean = np.bincount(point, weights=seed_sigma**2) / n_g**2",
        "var_mean = np.bincount(point, weights=seed_sigma**2) / n_g",
        (
            ""
            "tests/unit/test_noise_honest.py::test_the_misfit_at_a_point_and_the_residual_pools_are_their_formulas_written_out",
        ),
        "the misfit at a point subtracts each point's seed noise over its own seeds, sigma^2 / n_g",
    ),
    Mutation(
        "blind5-equivalence-margin-rounded-to-nearest",
        "loopscale/fit/verdict.py",
        "margin = math.ceil(max(-lo, hi) * 100 - 1e-9) / 100",
        "margin = round(max(-lo, hi) * 100) / 100",
        ("tests/unit/test_statistics_off_defaults.py::test_delta_phi_answers_on_asymmetric_and_one_sided_intervals",),
        "no difference detected: x is the interval's larger side rounded UP to 0.01",
    ),
    Mutation(
        "blind5-holdout-check-signed-error",
        "loopscale/fit/verdict.py",
        'mre = float(fit.holdout["mean_abs_rel_error"])',
        'mre = float(fit.holdout["mean_rel_error"])',
        ("tests/unit/test_verdict.py::test_the_held_out_check_reads_the_mean_absolute_error_not_the_signed_one",),
        "the held-out check reads the mean |relative error|",
    ),
    Mutation(
        "blind5-conditioning-within-noise-edge-fails",
        "loopscale/analysis/conditioning.py",
        'bool(minima) and all(m["bracketed"] for m in minima),',
        'bool(minima) and all(m["inside"] for m in minima),',
        (
            ""
            "tests/unit/test_conditioning.py::test_an_edge_minimum_within_the_noise_counts_as_inside_and_one_beyond_it_does_not",
        ),
        "conditioning: an edge minimum within the noise counts as inside",
    ),
    Mutation(
        "blind5-curve-steps-drop-corners",
        "loopscale/data/heldout.py",
        "picked = np.round(np.concatenate([*points, np.asarray(list(corners), dtype=float), [total_steps]]))",
        "picked = np.round(np.concatenate([*points, [total_steps]]))",
        ("tests/unit/test_curve_steps.py::test_log_spaced_regular_corners_and_cooldown",),
        "the loss curve is evaluated at the schedule's corners",
    ),
    Mutation(
        "blind5-wsd-decay-start-truncates",
        "loopscale/train/optim/schedule.py",
        "return total_steps - int(round(decay_frac * total_steps))",
        "return total_steps - int(decay_frac * total_steps)",
        ("tests/unit/test_schedule.py::test_the_wsd_cooldown_is_the_last_round_of_decay_frac_steps",),
        "the wsd cooldown is the last round(decay_frac x steps) steps",
    ),
    Mutation(
        "blind5-forkkeys-costs-swapped",
        "loopscale/train/forks.py",
        "        C_independent=plan.C_independent,\n        C_forked=plan.C_forked,",
        "        C_independent=plan.C_forked,\n        C_forked=plan.C_independent,",
        ("tests/integration/test_forks.py::test_forked_run_bookkeeping_resume_and_bit_identity",),
        "a stable parent's record holds C_independent and C_forked as planned",
    ),
    Mutation(
        "power-curves-counted-as-final-points",
        "loopscale/analysis/power_designs.py",
        "    if used > 1.0:\n        f = 1.0 / math.sqrt(used)",
        "    if False:\n        f = 1.0 / math.sqrt(used)",
        ("tests/unit/test_curve_worth.py::test_power_gives_a_pilot_with_noise_between_evaluations_a_smaller_mde",),
        "power counts a curve-law pilot's curves toward the MDE: a run's curve worth n_eff final points",
    ),
    Mutation(
        "curve-worth-forgets-the-run-offset",
        "loopscale/fit/curve_worth.py",
        "return noise.sigma_run_log**2 + noise.sigma_eval_log**2 * noise.rho",
        "return 0 * noise.sigma_run_log**2 + noise.sigma_eval_log**2 * noise.rho",
        (
            "tests/unit/test_curve_worth.py::test_power_gives_a_pilot_whose_curve_noise_is_all_run_level_no_gain",
            "tests/unit/test_curve_worth.py::"
            "test_a_curve_is_worth_one_final_point_under_run_level_noise_and_up_to_its_evaluations_otherwise",
        ),
        "a curve's run-level noise is one draw: a pilot whose curve noise is all run-level gets no gain from curves",
    ),
    Mutation(
        "curve-worth-forked-branches-as-runs-of-their-own",
        "loopscale/fit/curve_worth.py",
        '        if parent.iloc[i] == "":',
        "        if True:",
        (
            "tests/unit/test_curve_worth_forked.py::test_a_jobs_branches_hold_its_parents_evaluations_once_on_one_ar1_path",
            "tests/unit/test_curve_worth_forked.py::"
            "test_a_forked_design_is_worth_less_than_its_branches_trained_alone_and_a_job_is_one_draw",
        ),
        "a forked job's branches hold its stable parent's evaluations once (issue 55 item 3): its curves are worth "
        "less than as many runs of their own",
    ),
    Mutation(
        "loop-group-leaves-the-injection-out",
        "loopscale/train/optim/groups.py",
        'per_pass = loop_group and name.startswith(("recurrent.", "injection."))',
        'per_pass = loop_group and name.startswith("recurrent.")',
        (
            "tests/unit/test_loop_lr.py::test_the_loop_group_holds_exactly_the_recurrent_blocks_and_the_injections_matrices",
        ),
        "optim.lr_loop moves every matrix applied at every pass: the recurrent block's and the injection's",
    ),
    Mutation(
        "loop-lr-not-transferred",
        "loopscale/train/optim/lr_transfer.py",
        "        LOOP: batch * data,\n",
        "        LOOP: batch,\n",
        (
            "tests/unit/test_loop_lr.py::test_the_loop_group_is_the_matrix_lr_times_lr_loop_under_the_published_transfer",
        ),
        "the loop group's lr is transferred as the other matrices' (batch and D factors)",
    ),
    Mutation(
        "loop-rule-read-at-the-nearest-width",
        "loopscale/config/lr_rule.py",
        "            share = (math.log(d) - math.log(w0)) / (math.log(w1) - math.log(w0))",
        "            share = round((math.log(d) - math.log(w0)) / (math.log(w1) - math.log(w0)))",
        (
            "tests/unit/test_tune_rule.py::test_the_loop_rule_is_read_per_width_log_linear_between_tuned_widths_and_never_extrapolated",
        ),
        "a loop rule is log-linear in ln width between tuned widths",
    ),
    Mutation(
        "loop-rule-writes-a-flat-grids-lowest-loss",
        "loopscale/launch/tune_rules.py",
        "        if f is None or not (f.log_se or f.bounded):\n",
        "        if f is None or not f.best:\n",
        ("tests/unit/test_tune_pure_exact.py::test_a_loop_cell_whose_losses_do_not_curve_upwards_writes_no_rule",),
        "a loop rule's optimum is a parabola curving upwards with its se (what the lr axis combines), never a flat "
        "grid's lowest loss",
    ),
    Mutation(
        "tune-width-transfer-without-an-identified-gamma",
        "loopscale/launch/tune_rules.py",
        "    if all(len(w) < 2 for w in at_r.values()):",
        "    if False:",
        ("tests/unit/test_tune_pure_exact.py::test_a_width_transfer_needs_one_r_with_optima_at_two_widths",),
        "a tune fits a width transfer only where one r has optima at two widths (else each r's intercept takes "
        "its width and gamma is not identified)",
    ),
    Mutation(
        "loop-tune-default-cells-miss-the-smallest-width",
        "loopscale/launch/tune.py",
        '    if axis == "loop":\n        widths = sorted(',
        "    if False:\n        widths = sorted(",
        (
            "tests/unit/test_tune_pure_exact.py::test_the_loop_axis_default_cells_span_every_width_the_experiment_trains",
        ),
        "a loop tune's default cells span every width the experiment trains (its rule is never read past them)",
    ),
    Mutation(
        "tune-keys-a-paper-cell-by-its-size",
        "loopscale/launch/tune_rules.py",
        'return int(part[1:]) if part[0] == "d" else paper_width(int(part[1:]))',
        "return int(part[1:])",
        (
            "tests/unit/test_tune_pure_exact.py::"
            "test_a_paper_size_cell_is_keyed_by_its_d_model_as_the_experiment_reads_its_rules",
        ),
        "a tune's rules (the width transfer's reference, the loop rule's widths) are keyed by d_model, as "
        "`${model.d_model}` reads them, a paper size s as its width 64 s rounded up to 128",
    ),
    Mutation(
        "curve-worth-each-branch-its-own-cluster",
        "loopscale/fit/curve_worth.py",
        'labels = np.unique(rows["job"].to_numpy(), return_inverse=True)[1]',
        'labels = np.unique(rows["run"].to_numpy(), return_inverse=True)[1]',
        ("tests/unit/test_curve_worth_forked.py::test_n_eff_is_the_reported_width_ratio_with_the_job_as_the_cluster",),
        "n_eff clusters a forked job's curves and final points by the job, as the fits' intervals do",
    ),
    Mutation(
        "curve-worth-seeds-share-one-parent",
        "loopscale/fit/curve_worth.py",
        'return parent.where((parent == "") | (seed == 0), parent + "-seed" + seed.astype(str))',
        "return parent",
        (
            "tests/unit/test_curve_worth_forked.py::test_each_seed_of_a_forked_table_design_keeps_its_own_parents_evaluations",
        ),
        "each seed of a forked design trains its own stable parent: the curve fit keeps each seed's shared evaluations",
    ),
    Mutation(
        "curve-sigma-position-weights-ignored",
        "loopscale/fit/position_sigma.py",
        "return np.maximum(model.sigma(position_covariates(np.asarray(share, dtype=float))), MIN_SIGMA_LOG)",
        "return np.full(len(share), float(np.mean(model.sigma(position_covariates(np.asarray(share, dtype=float))))))",
        (
            "tests/unit/test_position_sigma.py::"
            "test_phi_interval_weighted_by_position_narrows_to_the_generalised_least_squares_width",
            "tests/unit/test_validate_position.py::test_a_folds_weights_come_from_its_training_rows_alone",
        ),
        "fit --curve-sigma position standardises a curve fit's residuals by their sigma by position along the run "
        "(issue 55 item 3): phi's interval narrows to the generalised least squares width",
    ),
    Mutation(
        "validate-position-fold-skips-stage-2",
        "loopscale/fit/position_sigma.py",
        "best, _ = multistart(law, weighted, stage2_loss(loss), np.vstack([best.theta[None], starts]))",
        "best = best",
        ("tests/unit/test_validate_position.py::test_a_folds_weights_come_from_its_training_rows_alone",),
        "validate refits a position-weighted curve fit's folds in both stages, the weights from each fold's training "
        "rows (issue 55)",
    ),
    Mutation(
        "power-position-gain-forgets-the-noise-along-the-curve",
        "loopscale/fit/position_sigma.py",
        "c_psi = np.outer(dpsi, dpsi) * cov",
        "c_psi = np.diag(np.diag(cov))",
        ("tests/unit/test_power_position.py::test_the_gain_is_the_two_fits_sandwiches_written_out",),
        "power says what --curve-sigma position may narrow phi's standard error by, with the pilot's run offset and "
        "AR(1) along the curve (issue 55)",
    ),
    Mutation(
        "power-position-pilot-read-as-unweighted",
        "loopscale/fit/pilot.py",
        'position = noise.get("position_sigma")',
        "position = None",
        ("tests/unit/test_power_position.py::test_power_promises_the_unweighted_worth_and_says_what_weighing_may_add",),
        "power says that it promises a position-weighted pilot's unweighted curve worth, and what weighing may add "
        "(issue 55)",
    ),
    Mutation(
        "curve-sigma-position-read-as-a-seed-sigma",
        "loopscale/fit/uncertainty.py",
        "if state.data.sigma is not None and not state.data.sigma_estimated:",
        "if state.data.sigma is not None:",
        (
            "tests/unit/test_position_sigma.py::"
            "test_an_estimated_sigma_sets_the_weights_only_the_profile_reestimates_its_level",
        ),
        "a curve fit's position sigma is estimated from its residuals: it sets the weights only, the profile "
        "re-estimates the scale (F(1, nu)), never a seed sigma's known scale",
    ),
    Mutation(
        "blind6-attn-matmul-mask-sees-next-token",
        "loopscale/model/attention.py",
        "device=q.device).triu(1)",
        "device=q.device).triu(2)",
        ("tests/unit/test_attention.py::test_the_matmul_form_equals_sdpa_values_and_gradients",),
        "attention is causal: y = softmax(q k^T / sqrt(hd) + M) v with M = -inf above the diagonal, in the "
        "matmul form as in SDPA",
    ),
    Mutation(
        "blind6-paper-init-std-by-fan-out",
        "loopscale/model/transformer.py",
        "uniform_std_(linear.weight, 1 / math.sqrt(linear.in_features))",
        "uniform_std_(linear.weight, 1 / math.sqrt(linear.out_features))",
        ("tests/unit/test_model.py::test_paper_init_statistics",),
        "init=paper: q, k, v, attention-out and MLP-in uniform with std 1/sqrt(d), MLP-out 1/sqrt(4d) (1/sqrt(fan_in))",
    ),
    Mutation(
        "blind6-gpt2-init-residual-scale-by-stored-layers",
        "loopscale/model/transformer.py",
        "scale = 1 / math.sqrt(2 * self.cfg.l_eff) if",
        "scale = 1 / math.sqrt(2 * (self.cfg.n_prelude + self.cfg.n_rec + self.cfg.n_coda)) if",
        ("tests/unit/test_model.py::test_gpt2_init_is_still_available",),
        "init=gpt2: the residual writes scaled by 1/sqrt(2 L_eff), L_eff = p + k r + c the layer passes",
    ),
    Mutation(
        "blind6-tbptt-grad-passes-one-short",
        "loopscale/model/transformer.py",
        "torch.set_grad_enabled(grad_on and i >= first_grad_pass)",
        "torch.set_grad_enabled(grad_on and i > first_grad_pass)",
        ("tests/unit/test_model.py::test_truncated_backprop_matches_hand_unrolled",),
        "truncated backprop: the last bptt_k passes (all r without it) run with gradient, the first r - bptt_k "
        "under no_grad",
    ),
    Mutation(
        "blind6-eval-loss-mean-over-padding",
        "loopscale/model/head_loss.py",
        "return total / (targets != IGNORE_INDEX).sum()",
        "return total / targets.numel()",
        ("tests/unit/test_head_loss.py::test_no_grad_gives_the_loss_only",),
        "the loss without gradient (validation) is the mean cross-entropy over real targets (ignore_index "
        "-100), as F.cross_entropy",
    ),
    Mutation(
        "blind6-budget-steps-floored",
        "loopscale/model/accounting.py",
        "steps = max(1, round(compute_flops / flops_per_token / batch_tokens))",
        "steps = max(1, int(compute_flops / flops_per_token / batch_tokens))",
        ("tests/unit/test_accounting.py::test_tokens_for_budget_takes_the_nearest_whole_step_count",),
        "tokens_for_budget: D = C / F rounded to whole batches (the nearest step count), at least one step",
    ),
    Mutation(
        "blind6-lr-norm-group-gets-batch-factor",
        "loopscale/train/optim/lr_transfer.py",
        "NORM: width,  # published",
        "NORM: width * batch,  # published",
        ("tests/unit/test_lr_transfer.py::test_lrs_equal_the_published_formulas",),
        "lr transfer: norm and hyper lrs are lr_<group> x (d / 640)^-0.5 only, the batch factor not applied",
    ),
    Mutation(
        "blind6-lr-dref-injection-counted-r-plus-one-times",
        "loopscale/model/accounting.py",
        "counts.N_once + (cfg.r - 1) * injection_params(cfg)",
        "counts.N_once + cfg.r * injection_params(cfg)",
        ("tests/unit/test_lr_transfer.py::test_lrs_equal_the_published_formulas",),
        "D_ref = 10 x (prelude + coda + norms + r x (recurrent block + injection)) of the size-10 reference model",
    ),
    Mutation(
        "blind6-grad-clip-by-value",
        "loopscale/train/runner.py",
        'gradient_clip_algorithm="norm"',
        'gradient_clip_algorithm="value"',
        (
            ""
            "tests/integration/test_training_step_promises.py::test_every_update_uses_the_gradient_rescaled_to_the_clip_norm",
        ),
        "optim.grad_clip is the max global grad norm (0 disables clipping)",
    ),
    Mutation(
        "blind6-curve-subset-loss-weighted-by-all-tokens",
        "loopscale/train/lightning_module.py",
        "targets = (y != -100).sum()  # packed rows mask their padding",
        "targets = y.numel()  # packed rows mask their padding",
        (
            ""
            "tests/integration/test_training_step_promises.py::test_a_curve_points_val_loss_is_per_target_token_over_the_subset",
        ),
        "a curve point's val loss is nats per target token over the subset (packed rows' padding not counted)",
    ),
    Mutation(
        "blind6-curve-point-lr-of-the-next-update",
        "loopscale/train/lightning_module.py",
        "multiplier = lr_multiplier(step - 1, self.plan.run.steps, self.optim_cfg)",
        "multiplier = lr_multiplier(step, self.plan.run.steps, self.optim_cfg)",
        (
            ""
            "tests/integration/test_training_step_promises.py::test_a_curve_point_records_the_lr_of_the_update_its_step_made",
        ),
        "a curve row's lr is the lr of the update that step made (peak x lr_multiplier(step - 1))",
    ),
    Mutation(
        "blind6-collect-writes-empty-testtime-table",
        "loopscale/train/collect.py",
        "if testtime is not None and len(testtime):",
        "if testtime is not None:",
        (
            ""
            "tests/unit/test_testtime_eval.py::test_the_testtime_tables_model_is_the_run_name_or_the_run_dir_where_two_runs_share_one",
        ),
        "collect writes <name>_testtime.csv only where a run was scored across r (no file where none was)",
    ),
    Mutation(
        "blind6-report-width-ratio-separate-over-joint",
        "loopscale/analysis/report.py",
        '"width_ratio": (boot[1] - boot[0]) / (sep_ci[1] - sep_ci[0]),',
        '"width_ratio": (sep_ci[1] - sep_ci[0]) / (boot[1] - boot[0]),',
        ("tests/unit/test_report.py::test_report_of_a_joint_fit_shows_delta_phi_next_to_the_separate_fits",),
        "the report's delta-phi table: 'CI width joint / separate' is the joint bootstrap CI's width over the "
        "separate fits'",
    ),
    Mutation(
        "blind6-entry-multiplier-kappa-at-r1",
        "loopscale/fit/laws/looped_entry.py",
        "np.where(np.asarray(r, dtype=float) > 1, np.asarray(kappa, dtype=float), 1.0)",
        "np.where(np.asarray(r, dtype=float) >= 1, np.asarray(kappa, dtype=float), 1.0)",
        ("tests/unit/test_looped_entry.py::test_the_multiplier_is_one_at_r_one_and_kappa_r_to_the_phi_above",),
        "looped-entry: m_1 = 1, m_r = kappa r^phi for r > 1 (figures and advice read `multiplier`)",
    ),
    Mutation(
        "blind6-curve-noise-run-variance-over-G",
        "loopscale/fit/curve_worth.py",
        "float(np.sum(means**2)) / max(G - n_params, 1)",
        "float(np.sum(means**2)) / max(G, 1)",
        ("tests/unit/test_curve_worth.py::test_curve_noise_is_its_moment_formulas_written_out",),
        "curve_noise: s_run^2 from the runs' means over G - p (the fitted parameters take p of the G runs' dof)",
    ),
    Mutation(
        "blind6-demo-best-rival-includes-the-fits-own-law",
        "loopscale/demo.py",
        'if form.get("law") not in (None, own)]',
        'if form.get("law") is not None]',
        ("tests/unit/test_looped_entry.py::test_the_demos_best_rival_is_never_the_fits_own_law_under_mse",),
        "demo.json's best rival is a rival form: the fit's own law (its MSE twin) is not one",
    ),
    Mutation(
        "blind6-demo-job-line-forked-parent-condition-inverted",
        "loopscale/demo.py",
        "isinstance(record, ForkedJob) and not record.branches else record",
        "isinstance(record, ForkedJob) and record.branches else record",
        ("tests/unit/test_demo_job_line.py::test_a_run_another_process_holds_gives_its_status_and_reason",),
        "job_line: a forked job without branches (parent locked elsewhere, or failed) shows its parent's "
        "status and reason",
    ),
    Mutation(
        "blind6-pilot-law-check-skipped-for-a-looped-fit",
        "loopscale/fit/pilot.py",
        "    if law in power_laws():\n        return law\n",
        "    if True:\n        return law\n",
        (
            "tests/unit/test_power.py::test_a_pilot_whose_law_power_cannot_draw_is_refused_not_simulated_as_r_to_the_phi",
        ),
        "power refuses a pilot whose law has parameters beyond r^phi (psi, kappa, gamma) with a one-line InputError",
    ),
    Mutation(
        "blind6-validation-json-writes-nan",
        "loopscale/fit/validation/record.py",
        'Path(path).write_text(json_text(self.to_json()) + "\\n")',
        'import json\n\n        Path(path).write_text(json.dumps(self.to_json(), indent=2, default=float) + "\\n")',
        (
            ""
            "tests/unit/test_validation_record.py::test_write_json_writes_strict_json_nan_as_null_and_numpy_as_plain_numbers",
        ),
        "validate --out writes plain JSON: numpy values plain, NaN as null (never a bare NaN)",
    ),
    Mutation(
        "blind6-equiv-accepts-both-sizes-zero",
        "loopscale/cli/equiv.py",
        "args.n_once + args.n_rec <= 0:",
        "args.n_once + args.n_rec < 0:",
        ("tests/unit/test_derived.py::test_equiv_takes_sizes_of_zero_or_more_not_both_zero",),
        "equiv: --n-once and --n-rec must be >= 0 and not both 0, else a one-line usage error (exit 2)",
    ),
    Mutation(
        "curve-terms-read-from-the-rows-kept",
        "loopscale/fit/laws/looped_curve.py",
        "        if cls._has_schedule_columns(table):  # summed over each run's whole schedule by `rows_to_fit`\n",
        "        if False:\n",
        (
            "tests/unit/test_looped_curve_law.py::test_a_fitted_rows_schedule_terms_are_summed_over_its_runs_whole_schedule",
        ),
        "a curve law's S1 and S2 at a fitted row are its run's whole schedule's, whatever rows were left out",
    ),
    Mutation(
        "curve-start-keeps-every-evaluation",
        "loopscale/fit/laws/looped_curve.py",
        '    return (table["step"] >= share * last).to_numpy(dtype=bool)\n',
        "    return np.ones(len(table), dtype=bool)\n",
        (
            "tests/unit/test_looped_curve_law.py::"
            "test_curve_start_drops_early_evaluations_and_leaves_the_rest_of_the_schedule_as_it_was",
        ),
        "fit --curve-start SHARE leaves out each run's evaluations before SHARE of its steps",
    ),
    Mutation(
        "fit-curves-ignores-curve-start",
        "loopscale/fit/curves/fit.py",
        "(c.steps >= share * c.steps[-1]) & ",
        "",
        (
            "tests/integration/test_fit_curves_cli.py::test_curve_start_fits_the_later_evaluations_on_the_whole_schedule",
        ),
        "fit --curves --curve-start SHARE fits each run's evaluations from SHARE of its steps on",
    ),
    Mutation(
        "fit-curves-ignores-from-step",
        "loopscale/fit/curves/fit.py",
        " & (c.steps >= step)) for c in curves]",
        ") for c in curves]",
        ("tests/integration/test_fit_curves_cli.py::test_from_step_fits_every_run_from_one_step_whatever_its_length",),
        "fit --curves --from-step STEP fits every run's evaluations from STEP on, whatever its length",
    ),
    Mutation(
        "validate-scores-the-evaluations-curve-start-left-out",
        "loopscale/fit/validation/inputs.py",
        'keep = rows_from_start(every, fit.settings.get("curve_start") or 0.0)',
        "keep = rows_from_start(every, 0.0)",
        (
            "tests/integration/test_fit_curves_cli.py::test_validate_reads_a_curve_fit_without_the_evaluations_it_left_out",
        ),
        "validate refits and scores a --curve-start fit on the evaluations it fitted",
    ),
    Mutation(
        "curve-worth-weighs-entry-curves-against-r-to-the-phi",
        "loopscale/fit/curve_worth.py",
        "    f_law = make_law(cls.final_law).from_params(final_params)",
        '    f_law = make_law("looped").from_params(final_params)',
        ("tests/unit/test_curve_worth.py::test_an_entry_curve_is_weighed_against_looped_entrys_own_final_points",),
        "power's curve worth weighs a curve law's curves against its own final-point law (looped-entry's kappa)",
    ),
    Mutation(
        "hardops-pool-of-one-starts-a-worker-besides-the-launcher",
        "loopscale/launch/wall_time.py",
        "workers_start_s = pool.start_s if pool.workers > 1 else 0.0",
        "workers_start_s = pool.start_s if pool.workers >= 1 else 0.0",
        (
            "tests/unit/test_launch_formulas.py::test_the_sweep_adds_the_launchers_start_each_workers_unless_one_and_the_first_tokenizing",
        ),
        "plan's pool wall time: one worker runs the jobs in the launcher (one start), more start their own",
    ),
    Mutation(
        "hardops-share-adds-threads-to-workers",
        "loopscale/launch/wall_time.py",
        "load + workers * threads))",
        "load + workers + threads))",
        (
            "tests/unit/test_launch_formulas.py::test_expected_share_is_the_cores_over_the_load_plus_workers_times_threads",
        ),
        "plan's core share per process: cores over the load plus workers x threads",
    ),
    Mutation(
        "hardops-needed-requeues-rounded-not-up",
        "loopscale/launch/estimate.py",
        "needed = math.ceil((wall - limits.timeout_min / 60) / gain)",
        "needed = round((wall - limits.timeout_min / 60) / gain)",
        ("tests/unit/test_launch_formulas.py::test_the_overrides_named_are_the_smallest_that_let_the_job_through",),
        "the max_num_timeout a refused job is told to set is one that lets it through (rounded up)",
    ),
    Mutation(
        "hardops-requeue-loss-forgets-the-compile",
        "loopscale/launch/estimate.py",
        "loss_h = (lost_s + RESTART_S + compile_s) / 3600",
        "loss_h = (lost_s + RESTART_S) / 3600",
        (
            "tests/unit/test_launch_formulas.py::test_the_launcher_allows_its_attempts_less_each_requeues_checkpoint_restart_and_compile",
        ),
        "each requeue loses the steps since the checkpoint, the restart and the compile again (launch/estimate.py)",
    ),
    Mutation(
        "hardops-lr-grid-upper-middle-width",
        "loopscale/launch/lr_grid.py",
        "widths[(len(widths) - 1) // 2]",
        "widths[len(widths) // 2]",
        (
            "tests/unit/test_launch_formulas.py::test_the_lr_grid_takes_the_lower_of_two_middle_widths_whatever_the_jobs_order",
        ),
        "the lr grid varies the middle width at the smallest budget, the lower of two middles",
    ),
    Mutation(
        "hardops-device-batch-size-rounded-down",
        "loopscale/train/batching.py",
        "size = -(-d_model // SIZE_WIDTH)",
        "size = d_model // SIZE_WIDTH",
        (
            "tests/unit/test_train_config_formulas.py::test_the_published_device_batch_steps_at_sizes_18_and_30_of_d_model_over_64_rounded_up",
        ),
        "device_batch=auto: the published 32 / 16 from s = 18 / 8 from s = 30, s = d_model / 64 rounded up",
    ),
    Mutation(
        "hardops-world-without-nodes",
        "loopscale/train/batching.py",
        "world, gpu = trainer.devices * trainer.num_nodes, on_gpu(trainer)\n",
        "world, gpu = trainer.devices, on_gpu(trainer)\n",
        ("tests/unit/test_train_config_formulas.py::test_the_split_is_world_times_device_batch_times_accumulation",),
        "grad_accum = batch_size / (devices x num_nodes x device_batch)",
    ),
    Mutation(
        "hardops-resumed-step-rounded",
        "loopscale/train/recording.py",
        "steps_trained = module.tokens_trained // batch_tokens",
        "steps_trained = round(module.tokens_trained / batch_tokens)",
        (
            "tests/unit/test_train_config_formulas.py::test_a_finished_run_records_its_loss_and_the_step_it_resumed_from",
        ),
        "run.json's resumed_from_step: the step less the whole batches this process trained",
    ),
    Mutation(
        "hardops-iso-flop-bins-linear",
        "loopscale/plots/isoflop.py",
        "edges = np.geomspace(levels[0], levels[-1], max_panels + 1)",
        "edges = np.linspace(levels[0], levels[-1], max_panels + 1)",
        ("tests/unit/test_plot_numbers.py::test_budgets_get_a_panel_each_up_to_the_limit_then_equal_log_width_bins",),
        "the iso-FLOP figure bins many budgets into panels of equal width in log C",
    ),
    Mutation(
        "hardops-assumed-mfu-of-one-refused",
        "loopscale/config/schema.py",
        "if not 0.0 < self.assumed_mfu <= 1.0:",
        "if not 0.0 < self.assumed_mfu < 1.0:",
        ("tests/unit/test_train_config_formulas.py::test_the_ranges_include_their_closed_ends",),
        "trainer.assumed_mfu is in (0, 1]",
    ),
    # -- s7-hardfit: the fitting core's formulas (issue 58) ---------------------------------------------
    Mutation(
        "hardfit-nxd-n0-centre-sign",
        "loopscale/fit/laws/looped_nxd.py",
        "centred = l_n - self.log_n0",
        "centred = l_n + self.log_n0",
        ("tests/unit/test_law_formulas.py::test_looped_nxd_moves_the_data_exponent_with_log_n_eff_about_n0",),
        "looped-nxd's data exponent is beta + gamma ln(N_eff / N_0), centred at N_0",
    ),
    Mutation(
        "hardfit-pass-joint-d-from-c-without-n-pass",
        "loopscale/fit/laws/looped_joint.py",
        "d = super().data_from_table(table)",
        "d = Looped.data_from_table(table)",
        ("tests/unit/test_law_formulas.py::test_looped_pass_joint_counts_n_pass_once_per_recipe",),
        "looped-pass-joint's D = C / (6 (N_once + N_pass + r N_rec))",
    ),
    Mutation(
        "hardfit-pinned-e-box-shifted",
        "loopscale/fit/laws/looped_pinned_e.py",
        "return [(e, e), *super().bounds()[1:]]",
        "return [(e, e), *super().bounds()[:5]]",
        ("tests/unit/test_law_formulas.py::test_looped_pinned_e_holds_e_by_its_box_and_predicts_as_looped",),
        "looped-pinned-e holds E and searches the looped law's box for the rest",
    ),
    Mutation(
        "hardfit-huber-threshold-outside",
        "loopscale/fit/objective.py",
        "(np.abs(x) <= self.delta).astype(float)",
        "(np.abs(x) < self.delta).astype(float)",
        ("tests/unit/test_fit_objective_rules.py::test_huber_rho_psi_and_psi_prime_at_and_around_the_threshold",),
        "Huber's quadratic part includes |x| = delta (docs/design.md, Fitting)",
    ),
    Mutation(
        "hardfit-projected-starts-absolute-error",
        "loopscale/fit/starts.py",
        "w = 1.0 / data.L**2  # relative-error weights",
        "w = 1.0 / data.L  # relative-error weights",
        (
            "tests/unit/test_fit_objective_rules.py::test_projected_starts_are_the_weighted_nnls_of_e_a_b_at_each_exponent_row",
        ),
        "the projected starts solve (E, A, B) for the relative error (L_hat - L) / L",
    ),
    Mutation(
        "hardfit-same-basin-absolute-tol-not-per-row",
        "loopscale/fit/optimize.py",
        "BASIN_ABS_TOL * n_rows)",
        "BASIN_ABS_TOL)",
        (
            "tests/unit/test_fit_objective_rules.py::test_same_basin_compares_exponents_only_and_objectives_relatively_or_per_row",
        ),
        "n_best_basin: an exact fit's optimum agrees to 1e-12 per row",
    ),
    Mutation(
        "hardfit-cr1-without-small-sample-factor",
        "loopscale/fit/cluster_se.py",
        "return c / max(c - 1, 1) * bread",
        "return bread",
        ("tests/unit/test_fit_small_formulas.py::test_cluster_robust_cov_is_the_cr1_sandwich_over_the_clusters",),
        "the curve law's cluster-robust covariance is CR1: c / (c - 1) H^-1 S H^-1",
    ),
    Mutation(
        "hardfit-compare-se-ddof0",
        "loopscale/fit/result.py",
        "se=float(np.std(d, ddof=1))",
        "se=float(np.std(d))",
        ("tests/unit/test_fit_record_rules.py::test_compare_param_pairs_replicates_and_reads_the_shorter_set",),
        "compare's delta se is the replicates' sample standard deviation",
    ),
    Mutation(
        "hardfit-lr-test-counts-a-lower-restricted-fit",
        "loopscale/fit/uncertainty.py",
        "gap = max(0.0, restricted.objective - state.best.objective)",
        "gap = abs(restricted.objective - state.best.objective)",
        ("tests/unit/test_uncertainty_rules.py::test_the_lr_test_is_the_profiles_statistic_at_one_value",),
        "the LR statistic is 0 where the restricted fit is no worse",
    ),
    Mutation(
        "hardfit-shared-check-dense-runs-once",
        "loopscale/fit/joint.py",
        "weights = np.where(data.r == 1, float(K), 1.0)",
        "weights = np.where(data.r == 1, 1.0, 1.0)",
        (
            "tests/unit/test_joint_rules.py::test_the_shared_parameter_check_weights_dense_runs_by_recipes_and_counts_5_per_extra_recipe",
        ),
        "the shared-parameter check scores the joint law on the stacked recipe tables (r = 1 runs K times)",
    ),
    Mutation(
        "hardfit-joint-ci-at-95-whatever-the-level",
        "loopscale/fit/joint.py",
        "result.ci95 = percentile_ci(cols, level)",
        "result.ci95 = percentile_ci(cols)",
        ("tests/unit/test_joint_rules.py::test_the_joint_bootstrap_records_delta_phi_per_replicate_and_its_se",),
        "fit --joint --level sets the joint bootstrap's interval",
    ),
    Mutation(
        "hardfit-drop-top-k-drops-nan",
        "loopscale/fit/runs_table.py",
        "np.nan_to_num(values, nan=-np.inf)",
        "np.nan_to_num(values, nan=np.inf)",
        ("tests/unit/test_runs_table_rules.py::test_drop_top_k_drops_the_highest_losses_ties_in_row_order",),
        "--drop-top-k drops the k highest losses; a row without a loss is never dropped",
    ),
    Mutation(
        "hardfit-curve-thinning-floors",
        "loopscale/fit/curves/fit.py",
        "np.unique(np.round(np.linspace(0, n - 1, most)).astype(int))",
        "np.unique(np.linspace(0, n - 1, most).astype(int))",
        ("tests/unit/test_curve_fit_rules.py::test_thinning_and_the_fitters_refusals",),
        "a curve over 1,000 evaluations is fitted on 1,000 evenly spread (nearest rows)",
    ),
    Mutation(
        "hardfit-curve-starts-absolute-residuals",
        "loopscale/fit/curves/law.py",
        "np.linalg.lstsq(X / loss[:, None], np.ones_like(loss), rcond=None)",
        "np.linalg.lstsq(X, loss, rcond=None)",
        (
            "tests/unit/test_curve_fit_rules.py::test_linear_starts_solve_the_amplitudes_on_relative_residuals_and_keep_the_best",
        ),
        "curve laws' starts: amplitudes by least squares on relative residuals",
    ),
    Mutation(
        "scale-profile-threshold-pooled-for-every-parameter",
        "loopscale/fit/uncertainty.py",
        "return (thr, stats) if name is None else _adjusted(state, name, thr, stats)",
        "return thr, stats",
        (
            "tests/unit/test_profile_scale.py::test_a_forked_designs_phi_threshold_is_its_own_sandwich_ratio_written_out",
        ),
        "on a forked sweep each parameter's profile threshold is its own sandwich-over-model ratio S_k^2 on "
        "F(1, nu_k), not the one pooled scale (docs/design.md, the noise model)",
    ),
    Mutation(
        "s8power-power-reads-the-pooled-profile-threshold",
        "loopscale/fit/uncertainty.py",
        "thr, _ = profile_threshold(state, name)",
        "thr, _ = profile_threshold(state)",
        (
            "tests/unit/test_power_honest.py::"
            "test_power_reads_the_verdicts_own_delta_phi_interval_on_a_forked_seeded_sweep",
        ),
        "power's simulated sweeps read the interval the verdict reads (delta-phi's own profile threshold on a forked "
        "seeded sweep), so its MDE plans for the user's verdict",
    ),
    Mutation(
        "scale-parameter-scale-without-leverage",
        "loopscale/fit/cluster_se.py",
        "PW = W - g @ (bread @ (g.T @ W))  # P W",
        "PW = W  # P W",
        (
            "tests/unit/test_profile_scale.py::test_a_forked_designs_phi_threshold_is_its_own_sandwich_ratio_written_out",
        ),
        "S_k^2's denominator is its expectation under independent noise with the fit's leverage, tr(P C P)",
    ),
    Mutation(
        "scale-parameter-scale-below-the-seed-sigma",
        "loopscale/fit/uncertainty.py",
        "thr_k = max(0.5 * q_k * e_psi2 * s2_k / e_dpsi, seed_floor)",
        "thr_k = 0.5 * q_k * e_psi2 * s2_k / e_dpsi",
        (
            "tests/unit/test_profile_scale.py::test_the_seed_sigma_is_a_floor_a_parameters_sandwich_does_not_narrow_below",
        ),
        "a parameter's own scale never narrows its profile below what the measured seed sigma alone gives",
    ),
    Mutation(
        "scale-parameter-scale-without-a-seed-sigma",
        "loopscale/fit/uncertainty.py",
        "own = None if state.data.sigma is None or state.data.sigma_estimated else parameter_scale(state, name)",
        "own = parameter_scale(state, name)",
        (
            "tests/unit/test_profile_scale.py::"
            "test_a_design_whose_groups_do_not_span_points_or_without_a_seed_sigma_keeps_the_pooled_threshold",
        ),
        "without a seed sigma (log units, Huber 1e-3) the profile keeps the pooled threshold",
    ),
    Mutation(
        "pooled-scale-charges-every-parameter-a-whole-group",
        "loopscale/fit/uncertainty.py",
        "spanned = pooled_scale_moments(state) if state.law.reads_curves else None",
        "spanned = None",
        (
            "tests/unit/test_pooled_scale_leverage.py::"
            "test_a_curve_fits_scale_divides_by_the_sums_expectation_with_the_fits_leverage_written_out",
        ),
        "an unweighted curve-law fit divides its clustered psi^2 by the sum's expectation with the fit's leverage, "
        "sum_g 1' (I - H)_gg 1, not n (G - p) / G",
    ),
    Mutation(
        "pooled-scale-read-on-f-one-g-minus-p",
        "loopscale/fit/uncertainty.py",
        "dof = max(1, G - p) if spanned is None else spanned[1]",
        "dof = max(1, G - p)",
        (
            "tests/unit/test_pooled_scale_leverage.py::"
            "test_a_curve_fits_scale_divides_by_the_sums_expectation_with_the_fits_leverage_written_out",
        ),
        "that pooled scale is read against F(1, nu), nu Satterthwaite's for its quadratic form, not F(1, G - p)",
    ),
    Mutation(
        "pooled-scale-leverage-for-final-points",
        "loopscale/fit/uncertainty.py",
        "spanned = pooled_scale_moments(state) if state.law.reads_curves else None",
        "spanned = pooled_scale_moments(state)",
        (
            "tests/unit/test_pooled_scale_leverage.py::"
            "test_other_unweighted_fits_keep_n_g_minus_p_over_g_on_f_one_g_minus_p",
        ),
        "a forked sweep's final points (and single rows) keep n (G - p) / G on F(1, G - p)",
    ),
    Mutation(
        "curve-start-shared-rows-by-the-branch-listed-first",
        "loopscale/fit/laws/looped_curve.py",
        '        last = last.where(~table["from_parent"].astype(bool), shortest)\n',
        "",
        (
            "tests/unit/test_looped_curve_law.py::"
            "test_curve_start_drops_early_evaluations_and_leaves_the_rest_of_the_schedule_as_it_was",
        ),
        "fit --curve-start keeps the same rows whatever the table's order (shared rows: the shortest branch)",
    ),
    Mutation(
        "lr-test-p-value-on-fractional-dof",
        "loopscale/fit/noise_scale.py",
        "    return float(f_dist.sf(statistic, 1, max(1, int(dof))))\n",
        "    return float(f_dist.sf(statistic, 1, max(1.0, float(dof))))\n",
        (
            "tests/unit/test_profile_scale.py::test_the_lr_tests_p_value_is_005_at_the_intervals_ends_on_its_own_reference",
        ),
        "a value at the 95% profile interval's end has p = 0.05: the interval and the LR test read one reference",
    ),
    Mutation(
        "blind7-holdout-rel-error-inverted",
        "loopscale/fit/uncertainty.py",
        "    rel = pred / obs - 1\n",
        "    rel = obs / pred - 1\n",
        ("tests/unit/test_fit.py::test_holdout_errors_are_the_predictions_over_the_held_out_losses",),
        "--holdout-largest's errors are relative, L_hat / L - 1 (negative where the law predicts the held-out "
        "runs low)",
    ),
    Mutation(
        "blind7-lr-test-statistic-half",
        "loopscale/fit/uncertainty.py",
        '    T = 2 * gap * stats["mean_psi_prime"] / stats["mean_psi_sq"]',
        '    T = gap * stats["mean_psi_prime"] / stats["mean_psi_sq"]',
        ("tests/unit/test_fit.py::test_the_lr_test_of_the_profile_intervals_end_gives_p_0_05",),
        "lr_test's T = 2 Delta mean(psi') / mean(psi^2), the statistic the profile interval bounds: p = 0.05 at "
        "its ends",
    ),
    Mutation(
        "blind7-eff-per-cost-fraction-swapped",
        "loopscale/fit/derived.py",
        "    return (f + r**phi * (1 - f)) / (f + r * (1 - f))",
        "    return (1 - f + r**phi * f) / (1 - f + r * f)",
        ("tests/unit/test_derived.py::test_eff_per_cost_is_n_eff_over_n_cost_of_a_model_with_that_once_share",),
        "eff_per_cost = (f + r^phi (1 - f)) / (f + r (1 - f)) with f the share run once: N_eff / N_cost of that model",
    ),
    Mutation(
        "blind7-point-keys-r1-recipe-split",
        "loopscale/fit/points.py",
        '    looped = table["r"].to_numpy(dtype=float) > 1 if "r" in table.columns',
        '    looped = table["r"].to_numpy(dtype=float) >= 1 if "r" in table.columns',
        ("tests/unit/test_fit_noise.py::test_an_r1_run_is_one_dense_point_whatever_recipe_labels_it",),
        "an r = 1 run is the same dense model whatever recipe labels it: two recipes' r = 1 runs are seeds of "
        "one point",
    ),
    Mutation(
        "blind7-huber-delta-zero-accepted",
        "loopscale/fit/objective.py",
        "np.isfinite(self.delta) and self.delta > 0)",
        "np.isfinite(self.delta) and self.delta >= 0)",
        ("tests/unit/test_fit.py::test_l2_loss_and_bad_delta",),
        "Huber delta must be a finite number > 0 (0 refused in one line)",
    ),
    Mutation(
        "blind7-residual-rho-uncentred",
        "loopscale/fit/cluster_se.py",
        "        r = res[rows] - res[rows].mean()\n",
        "        r = res[rows]\n",
        (
            "tests/unit/test_fit_small_formulas.py::test_residual_rho_pools_consecutive_pairs_centred_within_each_cluster_in_step_order",
        ),
        "the curves' lag-1 residual autocorrelation is about each run's own mean (its offset removed)",
    ),
    Mutation(
        "blind7-nxd-n0-arithmetic-mean",
        "loopscale/fit/laws/looped_nxd.py",
        "log_n0=float(np.mean(np.log(data.N_once + data.N_rec)))",
        "log_n0=float(np.log(np.mean(data.N_once + data.N_rec)))",
        ("tests/unit/test_law_formulas.py::test_looped_nxd_moves_the_data_exponent_with_log_n_eff_about_n0",),
        "looped-nxd's N_0 (as a rival) is the geometric mean of the data's N_once + N_rec",
    ),
    Mutation(
        "blind7-fit-size-exactly-twice-refused",
        "loopscale/fit/runs_table.py",
        "    if len(table) < 2 * n_params:",
        "    if len(table) <= 2 * n_params:",
        ("tests/unit/test_fit.py::test_a_table_of_twice_the_laws_parameters_is_enough_and_one_row_fewer_is_refused",),
        "a fit needs at least twice the law's parameters in rows: exactly 2 x n_params is enough",
    ),
    Mutation(
        "blind7-warmup-rise-counted-as-drop",
        "loopscale/fit/curves/drops.py",
        "    d[: warmup_end + 1] = 0.0",
        "    d[:warmup_end] = 0.0",
        ("tests/unit/test_curve_laws.py::test_annealing_area_is_the_momentum_recursion",),
        "the schedule-aware curve laws count lr drops after the warmup only (the warmup's last rise is no drop)",
    ),
    Mutation(
        "blind7-compare-delta-ci-reversed",
        "loopscale/fit/result.py",
        "        d = rng.permutation(reps[1])[:k] - rng.permutation(reps[0])[:k]",
        "        d = rng.permutation(reps[0])[:k] - rng.permutation(reps[1])[:k]",
        ("tests/unit/test_fit.py::test_fit_result_json_round_trip_and_compare",),
        "compare: delta = b - a with its paired-bootstrap CI of b - a (the CI holds delta)",
    ),
    Mutation(
        "blind7-pass-joint-predict-drops-n-pass",
        "loopscale/fit/laws/looped_pass_joint.py",
        '        n = n_eff(cols["N_once"] + cols["N_pass"], cols["N_rec"], cols["r"], phi)',
        '        n = n_eff(cols["N_once"], cols["N_rec"], cols["r"], phi)',
        ("tests/unit/test_law_formulas.py::test_looped_pass_joint_counts_n_pass_once_per_recipe",),
        "looped-pass-joint predicts with N_once + N_pass + r^phi_g N_rec (N_pass counted once)",
    ),
    Mutation(
        "blind7-lr-grid-share-of-total",
        "loopscale/launch/grid_cost.py",
        "f\"{100 * extra_flops / grid_flops:.1f}% of the grid's",
        "f\"{100 * extra_flops / (grid_flops + extra_flops):.1f}% of the grid's",
        ("tests/unit/test_launch_formulas.py::test_the_lr_grid_line_prices_the_extra_jobs_against_the_grids_own",),
        "the lr grid's extra FLOPs are stated as a share of the grid's own FLOPs",
    ),
    Mutation(
        "blind7-device-batch-size-18-boundary",
        "loopscale/train/batching.py",
        "if size >= min_size)",
        "if size > min_size)",
        (
            "tests/unit/test_batching.py::test_every_isodepth_point_gets_the_published_device_batch_and_keeps_the_step_tokens",
        ),
        "the published device batch: 32, 16 from size s = 18, 8 from s = 30",
    ),
    Mutation(
        "blind7-mfu-one-device-peak",
        "loopscale/train/mfu.py",
        "    return tokens_per_s * flops_per_token / (peak_flops_per_device * world)",
        "    return tokens_per_s * flops_per_token / peak_flops_per_device",
        ("tests/unit/test_mfu.py::test_published_s6_causal_ratio_and_mfu",),
        "MFU is the achieved FLOP/s over the peak of all world devices",
    ),
    Mutation(
        "blind7-val-docs-truncated",
        "loopscale/data/shards.py",
        "    n_val = min(n_docs - 1, max(1, round(val_fraction * n_docs)))",
        "    n_val = min(n_docs - 1, max(1, int(val_fraction * n_docs)))",
        ("tests/integration/test_shards.py::test_default_corpus_prepared_offline_counts_vocab_and_roundtrip",),
        "the val split holds round(val_fraction x documents) >= 1 documents",
    ),
    Mutation(
        "blind7-passthrough-truncatable",
        "loopscale/injections/passthrough.py",
        "    truncatable = False\n",
        "    truncatable = True\n",
        ("tests/unit/test_accounting.py::test_bad_configs_name_field_and_allowed_values",),
        "passthrough cannot train under truncated backprop (the prelude would get no gradient): refused",
    ),
    Mutation(
        "blind7-collapse-spread-mean-square",
        "loopscale/plots/curves.py",
        "    return float(np.sqrt(np.mean(((y - curve) / curve) ** 2)))",
        "    return float(np.mean(((y - curve) / curve) ** 2))",
        (
            "tests/unit/test_plot_numbers.py::test_the_collapse_removes_the_data_term_and_measures_the_relative_distance_from_the_size_curve",
        ),
        "the collapse spread is the RMS relative distance from E + A N_eff^-alpha (README's collapse row)",
    ),
    Mutation(
        "hard8-r-sampling-budget-stops-after-overshooting",
        "loopscale/model/r_sampling.py",
        "if abs(after - compute_flops) >= abs(spent - compute_flops):",
        "if after > compute_flops:",
        ("tests/unit/test_planning_numbers.py::test_a_compute_budget_takes_the_step_count_closest_to_it",),
        "a sampled-r run under a flops budget trains the step count whose realised FLOPs come closest to the budget",
    ),
    Mutation(
        "hard8-r-sampling-key-swaps-seed-and-step",
        "loopscale/model/r_sampling.py",
        "default_rng([SEED_TAG, seed, step]), 1)",
        "default_rng([SEED_TAG, step, seed]), 1)",
        ("tests/unit/test_planning_numbers.py::test_the_draws_are_keyed_as_documented",),
        "step s's pass count is a function of (seed, s): a resumed run draws what the stopped one would",
    ),
    Mutation(
        "hard8-r-sampling-pmf-drops-root-two",
        "loopscale/model/r_sampling.py",
        "lam = np.exp(mu + cfg.r_sigma * math.sqrt(2.0) * x)",
        "lam = np.exp(mu + cfg.r_sigma * x)",
        (
            "tests/unit/test_planning_numbers.py::test_the_poisson_lognormal_pmf_equals_an_independent_quadrature_and_its_variance",
        ),
        "the ledger's expected FLOPs use the exact Poisson-lognormal pmf (lambda ~ LogNormal(ln r - sigma^2/2, sigma))",
    ),
    Mutation(
        "hard8-memory-ddp-copy-at-one-device",
        "loopscale/model/memory.py",
        "(2 if world > 1 else 1)",
        "(2 if world > 2 else 1)",
        ("tests/unit/test_planning_numbers.py::test_state_bytes_off_their_defaults",),
        "the memory model counts DDP's bucket copy of the gradients whenever world > 1",
    ),
    Mutation(
        "hard8-memory-bf16-embedding-on-cpu",
        "loopscale/model/memory.py",
        "2 if cuda and cfg.precision",
        "2 if cfg.precision",
        ("tests/unit/test_planning_numbers.py::test_state_bytes_off_their_defaults",),
        "the embedding is stored in bf16 only under model.precision=published on CUDA",
    ),
    Mutation(
        "hard8-memory-head-chunk-not-capped-by-tokens",
        "loopscale/model/memory.py",
        "chunk = min(HEAD_CHUNK_TOKENS, tokens)",
        "chunk = HEAD_CHUNK_TOKENS",
        (
            "tests/unit/test_planning_numbers.py::test_the_transient_is_the_larger_of_a_capped_head_chunk_and_a_layers_backward",
        ),
        "the head transient is one chunk of at most HEAD_CHUNK_TOKENS tokens (fewer when the micro-batch is smaller)",
    ),
    Mutation(
        "hard8-memory-blocks-cast-every-pass",
        "loopscale/model/memory.py",
        "layers = cfg.n_prelude + cfg.n_coda + cfg.n_rec * grad_passes(cfg)\n    block",
        "layers = cfg.n_prelude + cfg.n_coda + cfg.n_rec * cfg.r\n    block",
        (
            "tests/unit/test_planning_numbers.py::test_the_compile_modes_differ_by_their_layer_rope_and_weight_copy_terms",
        ),
        "compile=blocks keeps a bf16 weight copy per layer pass WITH gradient (truncated passes keep none)",
    ),
    Mutation(
        "hard8-adamw-decays-parcae-b",
        "loopscale/train/optim/groups.py",
        "or (spec is not None and not spec.decayed)",
        "",
        ("tests/unit/test_planning_numbers.py::test_adamw_decays_the_block_and_head_matrices_only",),
        "optim=adamw never decays a matrix its form declares decay=False (Parcae's B)",
    ),
    Mutation(
        "hard8-adamw-width-scaling-inverted",
        "loopscale/train/optim/lr_transfer.py",
        "optim.base_width / cfg.d_model if",
        "cfg.d_model / optim.base_width if",
        (
            "tests/unit/test_planning_numbers.py::test_adamw_lrs_scale_the_decayed_matrices_by_base_width_over_d_and_every_group_by_rule_and_scale",
        ),
        "width_scaling: the decayed matrices' lr x base_width / d_model (muP)",
    ),
    Mutation(
        "hard8-sampled-micro-batch-forgets-the-accumulation-wrap",
        "loopscale/train/lightning_module.py",
        "first = ((batch_idx % b.grad_accum) * b.world + self.global_rank) * b.device_batch",
        "first = (batch_idx * b.world + self.global_rank) * b.device_batch",
        (
            "tests/unit/test_training_module_numbers.py::test_a_sampled_micro_batch_runs_its_own_sequences_draws_and_weighs_every_target_token_alike",
        ),
        "a sampled-r micro-batch trains its own sequences' drawn pass counts, step after step",
    ),
    Mutation(
        "hard8-sampled-loss-weighs-rows-not-tokens",
        "loopscale/train/lightning_module.py",
        "total = total + forward_recovering(self.model, xs, ys, r=n, n_grad=k) * (ys != -100).sum()",
        "total = total + forward_recovering(self.model, xs, ys, r=n, n_grad=k) * len(rows)",
        (
            "tests/unit/test_training_module_numbers.py::test_a_sampled_micro_batch_runs_its_own_sequences_draws_and_weighs_every_target_token_alike",
        ),
        "a sampled-r step's loss is the mean over every target token, whatever pass count each row drew",
    ),
    Mutation(
        "hard8-sampled-tally-counts-groups-not-sequences",
        "loopscale/train/lightning_module.py",
        "self.r_tally[n] = self.r_tally.get(n, 0) + len(rows)",
        "self.r_tally[n] = self.r_tally.get(n, 0) + 1",
        (
            "tests/unit/test_training_module_numbers.py::test_a_sampled_micro_batch_runs_its_own_sequences_draws_and_weighs_every_target_token_alike",
        ),
        "run.json's realised pass histogram counts sequences at each pass count",
    ),
    Mutation(
        "hard8-eval-flops-adapters-at-half-a-training-pass",
        "loopscale/model/accounting.py",
        "for w, n, passes, _ in layer_plan(m)) / 3",
        "for w, n, passes, _ in layer_plan(m)) / 2",
        ("tests/unit/test_eval_flops.py::test_forward_flops_equal_the_counted_matmuls_at_r_and_past_it",),
        "flops_per_token_eval and the validation FLOPs count a forward's matmuls exactly (lora's adapters)",
    ),
    # -- s8-hardan: the fit's consumers (validate, advise, test-time, power's pilot and summary, report) -------
    Mutation(
        "hard8-aicc-correction-over-n-minus-k",
        "loopscale/fit/validation/scores.py",
        "2 * k * (k + 1) / (n - k - 1)",
        "2 * k * (k + 1) / (n - k)",
        (
            "tests/unit/test_validation_formulas.py::test_information_is_aicc_and_bic_of_the_gaussian_working_likelihood_by_hand",
        ),
        "validate's AICc = AIC + 2k(k+1)/(n-k-1) (Hurvich & Tsai)",
    ),
    Mutation(
        "hard8-truncated-passes-priced-at-4n-per-pass-not-per-missing-gradient",
        "loopscale/fit/validation/conventions.py",
        "extra = 4 * (r - grad) *",
        "extra = 2 * (r - grad) *",
        ("tests/unit/test_validation_formulas.py::test_truncated_convention_adds_four_n_per_pass_without_gradient",),
        "validate's 'truncated passes at 6N' convention adds D x 4 (r - k)(N_rec + 2 T d n_rec) to C",
    ),
    Mutation(
        "hard8-lr-move-flagged-upwards-only",
        "loopscale/fit/validation/lr_confound.py",
        'if abs(g["steps_from_r1"]) > 1:',
        'if g["steps_from_r1"] > 1:',
        (
            "tests/unit/test_validation_formulas.py::test_the_best_lr_move_is_in_grid_steps_from_r1_and_flagged_beyond_one_step",
        ),
        "validate flags a best lr more than one grid step from r = 1's, either way",
    ),
    Mutation(
        "hard8-break-even-interval-drops-never-wins",
        "loopscale/analysis/advise/break_even.py",
        "finite = np.where(np.isnan(rep_M), 0.0, rep_M)",
        "finite = rep_M[~np.isnan(rep_M)]",
        (
            "tests/unit/test_advise_formulas.py::test_the_break_even_entry_reads_never_as_zero_and_takes_the_nearest_percentiles",
        ),
        "advise's break-even interval counts a replicate where r = 1 is never beaten as 0, not left out",
    ),
    Mutation(
        "hard8-lr-step-without-the-grids-own-run",
        "loopscale/fit/validation/lr_confound.py",
        "np.log(np.append(lr_table[LR_COLUMN].to_numpy(float), 1.0))",
        "np.log(lr_table[LR_COLUMN].to_numpy(float))",
        (
            "tests/unit/test_validation_formulas.py::test_the_lr_grid_per_r_is_a_parabola_through_its_own_runs_and_the_grids_centre_run",
        ),
        "validate reads a 3-point lr grid's step as its ratio, not its square (the grid's own run is a grid point)",
    ),
    Mutation(
        "hard8-advise-record-box-without-tolerance",
        "loopscale/analysis/advise/record_checks.py",
        "lo - BOX_TOLERANCE * abs(lo) <= value <= hi + BOX_TOLERANCE * abs(hi)",
        "lo <= value <= hi",
        (
            "tests/unit/test_advise_formulas.py::test_a_parameter_on_its_bound_within_the_relative_tolerance_is_read_and_beyond_it_refused",
        ),
        "advise reads a parameter on its fitter bound within the fitter's relative tolerance 1e-6",
    ),
    Mutation(
        "hard8-advise-steps-cut-not-rounded",
        "loopscale/analysis/advise/advice.py",
        "steps=max(1, round(D / family.batch_tokens))",
        "steps=max(1, int(D / family.batch_tokens))",
        (
            "tests/unit/test_advise_formulas.py::test_the_advised_model_counts_its_steps_tokens_per_parameter_and_effective_size",
        ),
        "advise's steps are D / batch tokens rounded",
    ),
    Mutation(
        "hard8-testtime-drift-linear-in-x",
        "loopscale/fit/laws/testtime.py",
        "np.maximum(0.0, 1.0 - 1.0 / x)",
        "np.maximum(0.0, 1.0 - x)",
        (
            "tests/unit/test_testtime_formulas.py::test_exp_form_of_a_fixed_r_model_saturates_at_r_train_and_drifts_past_it",
        ),
        "the test-time drift is delta max(0, 1 - 1/x): 1/2 at twice r_train",
    ),
    Mutation(
        "hard8-testtime-holdout-at-two-sigma",
        "loopscale/fit/testtime_checks.py",
        "HOLDOUT_NOISE_FACTOR, HOLDOUT_FLOOR = 3.0, 1e-3",
        "HOLDOUT_NOISE_FACTOR, HOLDOUT_FLOOR = 2.0, 1e-3",
        (
            "tests/unit/test_testtime_formulas.py::test_the_held_out_depth_passes_up_to_three_sigma_with_a_tenth_of_a_percent_floor",
        ),
        "a test-time fit's held-out largest r_eval passes within 3 sigma (at least 0.1%)",
    ),
    Mutation(
        "hard8-phi-tt-over-ln-r-plus-one",
        "loopscale/fit/testtime_phi.py",
        "np.log((r + 1) / r)",
        "np.log(r + 1)",
        ("tests/unit/test_testtime_formulas.py::test_phi_tt_is_the_log_step_of_the_multiplier_from_r_to_r_plus_one",),
        "phi_tt(r) = ln(m(r + 1) / m(r)) / ln((r + 1) / r)",
    ),
    Mutation(
        "hard8-power-mde-smaller-direction",
        "loopscale/fit/power_summary.py",
        "return float(max(np.quantile(u, POWER), np.quantile(d, POWER)))",
        "return float(min(np.quantile(u, POWER), np.quantile(d, POWER)))",
        (
            "tests/unit/test_power_summary_formulas.py::test_the_verdict_mde_is_the_80_percent_quantile_of_the_larger_direction",
        ),
        "power's MDE is the larger of the two directions' 80% quantiles",
    ),
    Mutation(
        "hard8-pilot-rms-not-corrected-for-p",
        "loopscale/fit/pilot.py",
        "sigma = float(fit.residual_rms_log) * math.sqrt(n / (n - p))",
        "sigma = float(fit.residual_rms_log)",
        (
            "tests/unit/test_pilot_formulas.py::test_without_seed_repeats_sigma_is_the_rms_residual_over_n_minus_p_and_its_split_is_drawn",
        ),
        "power's sigma from a pilot without seed repeats is its RMS residual x sqrt(n / (n - p))",
    ),
    Mutation(
        "hard8-report-merges-looped-runs-across-recipes",
        "loopscale/analysis/report_inputs.py",
        'key = key.assign(_recipe=np.where(looped, table["recipe"].astype(str), ""))',
        "pass",
        (
            "tests/unit/test_report_inputs_rules.py::test_a_run_in_several_sources_is_kept_once_r1_whatever_its_recipe_r_above_1_per_recipe",
        ),
        "report keeps an r > 1 run of each recipe; only r = 1 runs are shared across recipes",
    ),
    Mutation(
        "hard8-curve-design-without-its-cooldown",
        "loopscale/fit/curve_worth.py",
        '"lr_multiplier": wsd_multipliers(plan["steps"], plan["warmup"])[at]',
        '"lr_multiplier": wsd_multipliers(plan["steps"], plan["warmup"])[at - 1]',
        ("tests/unit/test_curve_worth_rules.py::test_the_design_is_evaluated_on_the_wsd_schedule_of_its_own_steps",),
        "power evaluates a design's curves at the lr after each step of loopscale's wsd schedule",
    ),
    Mutation(
        "hard8-sandwich-memory-counts-an-8-byte-rstd",
        "loopscale/blocks/sandwich.py",
        "return n_grad * 2 * (8 * cfg.d_model + 4)",
        "return n_grad * 2 * (8 * cfg.d_model + 8)",
        ("tests/unit/test_memory_forms_exact.py::test_every_forms_activations_are_what_autograd_keeps",),
        "the memory model's activations are what autograd keeps (0.3%): the sandwich norms' fp32 rstd",
    ),
    Mutation(
        "hard8-hyper-memory-stores-every-first-pass-lane",
        "loopscale/injections/hyper.py",
        "return ((2 * cfg.r - 1) * K - (K - 1)) * 4 * d + cfg.r * 4 * d",
        "return ((2 * cfg.r - 1) * K) * 4 * d + cfg.r * 4 * d",
        ("tests/unit/test_memory_forms_exact.py::test_every_forms_activations_are_what_autograd_keeps",),
        "the memory model's activations are what autograd keeps: the first pass reads the lanes as views of e",
    ),
    Mutation(
        "hard8-lora-memory-casts-the-normed-input-six-times",
        "loopscale/blocks/lora.py",
        "return n_grad * (4 * 2 * cfg.d_model + len(layer_matrices(cfg)) * 2 * rank(cfg))",
        "return n_grad * (6 * 2 * cfg.d_model + len(layer_matrices(cfg)) * 2 * rank(cfg))",
        ("tests/unit/test_memory_forms_exact.py::test_every_forms_activations_are_what_autograd_keeps",),
        "the memory model's activations are what autograd keeps: lora's bf16 casts of the fp32 normed input (4 of 6)",
    ),
    Mutation(
        "hard8-ratio-budget-forgets-n-pass",
        "loopscale/train/plan.py",
        "budget.tokens_per_param * counts.N\n",
        "budget.tokens_per_param * (counts.N_once + counts.N_rec)\n",
        ("tests/unit/test_run_plan_numbers.py::test_a_ratio_budget_counts_every_parameter_of_n_the_per_pass_ones_too",),
        "budget.mode=ratio trains tokens_per_param x N, N = N_once + N_pass + N_rec",
    ),
    Mutation(
        "hard8-token-budget-rounds-down",
        "loopscale/train/plan.py",
        "steps = max(1, round(wanted / batch_tokens))",
        "steps = max(1, int(wanted / batch_tokens))",
        ("tests/unit/test_run_plan_numbers.py::test_a_token_budget_rounds_to_the_nearest_whole_batch",),
        "a token budget becomes the nearest whole number of batches",
    ),
    Mutation(
        "hard8-transfer-target-rounded-not-cut",
        "loopscale/train/plan.py",
        "D_target = int(budget.compute_flops / F) if",
        "D_target = round(budget.compute_flops / F) if",
        (
            "tests/unit/test_run_plan_numbers.py::test_a_flops_budget_takes_the_nearest_step_count_and_the_transfer_the_whole_tokens",
        ),
        "the lr transfer's D is int(C / F), as the published code takes it",
    ),
    Mutation(
        "hard8-wsd-cools-down-to-zero",
        "loopscale/train/optim/schedule.py",
        "    return 1.0 - (1.0 - final) * shape",
        "    return 1.0 - shape",
        (
            "tests/unit/test_schedule.py::test_wsd_cools_down_to_final_lr_frac_from_a_given_start_never_inside_the_warmup",
        ),
        "the wsd cooldown heads for final_lr_frac of the peak, as linear does",
    ),
    Mutation(
        "hard8-wsd-ignores-the-branchs-fork-step",
        "loopscale/train/optim/schedule.py",
        "    if decay_start is None:\n        decay_start = wsd_decay_start(total_steps, optim.decay_frac)",
        "    decay_start = wsd_decay_start(total_steps, optim.decay_frac)",
        (
            "tests/unit/test_schedule.py::test_wsd_cools_down_to_final_lr_frac_from_a_given_start_never_inside_the_warmup",
        ),
        "a forked branch cools down from the decay start it is given",
    ),
    Mutation(
        "hard8-wsd-cooldown-inside-the-warmup",
        "loopscale/train/optim/schedule.py",
        "    decay_start = max(decay_start, n_warmup)\n",
        "",
        (
            "tests/unit/test_schedule.py::test_wsd_cools_down_to_final_lr_frac_from_a_given_start_never_inside_the_warmup",
        ),
        "the wsd cooldown never starts before the warmup has ended",
    ),
    Mutation(
        "hard8-forked-job-pays-whole-branches",
        "loopscale/train/plan.py",
        "steps = self.parent_steps + sum(b.cooldown_steps for b in self.branches)",
        "steps = self.parent_steps + sum(b.steps for b in self.branches)",
        (
            "tests/unit/test_job_plan_numbers.py::test_a_forked_job_trains_its_parent_to_the_last_fork_and_each_cooldown",
        ),
        "a forked job costs F (D_parent + sum_i cooldown tokens_i): plan, sweep and the launcher price that",
    ),
    Mutation(
        "hard8-forked-job-writes-a-parent-run-json",
        "loopscale/train/job_plan.py",
        "own = self.run_dir / (PARENT_FILE if self.forks is not None else RUN_FILE)",
        "own = self.run_dir / RUN_FILE",
        (
            "tests/unit/test_job_plan_numbers.py::test_a_forked_job_trains_its_parent_to_the_last_fork_and_each_cooldown",
        ),
        "a forked job's parent writes fork_parent.json, never run.json (collect must not take it for a point)",
    ),
    Mutation(
        "lead8-hyper-forward-flops-without-the-read-out",
        "loopscale/injections/hyper.py",
        "return 2 * r * (K * K * d + K * d + (K * d * (K + 2) if dynamic(cfg) else 0))",
        "return 2 * r * (K * K * d + (K * d * (K + 2) if dynamic(cfg) else 0))",
        ("tests/unit/test_eval_flops.py",),
        "a hyper model's forward FLOPs (validation, curves, the test-time table) count its lanes' mix and alpha "
        "read-out",
    ),
    Mutation(
        "lead8-parcae-memory-counts-b-output",
        "loopscale/injections/parcae.py",
        "return (4 + 4 + 2 + 4) * d + 4 + 4 * d * n_grad",
        "return (4 + 4 + 2 + 2 + 4) * d + 4 + 4 * d * n_grad",
        ("tests/unit/test_memory_forms_exact.py::test_every_forms_activations_are_what_autograd_keeps",),
        "every form's activation bytes per token are what autograd keeps (the memory model sizes the device batch)",
    ),
    Mutation(
        "blind8-break-even-never-as-always",
        "loopscale/analysis/advise/break_even.py",
        "finite = np.where(np.isnan(rep_M), 0.0, rep_M)",
        "finite = np.where(np.isnan(rep_M), np.inf, rep_M)",
        (
            "tests/unit/test_advise_formulas.py::test_the_break_even_entry_reads_never_as_zero_and_takes_the_nearest_percentiles",
        ),
        "advise's break-even interval counts a replicate where looping never wins as below every model (0), "
        "not as always winning",
    ),
    Mutation(
        "blind8-matching-loose-tolerance",
        "loopscale/analysis/advise/matching.py",
        "MATCH_TOLERANCE = 1e-4",
        "MATCH_TOLERANCE = 2e-2",
        (
            "tests/unit/test_advise_formulas.py::test_a_family_matches_a_shape_by_unique_and_at_r_above_1_recurrent_counts_within_its_tolerance",
        ),
        "advise matches a fit's models to a family to 1e-4 (integer counts): a model ~1% off is another family",
    ),
    Mutation(
        "blind8-curves-feasible-under-cap",
        "loopscale/analysis/advise/curves.py",
        "domain = width_domain(family, r, cons.without_cap())",
        "domain = width_domain(family, r, cons)",
        ("tests/unit/test_advise_formulas.py::test_a_curves_feasible_part_ends_at_the_inference_limit_not_at_the_cap",),
        "advise's curves mark only the inference constraints infeasible: the memory cap is a line of the figure",
    ),
    Mutation(
        "blind8-testtime-phi-sign",
        "loopscale/fit/testtime_phi.py",
        "np.log(m[1] / m[0]) / np.log((r + 1) / r)",
        "np.log(m[1] / m[0]) / np.log(r / (r + 1))",
        ("tests/unit/test_testtime_law.py::test_phi_tt_through_a_training_fit",),
        "phi_tt(r) = ln(m_tt(r + 1) / m_tt(r)) / ln((r + 1) / r): positive where one more pass is worth more "
        "parameters",
    ),
    Mutation(
        "blind8-scores-pinned-counted-free",
        "loopscale/fit/validation/scores.py",
        "return int(sum(lo < hi for lo, hi in law.bounds()))",
        "return int(sum(lo <= hi for lo, hi in law.bounds()))",
        (
            "tests/unit/test_statistics_off_defaults.py::test_aicc_and_bic_count_free_parameters_only_and_are_recomputed_from_the_residuals",
        ),
        "validate's AICc and BIC count free parameters only: a pinned E is not one",
    ),
    Mutation(
        "blind8-forms-mse-only-when-mse",
        "loopscale/fit/validation/forms.py",
        "if loss.kind != MSE.kind:",
        "if loss.kind == MSE.kind:",
        ("tests/unit/test_validation_record.py::test_the_record_made_now_is_written_as_before",),
        "validate scores the fit's law under MSE beside a Huber fit (not beside a least-squares one)",
    ),
    Mutation(
        "blind8-lr-confound-penalty-inverted",
        "loopscale/fit/validation/lr_confound.py",
        'scaled.loc[at, "L"] * (L_best / shared)',
        'scaled.loc[at, "L"] * (shared / L_best)',
        ("tests/unit/test_validate.py::test_the_lr_grid_gives_the_best_lr_per_r_and_flags_a_move",),
        "validate's phi_penalty_all scales each r's runs by its lr penalty L_best / L_shared",
    ),
    Mutation(
        "blind8-testtime-held-drift-blocks",
        "loopscale/fit/testtime_checks.py",
        'protects = EXTRAPOLATION if kind == "delta" else IDENTIFIED',
        'protects = IDENTIFIED if kind == "delta" else EXTRAPOLATION',
        ("tests/unit/test_testtime_formulas.py::test_held_parameters_block_except_the_drift_which_warns",),
        "a test-time fit with a held drift (no row past r_train) is measured with a warning, not blocked",
    ),
    Mutation(
        "blind8-lr-optimum-90-interval",
        "loopscale/fit/lr_optimum.py",
        "q = 1.959963984540054 if dof is None else float(stdtrit(dof, 0.975))",
        "q = 1.959963984540054 if dof is None else float(stdtrit(dof, 0.95))",
        ("tests/unit/test_lr_optimum.py::test_vertex_and_interval_match_the_closed_form_of_a_symmetric_grid",),
        "the best lr's interval is 95% (t quantile of the noise's degrees of freedom)",
    ),
    Mutation(
        "blind8-seeds-needed-no-square",
        "loopscale/fit/power_summary.py",
        "k = math.ceil(seeds * (MDE_FACTOR * se / target) ** 2 - 1e-9)",
        "k = math.ceil(seeds * (MDE_FACTOR * se / target) - 1e-9)",
        ("tests/unit/test_power.py::test_power_and_seeds_needed_follow_their_formulas",),
        "power's seeds per point scale as (2.80 se / target)^2",
    ),
    Mutation(
        "blind8-curve-noise-rho-correction",
        "loopscale/fit/curve_worth.py",
        "(r1 + 1 / m_bar) / (1 - 3 / m_bar)",
        "(r1 + 1 / m_bar) / (1 + 3 / m_bar)",
        (
            "tests/unit/test_curve_worth.py::test_a_curve_fit_records_its_noise_split_into_a_run_offset_and_an_ar1_along_the_curve",
        ),
        "a curve fit's AR(1) rho is corrected for centring: (r1 + 1/m) / (1 - 3/m) (Marriott & Pope)",
    ),
    Mutation(
        "blind8-published-chinchilla-a-b-swapped",
        "loopscale/analysis/published_laws.py",
        '"A": 406.4, "B": 410.7',
        '"A": 410.7, "B": 406.4',
        (
            "tests/unit/test_analysis_files_rules.py::test_published_sets_are_quoted_and_scored_by_the_rms_of_log_residuals",
        ),
        "report quotes Hoffmann et al.'s Approach 3 as published: A = 406.4, B = 410.7",
    ),
    Mutation(
        "blind8-r-sampling-half-rounds",
        "loopscale/model/r_sampling.py",
        "return math.ceil(n / 2)",
        "return round(n / 2)",
        ("tests/unit/test_r_sampling.py::test_half_keeps_the_gradient_of_ceil_n_over_2_passes_at_every_n",),
        "r_grad=half backprops through ceil(n / 2) passes at every drawn n (Parcae), odd n included",
    ),
    Mutation(
        "blind8-hyper-dynamic-beta-reads-alpha",
        "loopscale/injections/hyper.py",
        "beta + s_b * z[..., 1]",
        "beta + s_b * z[..., 0]",
        ("tests/unit/test_design_equations.py::test_each_injection_computes_its_published_equation_at_r3",),
        "dynamic hyper-connections: beta's correction reads its own column w_beta of W_dyn",
    ),
    Mutation(
        "blind8-parcae-drive-without-step",
        "loopscale/injections/parcae.py",
        "drive = F.softplus(self.dt) * F.linear(e_n, self.B).to(e.dtype)",
        "drive = F.linear(e_n, self.B).to(e.dtype)",
        ("tests/unit/test_design_equations.py::test_parcaes_decay_drive_and_state_at_init",),
        "Parcae's injection u = a s + softplus(dt) (B e_n): the drive carries its step softplus(dt)",
    ),
    Mutation(
        "blind8-loop-index-previous-pass",
        "loopscale/injections/loop_index.py",
        "return u + self.index[i].to(u.dtype), state",
        "return u + self.index[i - 1].to(u.dtype), state",
        (
            "tests/unit/test_accounting_classes.py::test_an_n_pass_slice_acts_first_in_its_pass_and_n_rec_from_the_first",
        ),
        "the loop-index embedding p_i is added in pass i (not the previous pass's)",
    ),
    Mutation(
        "blind8-lora-init-rank-axis",
        "loopscale/blocks/lora.py",
        "a = math.sqrt(3.0 / self.A.shape[-1])",
        "a = math.sqrt(3.0 / self.A.shape[-2])",
        ("tests/unit/test_design_equations.py::test_lora_pairs_at_init",),
        "LoRA's A_i starts uniform with std 1 / sqrt(in)",
    ),
    Mutation(
        "blind8-sandwich-norm-before-residual",
        "loopscale/blocks/sandwich.py",
        "return self.norm_4(self.mlp(self.norm_3(x)) + x)",
        "return self.norm_4(self.mlp(self.norm_3(x))) + x",
        ("tests/unit/test_design_equations.py::test_each_block_form_computes_its_published_equation_at_r3",),
        "the sandwich layer normalises after the residual add: norm_4(mlp(norm_3(x)) + x)",
    ),
    Mutation(
        "blind8-recipe-own-dense-ignored",
        "loopscale/recipes/recipe.py",
        "return r > 1 or self.own_dense",
        "return r > 1",
        ("tests/unit/test_recipes.py::test_r1_reduces_to_the_baseline_where_the_design_says",),
        "a recipe that changes the dense model (huginn, stable_residual) applies at r = 1 too: its r = 1 runs are "
        "its own",
    ),
    Mutation(
        "blind8-lr-transfer-width-ratio-inverted",
        "loopscale/train/optim/lr_transfer.py",
        "width = (cfg.d_model / paper_width(optim.transfer_ref_size)) ** WIDTH_EXPONENT",
        "width = (paper_width(optim.transfer_ref_size) / cfg.d_model) ** WIDTH_EXPONENT",
        ("tests/unit/test_lr_transfer.py::test_lrs_equal_the_published_formulas",),
        "the published head/embedding/norm/hyper lrs scale as (d / d_ref)^-0.5",
    ),
    # -- s8-hardcli: what users read and type (issue 58: validate's folds and flags, the printed lines, tune, equiv,
    # power's bounds, the figures' data) -------------------------------------------------------------------------
    Mutation(
        "hard8-validate-noise-flag-at-twice",
        "loopscale/fit/validation/flags.py",
        "        if ratio > RATIO_FLAG:",
        "        if ratio >= RATIO_FLAG:",
        (
            "tests/unit/test_validation_folds_flags_exact.py::"
            "test_a_fold_is_flagged_past_twice_its_training_noise_not_at_it_and_the_summary_means_and_maxes",
        ),
        "validate flags a held-out fold whose RMS log error is over twice the refit's own residual RMS",
    ),
    Mutation(
        "hard8-validate-phi-half-width-whole-length",
        "loopscale/fit/validation/flags.py",
        "return None if not interval or None in interval else (interval[1] - interval[0]) / 2",
        "return None if not interval or None in interval else (interval[1] - interval[0])",
        (
            "tests/unit/test_validation_folds_flags_exact.py::"
            "test_phi_is_flagged_past_the_half_width_not_at_it_and_the_largest_move_is_reported",
        ),
        "validate flags a leave-one-r-out phi that moves by more than the half-width of phi's 95% interval",
    ),
    Mutation(
        "hard8-validate-budget-folds-by-spent-c",
        "loopscale/fit/validation/folds.py",
        "    labels = budget_labels(table)",
        '    labels = table["C"].to_numpy(dtype=float)',
        (
            "tests/unit/test_validation_folds_flags_exact.py::"
            "test_one_budget_fold_per_requested_budget_and_the_row_count_rule_at_its_boundary",
        ),
        "validate's budget folds group runs by their requested budget, as every other budget grouping does",
    ),
    Mutation(
        "hard8-validate-final-fold-last-row-not-last-step",
        "loopscale/fit/validation/folds.py",
        "        last[rows[np.argmax(step[rows])]] = True",
        "        last[rows[-1]] = True",
        (
            "tests/unit/test_validation_folds_flags_exact.py::"
            "test_curve_folds_hold_runs_out_in_five_strided_groups_and_each_runs_last_step",
        ),
        "validate's final fold holds out each run's last evaluation (the cooldown's end), wherever its row sits",
    ),
    Mutation(
        "hard8-noise-lines-seed-counts-in-text-order",
        "loopscale/fit/noise_text.py",
        "key=lambda kv: int(kv[0]))",
        "key=lambda kv: kv[0])",
        ("tests/unit/test_fit_text_lines_exact.py::test_the_noise_block_in_lines_with_seed_counts_in_numeric_order",),
        "fit prints its points by seeds per point, in the order of the seed count",
    ),
    Mutation(
        "hard8-verdict-lines-ignore-the-records-blocking-list",
        "loopscale/fit/verdict_render.py",
        "    blocking = (cond.blocking if cond else None) or BLOCKING",
        "    blocking = BLOCKING",
        ("tests/unit/test_fit_text_lines_exact.py::test_a_record_naming_its_own_blocking_checks_blocks_on_those_only",),
        "a check prints FAIL when it blocks the measurement (a test-time record names its own blocking checks)",
    ),
    Mutation(
        "hard8-tune-centre-truncated-to-a-power-of-the-step",
        "loopscale/launch/tune_grid.py",
        "k0 = round(math.log(self.centre) / math.log(self.step))",
        "k0 = int(math.log(self.centre) / math.log(self.step))",
        ("tests/unit/test_tune_pure_exact.py::test_the_first_grid_is_points_powers_of_the_step_about_the_centre",),
        "tune's grid is centred on the power of the step nearest --centre",
    ),
    Mutation(
        "hard8-tune-parabola-on-every-lr-not-the-window",
        "loopscale/launch/tune_grid.py",
        "keep = np.isin(x_ok, lrs[window(lrs, means, FIT_POINTS)] if len(lrs) > FIT_POINTS else lrs)",
        "keep = np.isin(x_ok, lrs)",
        (
            "tests/unit/test_tune_pure_exact.py::"
            "test_each_grid_is_fitted_on_the_5_lrs_nearest_its_lowest_loss_at_the_noise_pooled_over_grids",
        ),
        "tune fits each grid's parabola on the 5 lrs nearest its lowest loss",
    ),
    Mutation(
        "hard8-equiv-budget-once-fraction-swapped",
        "loopscale/cli/equiv.py",
        "f = args.n_once / (args.n_once + args.n_rec)",
        "f = args.n_rec / (args.n_once + args.n_rec)",
        (
            "tests/unit/test_cli_small_commands_exact.py::"
            "test_equiv_budget_gives_the_dense_and_looped_optima_each_at_its_own_flops_per_token",
        ),
        "equiv --budget gives the compute-optimal point of a model of this shape (N_once / N its share run once)",
    ),
    Mutation(
        "hard8-power-seeds-cap-exclusive",
        "loopscale/cli/power.py",
        "if args.seeds is not None and not 1 <= args.seeds <= MAX_SEEDS:",
        "if args.seeds is not None and not 1 <= args.seeds < MAX_SEEDS:",
        ("tests/unit/test_cli_power_bounds.py::test_each_bound_at_and_past_it",),
        "power takes --seeds from 1 to 64",
    ),
    Mutation(
        "hard8-validation-figure-axes-swapped",
        "loopscale/plots/validation.py",
        'ax.scatter(r["observed"], r["predicted"], color=colour, s=14, label=label if named else None)',
        'ax.scatter(r["predicted"], r["observed"], color=colour, s=14, label=label if named else None)',
        (
            "tests/unit/test_plot_data_exact.py::"
            "test_the_held_out_figure_plots_measured_against_predicted_of_the_fits_law_per_fold",
        ),
        "validate's figure plots the measured loss on x and the prediction on y",
    ),
    Mutation(
        "hard8-validate-folds-table-ratio-from-mean-error",
        "loopscale/fit/validation/text.py",
        'ratio = h["rms_log"] / max(r["train_rms_log"], 1e-12)',
        'ratio = h["mean_abs_rel_error"] / max(r["train_rms_log"], 1e-12)',
        (
            "tests/unit/test_validation_text_exact.py::"
            "test_the_folds_table_says_each_impossible_fold_once_then_each_fitted_fold_with_its_noise_ratio",
        ),
        "validate's x noise is the held-out RMS log error over the refit's own residual RMS",
    ),
    Mutation(
        "hard8-log-ticks-one-two-five-past-0-9-decades",
        "loopscale/plots/layout.py",
        "        elif span > 0.6:",
        "        elif span > 0.9:",
        ("tests/unit/test_plot_layout_exact.py::test_log_ticks_are_labelled_by_the_span_in_view",),
        "a log axis's tick labels never crowd: 1, 2, 5 only above a span of 0.6 decades",
    ),
    Mutation(
        "hard8-demo-rival-named-at-minus-four",
        "loopscale/demo.py",
        'if best and best["daicc"] < AICC_FLAG:',
        'if best and best["daicc"] <= AICC_FLAG:',
        ("tests/unit/test_demo_text_exact.py::test_the_console_names_the_preferred_rival_only_below_minus_four",),
        "the demo names a rival form only where validate flags it: AICc below -4",
    ),
    Mutation(
        "hard8-testtime-figure-law-at-r-scale-one",
        "loopscale/plots/testtime.py",
        'grid = pd.DataFrame({"r_eval": r, "model": model, "r_scale": first["r_scale"], "fixed": fixed})',
        'grid = pd.DataFrame({"r_eval": r, "model": model, "r_scale": 1.0, "fixed": fixed})',
        (
            "tests/unit/test_plot_data_exact.py::test_the_testtime_figure_draws_each_models_rows_and_its_law_written_out",
        ),
        "the test-time figure draws each model's fitted law at its own depth scale (a fixed-r model's r_train)",
    ),
    Mutation(
        "hard8-advice-band-over-infeasible-sizes",
        "loopscale/plots/advice.py",
        'x[ok], np.asarray(curve["L_lo"])[ok], np.asarray(curve["L_hi"])[ok], color=colour, alpha=0.18, lw=0',
        'x, np.asarray(curve["L_lo"]), np.asarray(curve["L_hi"]), color=colour, alpha=0.18, lw=0',
        (
            "tests/unit/test_plot_data_exact.py::"
            "test_the_advice_figure_plots_each_rs_feasible_curve_solid_the_rest_dotted_and_the_advised_models",
        ),
        "advise's figure shades each r's interval over the models the constraints allow",
    ),
    Mutation(
        "hard8-record-block-forgets-the-key-order",
        "loopscale/fit/record_blocks.py",
        "        return {**{k: out[k] for k in self._keys if k in out}, **out}",
        "        return out",
        (
            "tests/unit/test_record_blocks_rules.py::"
            "test_a_block_is_written_in_the_order_it_was_read_with_unnamed_keys_kept_and_new_ones_last",
        ),
        "a fit record read back is written key for key, in the order it was read",
    ),
    Mutation(
        "hard8-data-zero-flag-dropped-for-the-default",
        "loopscale/cli/data.py",
        "values = {k: v for k, v in vars(args).items() if k in fields and v is not None}",
        "values = {k: v for k, v in vars(args).items() if k in fields and v}",
        ("tests/unit/test_cli_data_collect_registry.py::test_a_zero_given_is_checked_not_dropped_for_the_default",),
        "loopscale data checks every value given (--val-fraction 0 is refused, not replaced by the default)",
    ),
    Mutation(
        "review8-testtime-table-codes-not-the-laws-groups",
        "loopscale/fit/laws/testtime.py",
        'data = replace(data, extra={**data.extra, "group": code})',
        "data = data",
        ("tests/unit/test_testtime_law.py::test_one_models_curve_from_a_joint_fits_parameters_is_its_own",),
        "a test-time curve of one model at a joint fit's parameters uses that model's floor, excess and drift",
    ),
    Mutation(
        "review8-every-rank-reloads-the-checkpoints-tally",
        "loopscale/train/lightning_module.py",
        "self.r_tally = tally if self.global_rank == 0 else {}",
        "self.r_tally = tally",
        (
            "tests/integration/test_sampled_r_run.py::"
            "test_a_sampled_run_over_two_ranks_killed_and_resumed_tallies_every_ranks_sequences_once",
        ),
        "a sampled-r run over several ranks, resumed, tallies each sequence it trained once",
    ),
    Mutation(
        "s10-loop-lr-grid-pooled-as-seeds",
        "loopscale/fit/points.py",
        "    if (settings < 2).all():",
        "    if True:",
        (
            "tests/unit/test_lr_loop_points.py::test_a_point_at_two_lr_loop_is_named_with_its_settings_and_one_a_point_passes",
            "tests/unit/test_lr_loop_points.py::"
            "test_fit_validate_and_power_refuse_a_loop_lr_grid_and_fit_group_lr_loop_fits_each_setting",
        ),
        "runs of one point at two lr_loop are no seeds of one point: fit, validate and power refuse the table",
    ),
    Mutation(
        "s10-stale-loop-rule-read",
        "loopscale/config/lr_rule.py",
        "    return None if then == now else (then, now)",
        "    return None",
        ("tests/unit/test_tune_rule.py::test_a_loop_rule_tuned_at_another_lr_rule_is_refused_where_it_is_read",),
        "a loop rule tuned at another lr rule than the file's is refused where a sweep reads it",
    ),
    Mutation(
        "s10-lr-axis-tunes-at-the-loop-rule",
        "loopscale/launch/tune.py",
        "            if _reads_loop_rule(cfg):",
        "            if False:",
        (
            "tests/unit/test_tune_pure_exact.py::"
            "test_an_experiment_reading_both_rules_tunes_its_lr_at_lr_loop_1_and_its_loop_only_after_its_lr",
        ),
        "`tune --axis lr` of an experiment that reads a loop rule trains at lr_loop = 1, before the loop rule exists",
    ),
    # the s10 review's blind round (issue 54, 55): the survivors, each killed by the test named
    Mutation(
        "s10-review-lr-loop-zero-read",
        "loopscale/fit/points.py",
        "(values > 0))",
        "(values >= 0))",
        (
            "tests/unit/test_lr_loop_points.py::test_a_point_at_two_lr_loop_is_named_with_its_settings_and_one_a_point_passes",
        ),
        "a runs table's lr_loop is a number > 0: 0 (no loop lr at all) is refused naming the row",
    ),
    Mutation(
        "s10-review-curve-folder-reads-csv-only",
        "loopscale/fit/curves/fit.py",
        'TABLE_SUFFIXES = (".csv", ".parquet", ".pq", ".jsonl")',
        'TABLE_SUFFIXES = (".csv",)',
        (
            "tests/integration/test_fit_curves_cli.py::"
            "test_a_folder_reads_parquet_and_json_lines_tables_and_leaves_other_files",
        ),
        "`fit DIR --curves` reads the folder's CSV, Parquet and JSON-lines tables, as `fit TABLE` reads each",
    ),
    Mutation(
        "s10-review-validate-fold-shares-of-the-fold",
        "loopscale/fit/validation/run.py",
        "share = position_share(table)[fold.train]",
        "share = position_share(table[fold.train])",
        (
            "tests/unit/test_validate_position.py::"
            "test_a_fold_without_each_runs_last_evaluation_reads_its_rows_shares_of_the_runs_as_trained",
        ),
        "validate's folds of a position-weighted fit weigh each row at its share of its run as trained (issue 55)",
    ),
    Mutation(
        "s10-review-unforked-runs-one-job",
        "loopscale/fit/position_sigma.py",
        'job = ("parent " + parent).where(parent != "", "run " + run)',
        'job = "parent " + parent',
        (
            "tests/unit/test_position_sigma.py::test_a_row_without_a_parent_is_a_share_of_its_own_run_beside_forked_jobs",
        ),
        "--curve-sigma position reads an unforked run's evaluations as shares of its own run (issue 55)",
    ),
    Mutation(
        "s10-review-curve-folder-other-csv-read",
        "loopscale/fit/curves/fit.py",
        '        if missing:\n            raise InputError(\n                f"{path} has no column(s)',
        '        if False:\n            raise InputError(\n                f"{path} has no column(s)',
        ("tests/integration/test_fit_curves_cli.py::test_a_folder_with_another_csv_is_refused_by_that_files_name",),
        "`fit DIR --curves` refuses a file that is no curves table by its name and the columns it lacks",
    ),
    Mutation(
        "s10-review-curve-record-names-one-table",
        "loopscale/fit/curves/fit.py",
        '"table": [str(t) for t in table] if isinstance(table, list | tuple) else str(table),',
        '"table": str(table[0]) if isinstance(table, list | tuple) else str(table),',
        (
            "tests/integration/test_fit_curves_cli.py::test_a_folder_of_one_csv_per_schedule_is_the_same_fit_as_one_table",
        ),
        "`fit --curves --out` of several tables records every table it read (issue 55)",
    ),
    Mutation(
        "s10-review-validate-interval-of-stage-1",
        "loopscale/fit/validation/run.py",
        "out = profile_param(state if refit is None else refit[1], form.law.profile_param)",
        "out = profile_param(state, form.law.profile_param)",
        (
            "tests/unit/test_validate_position.py::test_a_record_without_an_interval_is_given_the_two_stage_fits_profile",
        ),
        "validate measures a position-weighted fit's shifts against its two-stage phi interval (issue 55)",
    ),
    Mutation(
        "s10-review-lr-loop-float-noise-a-grid",
        "loopscale/fit/points.py",
        "round_sig(values, digits=6)",
        "values",
        (
            "tests/unit/test_lr_loop_points.py::test_a_point_at_two_lr_loop_is_named_with_its_settings_and_one_a_point_passes",
        ),
        "one lr_loop written twice (0.1 + 0.2 and 0.3) is one setting, not a loop-lr grid (issue 54)",
    ),
    Mutation(
        "s10-review-curves-options-ignored-without-curves",
        "loopscale/cli/fit.py",
        "    check_curves_options(vars(args))",
        "    pass",
        ("tests/integration/test_fit_curves_cli.py::test_options_of_curves_without_curves_are_refused_not_ignored",),
        "`fit` without --curves refuses --curves' own options (--from-step, --holdout, ...) instead of fitting every "
        "row (issue 55)",
    ),
    Mutation(
        "s11-once-stack-of-another-width",
        "loopscale/fit/validation/once.py",
        'same = (dense[shape] == run[shape]).all(axis=1) & (dense["n_rec"] == run["n_rec"])',
        'same = dense["n_rec"] == run["n_rec"]',
        (
            "tests/unit/test_validate_once.py::"
            "test_each_looped_run_is_read_against_its_own_block_run_once_at_its_own_tokens",
        ),
        "a looped run is compared with its block run once at its own width and prelude, not another's (issue 54)",
    ),
    Mutation(
        "s11-once-stack-extrapolated-anywhere",
        "loopscale/fit/validation/once.py",
        "if len(x) < 2 or at < x[0] - np.log(EXTRAPOLATE) or at > x[-1] + np.log(EXTRAPOLATE):",
        "if len(x) < 2:",
        (
            "tests/unit/test_validate_once.py::"
            "test_the_once_stacks_loss_is_linear_in_ln_d_and_extrapolated_by_at_most_a_quarter",
        ),
        "a once-stack's loss is read at most 1.25x in D past its own runs (issue 54)",
    ),
    Mutation(
        "s11-once-flag-on-one-win",
        "loopscale/fit/validation/flags.py",
        'if s["runs"] >= 3 and s["better"] == 0',
        'if s["runs"] >= 3 and s["better"] <= 1',
        ("tests/unit/test_validate_once.py::test_an_r_whose_every_looped_run_loses_to_its_block_run_once_is_flagged",),
        "validate flags an r only when every looped run lost to its block run once (issue 54)",
    ),
    Mutation(
        "s12-tune-failed-runs-fitted",
        "loopscale/launch/tune_grid.py",
        "        x_ok, L_ok = x[~bad], L[~bad]",
        "        x_ok, L_ok = x, L",
        (
            "tests/unit/test_tune_failed_runs.py::test_the_runs_that_did_not_train_leave_the_window_and_the_pooled_noise",
        ),
        "tune leaves the runs that did not train out of each parabola and the pooled noise (issue 54)",
    ),
    Mutation(
        "s12-tune-failed-only-if-not-finite",
        "loopscale/fit/lr_optimum.py",
        "    return ~finite | (L > FAILED_RATIO * L[finite].min())",
        "    return ~finite",
        (
            "tests/unit/test_tune_failed_runs.py::test_a_run_failed_over_1_2x_the_lowest_loss_or_not_finite_and_at_1_2x_it_trained",
        ),
        "a run over 1.2x its grid's lowest loss did not train (issue 54)",
    ),
    Mutation(
        "s12-tune-grows-into-failures",
        "loopscale/fit/lr_optimum.py",
        "            return replace(fit, side=0)  # the trained lrs' edge borders lrs that fail: bracketed there",
        "            return fit",
        (
            "tests/unit/test_tune_failed_runs.py::"
            "test_an_edge_bordering_failed_lrs_is_bracketed_and_a_vertex_past_them_is_clipped_to_the_last_lr_that_trained",
        ),
        "a tune grid is not grown into lrs whose runs failed (issue 54)",
    ),
    Mutation(
        "s12-tune-grows-towards-failures",
        "loopscale/fit/lr_optimum.py",
        "float(L_trained[at]), True, -1 if above else 1, None, why)",
        "float(L_trained[at]), True, 1 if above else -1, None, why)",
        (
            "tests/unit/test_tune_failed_runs.py::test_a_grid_with_fewer_than_three_lrs_that_trained_grows_away_from_the_failures",
        ),
        "a tune grid with fewer than 3 lrs that trained grows away from the failures (issue 54)",
    ),
    Mutation(
        "s12-tune-bounded-cells-give-no-rule",
        "loopscale/fit/lr_optimum.py",
        "        if bounded:  # only cells whose optimum lies past their last trained lr",
        "        if False:  # only cells whose optimum lies past their last trained lr",
        (
            "tests/unit/test_tune_failed_runs.py::"
            "test_a_rule_whose_only_cell_stops_short_of_failed_lrs_takes_its_last_trained_lr_without_an_interval",
        ),
        "a tune whose only cells stop short of failed lrs writes their last trained lr, not nothing (issue 54)",
    ),
    Mutation(
        "s12-tune-window-counts-runs",
        "loopscale/launch/tune_grid.py",
        "        keep = np.isin(x_ok, lrs[window(lrs, means, FIT_POINTS)] if len(lrs) > FIT_POINTS else lrs)",
        "        keep = window(x_ok, L_ok, FIT_POINTS) if len(lrs) > FIT_POINTS else np.arange(len(x_ok))",
        (
            "tests/unit/test_tune_failed_runs.py::test_with_seeds_the_window_is_five_lrs_with_every_run_at_them_and_a_failed_seed_leaves_alone",
        ),
        "with seeds, a tune's parabola window is 5 lrs with every run at them, not 5 runs (issue 54)",
    ),
    Mutation(
        "s12-early-fold-from-zero",
        "loopscale/fit/validation/folds.py",
        "    share = curve_start + EARLY_SHARE",
        "    share = EARLY_SHARE",
        (
            "tests/unit/test_validation_folds_flags_exact.py::"
            "test_the_early_fold_holds_out_each_runs_evaluations_before_its_share_from_the_fits_curve_start",
        ),
        "a curve fit's early fold starts where the fit's --curve-start does, not at step 0 (issue 54)",
    ),
    Mutation(
        "s12-early-shift-at-twice-the-half-width",
        "loopscale/fit/validation/flags.py",
        "    if hw is not None and abs(shift) > hw:",
        "    if hw is not None and abs(shift) > 2 * hw:",
        (
            "tests/unit/test_validation_folds_flags_exact.py::"
            "test_a_curve_fits_phi_is_flagged_when_it_moves_past_the_half_width_without_the_early_evaluations",
        ),
        "validate flags a curve fit whose phi moves past its half-width without the early evaluations (issue 54)",
    ),
    Mutation(
        "s12-mse-flag-against-any-form",
        "loopscale/fit/validation/flags.py",
        'if i and form["law"] == record.forms[0]["law"] and form.get("loss") == MSE_KIND',
        'if i and form.get("loss") == MSE_KIND',
        (
            "tests/unit/test_validation_folds_flags_exact.py::"
            "test_phi_under_mse_is_flagged_past_the_half_width_from_the_fits_loss_and_only_against_the_same_law",
        ),
        "validate compares phi under MSE with the fit's own law under MSE, not a rival law (issue 54)",
    ),
    Mutation(
        "s13-logn-size-is-unique-params",
        "loopscale/fit/laws/looped_logn.py",
        "    return np.log(cost_params(N_once, N_rec, r) / N_ref)",
        "    return np.log((N_once + N_rec) / N_ref)",
        ("tests/unit/test_looped_logn.py::test_each_row_is_worth_r_to_the_exponent_of_its_own_size",),
        "looped-logn reads the size a token passes through, N_once + r N_rec (issue 54)",
    ),
    Mutation(
        "s13-logn-reference-unrounded",
        "loopscale/fit/laws/looped_logn.py",
        '    return float(f"{centre:.2g}")',
        "    return centre",
        ("tests/unit/test_looped_logn.py::test_the_reference_is_the_tables_geometric_size_to_two_figures",),
        "looped-logn's N_ref is the table's geometric N_c to two figures, stable across folds (issue 54)",
    ),
    Mutation(
        "s13-logn-record-drops-reference",
        "loopscale/fit/laws/looped_logn.py",
        '        return {**super().to_user(theta), "N_ref": self._ref()}',
        "        return super().to_user(theta)",
        ("tests/unit/test_looped_logn.py::test_the_record_rebuilds_the_law_at_its_reference",),
        "a looped-logn fit record holds N_ref, so predictions from it use the size it was fitted at (issue 54)",
    ),
    Mutation(
        "s13-logn-one-size-accepted",
        "loopscale/fit/laws/looped_logn.py",
        "        if not sizes.max() >= SIZE_SPAN_MIN * sizes.min():",
        "        if not sizes.max() > sizes.min():",
        ("tests/unit/test_looped_logn.py::test_a_table_of_one_size_and_a_law_without_a_reference_are_refused",),
        "looped-logn refuses a table whose sizes span less than 1.5x: psi has nothing to be read across (issue 54)",
    ),
    Mutation(
        "s13-fit-binds-without-data",
        "loopscale/fit/optimize.py",
        "law = law_name if isinstance(law_name, Law) else law_class(law_name).for_data(data)",
        "law = law_name if isinstance(law_name, Law) else law_class(law_name).bind(r=data.r)",
        ("tests/unit/test_looped_logn.py::test_noise_free_tables_give_their_phi_and_psi_back_at_the_tables_reference",),
        "fit --law binds a law to its data (Law.for_data): looped-logn reads its N_ref there (issue 54)",
    ),
    Mutation(
        "s13-logn-warm-from-looped",
        "loopscale/fit/laws/looped_logn.py",
        '    rival = "r^(phi + psi ln(N_c/N_ref))"\n',
        (
            '    rival = "r^(phi + psi ln(N_c/N_ref))"\n    warm_start = "looped"\n\n'
            "    def warm_starts(self, theta):\n"
            "        return np.array([np.concatenate([theta[:5], [theta[5], p]]) for p in (0.0, -0.25, 0.25)])\n"
        ),
        ("tests/unit/test_looped_logn.py::test_noise_free_tables_give_their_phi_and_psi_back_at_the_tables_reference",),
        "looped-logn screens its starts: the looped optimum can sit on E's bound where no slope leads back (issue 54)",
    ),
    Mutation(
        "s13-departure-not-flagged",
        "loopscale/fit/validation/flags.py",
        '        elif cls.departure and cls.name != record.forms[0]["law"]:',
        "        elif False:",
        (
            "tests/unit/test_validation_folds_flags_exact.py::test_a_per_r_form_or_a_departure_is_flagged_below_minus_four_aicc_only_and_never_the_fits_own_law",
            "tests/unit/test_looped_logn.py::test_validate_ranks_it_among_the_rivals_by_what_the_data_do_and_flags_its_win",
        ),
        "validate flags a rival whose win says what departs (phi runs with the size) with its parameter (issue 54)",
    ),
    Mutation(
        "s13-departure-flags-own-law",
        "loopscale/fit/validation/flags.py",
        '        elif cls.departure and cls.name != record.forms[0]["law"]:',
        "        elif cls.departure:",
        (
            "tests/unit/test_validation_folds_flags_exact.py::test_a_per_r_form_or_a_departure_is_flagged_below_minus_four_aicc_only_and_never_the_fits_own_law",
        ),
        "validate never flags the fit's own law as a rival that beats it (issue 54)",
    ),
    Mutation(
        "s13-collapse-keeps-departure",
        "loopscale/plots/curves.py",
        "        at |= dict(law.looped_at)",
        "        pass",
        ("tests/unit/test_looped_logn.py::test_the_collapse_reference_panels_are_pure_powers_of_r",),
        "the collapse's phi = 0 / 1 panels are m = 1 / m = r, a rival's psi or kappa at its null (issue 54)",
    ),
    Mutation(
        "s13-loop-gap-pairs-by-width-only",
        "loopscale/plots/loop_gap.py",
        'PAIR_COLUMNS = ("width", "C_budget")',
        'PAIR_COLUMNS = ("width",)',
        ("tests/unit/test_loop_gap.py::test_each_looped_point_is_paired_with_the_r1_run_of_its_width_and_budget",),
        "the loop's price pairs a looped run with the r = 1 run of its width and budget: equal tokens (issue 54)",
    ),
    Mutation(
        "s13-loop-gap-law-against-runs",
        "loopscale/plots/loop_gap.py",
        'gap_law=pairs["L_hat"] - pairs["L_hat_1"]',
        'gap_law=pairs["L_hat"] - pairs["L_1"]',
        ("tests/unit/test_loop_gap.py::test_each_looped_point_is_paired_with_the_r1_run_of_its_width_and_budget",),
        "the law's gap is the law's L_hat of both runs, not against the measured r = 1 loss (issue 54)",
    ),
    Mutation(
        "s14-logn-joint-separate-fits-own-n-ref",
        "loopscale/fit/laws/looped_logn_joint.py",
        "        return self.single()\n\n    def bounds",
        "        return self.recipe_law\n\n    def bounds",
        (
            "tests/unit/test_looped_logn_joint.py::test_the_separate_fits_are_read_at_the_joint_n_ref_and_the_shared_check_runs",
        ),
        "a looped-logn joint fit's separate fits read phi at the joint N_ref, not each at its own table's (issue 54)",
    ),
    Mutation(
        "s14-logn-joint-drops-psi",
        "loopscale/fit/laws/looped_logn_joint.py",
        "        return log_m + thetas[:, -1:] * slope, np.column_stack([dlogm, slope])",
        "        return log_m, np.column_stack([dlogm, slope])",
        (
            "tests/unit/test_looped_logn_joint.py::test_noise_free_tables_give_each_recipes_phi_at_the_joint_n_ref_and_the_shared_psi_back",
        ),
        "the joint looped-logn law's exponent runs with the size by the shared psi (issue 54)",
    ),
    Mutation(
        "s14-recipe-view-drops-shared-parameters",
        "loopscale/plots/views.py",
        '    shared = set(fit.params) - {law.recipe_param(g) for g in j["recipes"]}',
        '    shared = {"E", "A", "alpha", "B", "beta"}',
        (
            "tests/unit/test_looped_logn_joint.py::test_a_record_rebuilds_the_law_and_each_recipes_view_keeps_psi_and_n_ref",
        ),
        "a recipe's view of a joint fit keeps the law's shared parameters (psi, N_ref, kappa) (issue 54)",
    ),
    Mutation(
        "s14-power-pilot-drops-n-ref",
        "loopscale/fit/pilot.py",
        "    return law_name, {**params, **held_params(law_name, {**final, **params})}",
        "    return law_name, params",
        (
            "tests/unit/test_looped_logn_joint.py::test_power_simulates_a_looped_logn_pilot_at_its_n_ref_and_more_seeds_narrow_phi",
        ),
        "power's truth keeps what the pilot's law holds (looped-logn's N_ref) (issue 54)",
    ),
    Mutation(
        "s14-shared-check-start-of-the-looped-joints-length",
        "loopscale/fit/joint.py",
        "    starts = [state.best.theta, law.from_user({**separate[law.recipes[0]][0].params, **phis})]",
        "    starts = [state.best.theta, law.from_user({**separate[law.recipes[0]][0].params, **phis})[: 5 + K]]",
        (
            "tests/unit/test_looped_logn_joint.py::test_the_entry_laws_joint_fit_runs_its_separate_fits_and_shared_check_too",
        ),
        "the shared-parameter check starts from the separate fits in the joint law's own coordinates (issue 54)",
    ),
    Mutation(
        "s14-recipe-view-keeps-other-recipes-phi",
        "loopscale/plots/views.py",
        '    shared = set(fit.params) - {law.recipe_param(g) for g in j["recipes"]}',
        "    shared = set(fit.params) - {law.recipe_param(recipe)}",
        ("tests/unit/test_looped_logn_joint.py::test_a_recipes_view_holds_its_own_phi_and_the_shared_parameters_only",),
        "a recipe's view of a joint fit holds its own phi, none of the other recipes' (a blind round's survivor)",
    ),
    Mutation(
        "s14-loop-gap-joint-pools-recipes",
        "loopscale/plots/loop_gap.py",
        '        parts = [(g, loop_gaps(table, recipe_fit(fit, g))) for g in (fit.joint or {}).get("recipes", [])]',
        '        parts = [(g, loop_gaps(table, fit)) for g in (fit.joint or {}).get("recipes", [])]',
        (
            "tests/unit/test_loop_gap.py::test_a_joint_fit_gets_a_panel_per_recipe_each_against_the_shared_r1_runs_at_its_own_phi",
        ),
        "a joint fit's loop gap pairs each recipe's own looped runs with the shared r = 1 runs (issue 54)",
    ),
    Mutation(
        "s14-loop-gap-tokens-ratio-inverted",
        "loopscale/plots/loop_gap.py",
        'tokens_ratio=pairs["D"] / pairs["D_1"]',
        'tokens_ratio=pairs["D_1"] / pairs["D"]',
        ("tests/unit/test_loop_gap.py::test_each_looped_point_is_paired_with_the_r1_run_of_its_width_and_budget",),
        "the loop gap says how many tokens the looped run trains against its r = 1 pair (issue 54)",
    ),
    Mutation(
        "s15-demo-fits-r-phi-whatever-the-law",
        "loopscale/demo.py",
        "    fit_args = dict(law=settings.law, seed=settings.seed,",
        '    fit_args = dict(law="looped", seed=settings.seed,',
        ("tests/unit/test_demo_law.py::test_the_demo_fits_the_law_it_is_asked_for_weighed_by_its_seeds",),
        "`loopscale demo --law looped-logn` fits looped-logn, phi at N_ref (issue 54)",
    ),
    Mutation(
        "s15-demo-drops-its-seeds",
        "loopscale/demo.py",
        "    seeds = [f\"seed={','.join(str(s) for s in range(settings.seeds))}\"] if settings.seeds > 1 else []",
        "    seeds = []",
        ("tests/unit/test_demo_text_exact.py::test_the_demo_sweeps_overrides_put_the_users_last",),
        "`loopscale demo --seeds K` trains seed=0..K-1 of every point (issue 54)",
    ),
    Mutation(
        "s15-demo-seed-override-beside-seeds",
        "loopscale/demo.py",
        '        if key == "seed" and settings.seeds > 1:',
        '        if key == "seed" and settings.seeds > 2:',
        ("tests/unit/test_demo_cli.py::test_demo_refuses_seeds_it_cannot_train",),
        "a seed= override beside --seeds K is refused, not doubled or outvoted (issue 54)",
    ),
    Mutation(
        "s15-logn-curve-n-ref-over-models",
        "loopscale/fit/laws/looped_logn_curve.py",
        "np.stack([data.N_once, data.N_rec, data.r, tokens], axis=1)",
        "np.stack([data.N_once, data.N_rec, data.r], axis=1)",
        ("tests/unit/test_looped_logn_curve.py::test_n_ref_counts_each_run_once_not_each_evaluation",),
        "a curve fit under looped-logn reads phi at the runs' N_ref, the runs table's (issue 54)",
    ),
    Mutation(
        "s15-logn-curve-multiplier-r-phi",
        "loopscale/fit/laws/looped_logn_curve.py",
        "        return LoopedLogN.log_multiplier(self, thetas, data)",
        "        return super().log_multiplier(thetas[:, :6], data)",
        ("tests/unit/test_looped_logn_curve.py::test_where_the_schedule_terms_vanish_it_is_looped_logn",),
        "looped-logn-curve's exponent runs with the size, as looped-logn's (issue 54)",
    ),
    Mutation(
        "s15-log-size-inverted",
        "loopscale/fit/laws/looped_logn.py",
        "    return np.log(cost_params(N_once, N_rec, r) / N_ref)",
        "    return np.log(N_ref / cost_params(N_once, N_rec, r))",
        ("tests/unit/test_looped_logn.py::test_each_row_is_worth_r_to_the_exponent_of_its_own_size",),
        "psi multiplies ln(N_c / N_ref): phi falls with size when psi < 0 (issue 54)",
    ),
    Mutation(
        "s15-curve-worth-final-law-unbound",
        "loopscale/fit/curve_worth.py",
        "    f_law = make_law(cls.final_law).from_params(final_params)",
        '    f_law = make_law(cls.final_law).from_params({**final_params, "N_ref": 4e5})',
        (
            "tests/unit/test_curve_worth.py::test_a_logn_curve_is_weighed_at_the_pilots_n_ref_against_looped_logns_final_points",
        ),
        "a looped-logn curve pilot's final points are read at its own N_ref, not another (issue 54)",
    ),
    Mutation(
        "s15-demo-cli-drops-law",
        "loopscale/cli/demo.py",
        "        law=args.law,\n",
        "",
        ("tests/unit/test_demo_cli.py::test_the_demo_options_reach_its_settings",),
        "`loopscale demo --law looped-logn` reaches the demo's settings (blind round 10's survivor) (issue 54)",
    ),
    Mutation(
        "s15-demo-summary-drops-law",
        "loopscale/demo.py",
        "        **dict(law=settings.law, seeds=settings.seeds, n_jobs=n_jobs, n_trained=len(trained), n_runs=n_runs),",
        "        **dict(seeds=settings.seeds, n_jobs=n_jobs, n_trained=len(trained), n_runs=n_runs),",
        ("tests/unit/test_demo_text_exact.py::test_the_run_summary_records_the_law_and_seeds_the_console_names",),
        "demo.json records the law the demo fitted (blind round 10's survivor) (issue 54)",
    ),
    Mutation(
        "s16-advise-logn-size-free",
        ADVISE,
        "    if r not in sets.scaling:\n        return m, 0.0",
        "    if True:\n        return m, 0.0",
        ("tests/unit/test_advise_logn.py::test_the_advised_model_is_eq1_at_looped_logns_own_effective_size",),
        "advise prices a looped-logn width by the multiplier of its own N_c (issue 54)",
    ),
    Mutation(
        "s16-advise-logn-slope-drops-dm",
        ADVISE,
        '    dn = family.slope("N_once", r, d) + m * family.slope("N_rec", r, d) + dm * n_rec',
        '    dn = family.slope("N_once", r, d) + m * family.slope("N_rec", r, d)',
        ("tests/unit/test_advise_logn.py::test_the_slope_the_optimiser_bisects_is_the_derivative_of_the_loss_in_ln_d",),
        "advise's optimiser bisects the looped-logn loss's own derivative (issue 54)",
    ),
    Mutation(
        "s16-logn-scaling-sign",
        "loopscale/fit/laws/looped_logn.py",
        "        return np.power(float(r), phi), psi * np.log(float(r)), self._ref()",
        "        return np.power(float(r), phi), -psi * np.log(float(r)), self._ref()",
        ("tests/unit/test_advise_logn.py::test_the_advised_model_is_eq1_at_looped_logns_own_effective_size",),
        "looped-logn's multiplier is r^phi (N_c / N_ref)^(psi ln r) wherever advice reads it (issue 54)",
    ),
    Mutation(
        "s16-logn-joint-scaling-reference-phi",
        "loopscale/fit/laws/looped_logn_joint.py",
        "        recipe = recipe or self.recipes[0]\n        return self.single().multiplier_scaling(",
        "        recipe = self.recipes[0]\n        return self.single().multiplier_scaling(",
        ("tests/unit/test_advise_logn.py::test_a_joint_fit_is_advised_at_its_recipes_phi_and_the_shared_psi",),
        "advise --recipe on a joint looped-logn fit reads that recipe's phi (issue 54)",
    ),
    Mutation(
        "s16-advised-n-eff-at-reference",
        "loopscale/analysis/advise/advice.py",
        "    m = float(multiplier_at(point, family, r, [[d]])[0][0, 0])",
        "    m = float(point.multiplier[r][0])",
        ("tests/unit/test_advise_logn.py::test_the_advised_model_is_eq1_at_looped_logns_own_effective_size",),
        "the advised model's N_eff is the law's at its own width (issue 54)",
    ),
    Mutation(
        "s16-demo-one-seed",
        "loopscale/demo.py",
        "DEMO_SEEDS = 2\n",
        "DEMO_SEEDS = 1\n",
        (
            "tests/unit/test_demo_text_exact.py::test_the_demo_sweeps_overrides_put_the_users_last",
            "tests/unit/test_demo_cli.py::test_the_demo_options_reach_its_settings",
        ),
        "`make demo` trains two seeds of every point, what measures phi in 15 minutes (issue 54)",
    ),
    Mutation(
        "s16-demo-val-first-windows",
        "sweeps/experiment/isodepth_cpu_demo.yaml",
        "  val_tokens: 131072\n",
        "  val_tokens: 16384\n",
        ("tests/system/test_demo.py::test_make_demo_at_its_defaults_trains_two_seeds_and_fits_phi_at_n_ref",),
        "the demo reads each run's L on the whole val split (issue 54)",
    ),
)


# ---------------------------------------------------------------------------------------------------------
# the scratch copy


def tree_files(root: Path) -> list[str]:
    """The working tree's files as git sees them: tracked (and present) plus untracked, not ignored."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted({f for f in out.split("\0") if f and (root / f).is_file()})


def scratch_copy(root: Path, dest: Path) -> Path:
    for name in tree_files(root):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    return dest


def test_env(copy: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTHONSTARTUP")}
    env.update(PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    return env


def check_imports(copy: Path) -> None:
    """The copy's loopscale and Hydra plugins are what a test and a child it starts (from another folder)
    import."""
    code = (
        "import loopscale, loopscale.fit.verdict as v, hydra_plugins.loopscale_launchers as h; "
        "print(v.__file__); print(h.__file__)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=copy.parent, env=test_env(copy), capture_output=True, text=True
    )
    paths = proc.stdout.split()
    if proc.returncode != 0 or len(paths) != 2 or not all(Path(p).is_relative_to(copy) for p in paths):
        raise SystemExit(f"mutations: the scratch copy is not what gets imported: {proc.stdout}{proc.stderr}")


# ---------------------------------------------------------------------------------------------------------
# one mutation


def snippet_problem(root: Path, m: Mutation) -> str | None:
    """Why the mutation cannot be applied to the tree at `root` (the code moved), or None."""
    path = root / m.file
    if not path.is_file():
        return f"{m.file} is gone"
    count = path.read_text().count(m.old)
    if count != 1:
        return f"its snippet occurs {count} times in {m.file} (needs exactly once)"
    return None


def run_tests(
    copy: Path, tests: tuple[str, ...], timeout_s: float, extra: list[str], first_failure_stops: bool = True
) -> tuple[int | None, str]:
    """(pytest's exit code or None on timeout, its output) for `tests` in the copy."""
    stop = ["-x"] if first_failure_stops else []
    # one -q is the runner's own: another (`-- -x -q`, the brief's usual options) hides pytest's "N passed" line,
    # and a survivor would read as not-run
    extra = [a for a in extra if not re.fullmatch(r"-q+|--quiet", a)]
    # -rfEs: the failed and errored node ids (pytest's default -rfE) and why each skip skipped
    cmd = [sys.executable, "-m", "pytest", *stop, "-q", "-rfEs", "-p", "no:cacheprovider", "--no-header", *extra]
    cmd += tests
    proc = subprocess.Popen(
        cmd,
        cwd=copy,
        env=test_env(copy),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a timeout kills the tests' own children too
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return None, proc.communicate()[0]


def failures(output: str) -> list[str]:
    """The node ids pytest's summary lists as failed or in error."""
    return re.findall(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE)


def first_failure(output: str) -> str:
    return next(iter(failures(output)), "")


def covers(target: str, node: str) -> bool:
    """Whether the test `node` is one of the target's (a file, or a test with its parameters)."""
    return node == target or node.startswith((target + "::", target + "["))


def last_line(output: str) -> str:
    """pytest's last line (its summary), or a note that it printed nothing (killed before its first
    result, or its terminal reporter turned off)."""
    lines = output.strip().splitlines()
    return lines[-1] if lines else "(pytest printed nothing)"


def skip_reasons(output: str) -> list[str]:
    """Why the skipped tests skipped, as -rs lists them ("SKIPPED [1] file:line: reason")."""
    return list(dict.fromkeys(re.findall(r"^SKIPPED \[\d+\] \S+?: (.*)$", output, re.MULTILINE)))


def classify(rc: int | None, output: str, timeout_s: float) -> tuple[str, str]:
    """(verdict, detail) of one mutant's run of its named tests: pytest's exit code (None: timed out) and its
    output. A mutant is `caught` only when a named test ran and failed; one whose tests all skipped or were
    deselected (or whose run reported no passed test) is `not-run`: nothing measured it, so it is neither
    caught nor survived."""
    if rc is None:
        return "timeout", f"still running after {timeout_s:.0f} s; last output: {last_line(output)}"
    if rc == 1:
        failed = first_failure(output)
        if failed:
            return "caught", failed
        return "broken", f"pytest exit 1 but no failed test listed: {last_line(output)}"
    if rc == 0 and re.search(r"\b\d+ passed\b", output):
        return "SURVIVED", "every named test passed"
    if rc == 0:
        why = "; ".join(skip_reasons(output)) or last_line(output)
        return "not-run", f"no test ran: every named test skipped or none reported passed: {why}"
    if rc == 5:  # pytest's NO_TESTS_COLLECTED: every named test deselected (-m, -k, --deselect)
        return "not-run", f"no test ran: none collected (every named test deselected?): {last_line(output)}"
    return "broken", f"pytest exit {rc}: {last_line(output)}"


def run_mutation(copy: Path, m: Mutation, timeout_s: float, extra: list[str]) -> dict:
    started = time.monotonic()
    problem = snippet_problem(copy, m)
    if problem is not None:
        return {"id": m.id, "verdict": "stale", "detail": problem, "seconds": 0.0}
    path = copy / m.file
    original = path.read_text()
    path.write_text(original.replace(m.old, m.new))
    try:
        rc, output = run_tests(copy, m.tests, timeout_s, extra)
    finally:
        path.write_text(original)
    verdict, detail = classify(rc, output, timeout_s)
    return {"id": m.id, "verdict": verdict, "detail": detail, "seconds": time.monotonic() - started}


# ---------------------------------------------------------------------------------------------------------


def listed_mutations(path: Path) -> tuple[Mutation, ...]:
    """Mutations written down outside this file (a blind round's list, written without reading it or tests/): a JSON
    list of {id, file, old, new, tests, promise}, or an object holding it under "mutations" (a frozen list)."""
    content = json.loads(Path(path).read_text())
    entries = content["mutations"] if isinstance(content, dict) else content
    return tuple(dataclasses.replace(m, tests=tuple(m.tests)) for m in (Mutation(**e) for e in entries))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated mutation ids (default: all)")
    parser.add_argument(
        "--from",
        dest="source",
        type=Path,
        help="run a JSON list of mutations instead of the curated ones (a blind round's: docs/results.md)",
    )
    parser.add_argument("--check", action="store_true", help="only check that every snippet applies; run nothing")
    parser.add_argument("--list", action="store_true", help="list the mutations and the promises they break")
    parser.add_argument("--no-baseline", action="store_true", help="skip running the named tests on the clean copy")
    parser.add_argument("--timeout-s", type=float, default=TIMEOUT_S, help="per mutation (default %(default)s)")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy (its path is printed)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest options, after --")
    args = parser.parse_args(argv)

    mutations = MUTATIONS if args.source is None else listed_mutations(args.source)
    ids = [m.id for m in mutations]
    if len(set(ids)) != len(ids):
        raise SystemExit("mutations: duplicate ids")
    wanted = [m for m in mutations if not args.only or m.id in args.only.split(",")]
    unknown = set(filter(None, args.only.split(","))) - set(ids)
    if unknown:
        raise SystemExit(f"mutations: no mutation {sorted(unknown)}")
    if args.list:
        for m in wanted:
            print(f"{m.id:<44} {m.file:<38} {m.promise}")
        return 0
    if args.check:
        stale = [(m.id, p) for m in wanted if (p := snippet_problem(REPO_ROOT, m)) is not None]
        for mid, problem in stale:
            print(f"stale  {mid}: {problem}")
        print(f"{len(wanted) - len(stale)} of {len(wanted)} snippets apply to {REPO_ROOT}")
        return 1 if stale else 0

    work = Path(tempfile.mkdtemp(prefix="loopscale-mutations-"))
    copy = scratch_copy(REPO_ROOT, work / "tree")
    print(f"mutations: {len(wanted)} mutations against a scratch copy of {REPO_ROOT} at {copy}", flush=True)
    results: list[dict] = []
    try:
        check_imports(copy)
        failing: list[str] = []  # tests that fail on the clean copy: their mutations cannot be measured
        if not args.no_baseline:
            tests = tuple(dict.fromkeys(t for m in wanted if snippet_problem(copy, m) is None for t in m.tests))
            started = time.monotonic()
            rc, output = run_tests(copy, tests, args.timeout_s * 3, args.pytest_args, first_failure_stops=False)
            failing = failures(output)
            summary = last_line(output)
            print(f"clean copy: {len(tests)} test targets in {time.monotonic() - started:.0f} s: {summary}")
            if rc not in (0, 1) or (rc == 1 and not failing):
                print(output[-5000:])
                raise SystemExit("mutations: the named tests do not run on the unmutated tree; nothing measured")
            for node in failing:
                print(f"clean copy: {node} FAILS without a mutation: its mutations are not measured")
        for i, m in enumerate(wanted, 1):
            unmeasurable = [n for n in failing if any(covers(t, n) for t in m.tests)]
            if unmeasurable:
                result = {
                    "id": m.id,
                    "verdict": "broken",
                    "detail": f"fails unmutated: {unmeasurable[0]}",
                    "seconds": 0.0,
                }
            else:
                result = run_mutation(copy, m, args.timeout_s, args.pytest_args)
            results.append({**result, "file": m.file, "promise": m.promise})
            line = f"[{i:>2}/{len(wanted)}] {m.id:<44} {result['verdict']:<8} {result['seconds']:6.1f} s"
            print(f"{line}  {result['detail']}", flush=True)
    finally:
        if args.keep:
            print(f"mutations: kept the scratch copy {copy}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    verdicts = ("caught", "SURVIVED", "not-run", "stale", "broken", "timeout")
    by = {v: [r for r in results if r["verdict"] == v] for v in verdicts}
    applied = len(results) - len(by["stale"])
    print(f"\ncaught {len(by['caught'])}/{applied} applied mutations ({len(results)} curated)")
    labels = {"SURVIVED": "survivors", "not-run": "no test ran (skipped or deselected)"}
    labels |= {"stale": "stale (the code moved)", "broken": "broken", "timeout": "timed out"}
    for verdict, label in labels.items():
        listed = ", ".join(r["id"] for r in by[verdict]) or "none"
        print(f"{label}: {listed}")
    if args.json:
        args.json.write_text(json.dumps({"mutations": [asdict(m) for m in wanted], "results": results}, indent=2))
    return 0 if len(by["caught"]) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
