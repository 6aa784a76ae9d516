"""run.json's type, RunRecord (loopscale/train/run_json.py): a record read from JSON gives back the same JSON object,
key order included, whatever wrote it; a record written by training has the keys it has learnt, in the order it
learnt them, for a plain run, a forked branch and a stable parent; keys it does not know are kept."""

from __future__ import annotations

import json

from loopscale.train.plan import plan_run
from loopscale.train.recording import first_record, record_plan
from loopscale.train.run_json import PLAN_KEYS, START_KEYS, TABLE_COLUMNS, RunRecord
from support.train import TINY, train_config

# a done forked branch as loopscale wrote it before RunRecord existed (config and versions cut short)
BRANCH = {
    "status": "done",
    "reason": None,
    "step": 164,
    "run_name": "baseline-r1-d16-C6e10",
    "sweep": "isodepth_cpu_demo",
    "run_dir": "runs/isodepth_cpu_demo/baseline-r1-d16-C6e10",
    "point": "C6e10-d16",
    "identity": "3a5b7ee450f951ec",
    "parent": "runs/isodepth_cpu_demo/baseline-r1-d16",
    "fork_step": 131,
    "role": "branch",
    **{"r": 1, "recipe": "baseline", "width": 16, "depth": 10, "n_prelude": 1, "n_rec": 8, "n_coda": 1},
    **{"bptt_k": None, "injection": "passthrough", "vocab_size": 512, "vocab_padded": 512, "seq_len": 64},
    **{"N_once": 6256, "N_rec": 24832, "N_pass": 0, "N": 31088, "embedding": 8192, "lm_head": 8192, "F": 358272.0},
    **{"D": 167936, "C": 60166766592.0, "C_budget": 6e10, "steps": 164, "batch_tokens": 1024},
    **{"L": 3.985203504562378, "val_loss": 3.985203504562378, "train_loss": 4.030503749847412, "seed": 0},
    **{"git_commit": "f644981d2b0211908bda1f1c37dcb855b65bf6b2", "versions": {"torch": "2.13.0+cpu"}},
    "config": {"seed": 0},
    "data": {"format": "windows", "train_tokens": 290000},
    **{"device_batch": 16, "grad_accum": 1, "world": 1, "memory_predicted": None},
    **{"optimizer": "adamw", "lrs": {"decay": 0.003, "no_decay": 0.003, "hyper": 0.003}},
    "ranks": [{"rank": 0, "node_id": None, "node": None, "host": "h", "pid": 1, "resumed_from_step": 131}],
    **{"wall_time_s": 6.5, "tokens_per_s": 5000.0, "resumed_from_step": 131},
}


def test_a_record_read_from_json_writes_the_same_object_back():
    for written in (BRANCH, {**BRANCH, "a_key_from_a_newer_version": [1, 2]}):
        record = RunRecord.from_dict(json.loads(json.dumps(written)))
        assert record.N == 31088 and record.parent == BRANCH["parent"] and record.lrs["decay"] == 0.003
        assert list(record.to_json_dict().items()) == list(written.items())
    assert RunRecord.from_dict(BRANCH).table_row() == {col: BRANCH.get(col) for col in TABLE_COLUMNS}
    # a record of an invalid config (loopscale-train writes just these) loads; what it lacks is None
    early = RunRecord.from_dict({"status": "failed", "reason": "invalid config: x", "step": 0, "run_name": "a"})
    assert early.N is None and early.L is None and early.status == "failed"


def test_training_writes_the_keys_it_has_learnt_in_the_order_it_learnt_them(tmp_path):
    cfg = train_config(TINY)
    plain = first_record(cfg, tmp_path / cfg.run_name)
    assert list(plain.to_json_dict()) == list(START_KEYS)  # a failure before the plan says only this
    record_plan(plain, cfg, plan_run(cfg))
    plain.update(status="failed", reason="x", wall_time_s=1.0)
    keys = list(plain.to_json_dict())
    # a plain run's parent is a plan key, null; no fork key, no key of a later stage but the wall time
    assert keys == [*START_KEYS, *PLAN_KEYS, "wall_time_s"] and plain.to_json_dict()["parent"] is None
    fork = {"parent": "runs/p", "fork_step": 3, "role": "branch"}
    branch = first_record(cfg, tmp_path / cfg.run_name, fork)
    record_plan(branch, cfg, plan_run(cfg))
    keys = list(branch.to_json_dict())
    assert keys == [*START_KEYS, *fork, *(k for k in PLAN_KEYS if k != "parent")]
    summary = {"role": "stable-parent", "fork_steps": [3], "branches": ["b"], "C_independent": 2.0, "C_forked": 1.0}
    parent = first_record(cfg, tmp_path / cfg.run_name, summary)
    record_plan(parent, cfg, plan_run(cfg))
    assert list(parent.to_json_dict()) == [*START_KEYS, *summary, *PLAN_KEYS]


def test_a_record_file_is_read_back_as_the_run_record_it_was_written_as(tmp_path):
    """read_record / read_record_or_none hand back the RunRecord (fields, and the keys a newer version wrote in
    `extra`), readable by its fields and, for readers written against the JSON, by its keys; is_finished and
    collect read the same type."""
    from loopscale.train.run_json import RUN_FILE, read_record, read_record_or_none

    run_dir = tmp_path / BRANCH["run_name"]
    run_dir.mkdir()
    (run_dir / RUN_FILE).write_text(json.dumps({**BRANCH, "a_key_from_a_newer_version": 7}))
    record = read_record(run_dir)
    assert isinstance(record, RunRecord) and record == read_record_or_none(run_dir / RUN_FILE)
    assert (record.L, record.fork_step, record.extra) == (BRANCH["L"], 131, {"a_key_from_a_newer_version": 7})
    assert record["L"] == record.L and record["a_key_from_a_newer_version"] == 7 and record.get("bptt_k", 3) == 3
    assert record.to_json_dict() == {**BRANCH, "a_key_from_a_newer_version": 7}
    assert read_record(tmp_path) is None and read_record_or_none(tmp_path / "nothing.json") is None
    (run_dir / "cut.json").write_text('{"status": "do')
    assert read_record_or_none(run_dir / "cut.json") is None
