"""Training on packed rows end to end (Hydra config -> run_training -> run.json): the embedded corpus via
data=shakespeare_packed, the published layout from a local folder via data=fineweb_edu_packed, a budget
larger than the set (refused before training, or allowed and recorded), exact resume, and the offline
failure of the published set when nothing is cached."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from loopscale.data.corpus import DataError
from loopscale.errors import ConfigError
from loopscale.train.entry import run_training
from loopscale.train.lightning_module import InjectedFailure
from loopscale.train.plan import CHECKPOINT, run_dir_of
from loopscale.train.run_json import read_record
from support.corpus import pack_offline, packed_text, word_corpus
from support.paths import REPO_ROOT
from support.procs import run_loopscale, run_python
from support.train import TINY, train_config

# one torch thread: on a shared 2-core machine, default threading made a tiny step 8x slower (measured)
ONE_THREAD = ["trainer.num_threads=1"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A small local text corpus (~140 train rows of 65 tokens once packed): one pass is ~9 tiny steps."""
    words = "now is the winter of our discontent made glorious summer by this sun york"
    return word_corpus(tmp_path_factory.mktemp("packed_corpus"), words, seed=0, lengths=(5, 90))


def _cfg(tmp_path, corpus, *extra):
    return train_config([*TINY, *packed_text(corpus, tmp_path / "runs"), *ONE_THREAD, *extra])


def _train_rows(cfg) -> int:
    from loopscale.data.packed_parquet import pack

    return pack(cfg.data, cfg.model.seq_len, progress=False).train.n_rows


def test_a_budget_beyond_the_set_fails_before_training_with_the_numbers(tmp_path, corpus):
    cfg = _cfg(tmp_path, corpus, "budget.tokens=2048000")
    with pytest.raises(DataError) as err:
        run_training(cfg)
    msg = str(err.value)
    assert "2,048,000 tokens = 2,000 steps x 16 rows x T = 64 = 32,000 rows" in msg, msg
    assert f"holds {_train_rows(cfg):,} train rows" in msg and "data.allow_repeat=true" in msg
    record = read_record(run_dir_of(cfg))
    assert record["status"] == "failed" and record["step"] == 0 and "32,000 rows" in record["reason"]
    assert not (run_dir_of(cfg) / CHECKPOINT).exists() and not (run_dir_of(cfg) / "metrics").exists()


def test_a_batch_that_does_not_split_fails_before_the_data_is_checked(tmp_path, corpus):
    """The run is planned on its data in one step (plan_training): a batch that does not split over the devices
    fails first, and its run.json holds the planned model and budget but no `data` (before issue 52 item 3 it also
    held what the run would have read); a budget beyond the set then fails on the split, not on the data."""
    for i, tokens in enumerate(("budget.tokens=8192", "budget.tokens=2048000")):
        cfg = _cfg(tmp_path / str(i), corpus, "budget.device_batch=5", tokens)
        with pytest.raises(ConfigError, match="do not divide"):
            run_training(cfg)
        record = json.loads((run_dir_of(cfg) / "run.json").read_text())
        assert record["status"] == "failed" and "do not divide" in record["reason"] and record["steps"] > 0
        assert "data" not in record and "device_batch" not in record and "memory_predicted" not in record


def test_allow_repeat_trains_past_the_end_and_is_recorded(tmp_path, corpus):
    n_rows = _train_rows(_cfg(tmp_path, corpus))
    steps = n_rows // 16 + 4  # just past one pass
    cfg = _cfg(tmp_path, corpus, f"budget.tokens={steps * 16 * 64}", "data.allow_repeat=true")
    record = run_training(cfg)
    assert record["status"] == "done" and math.isfinite(record["L"])
    assert record["data"]["allow_repeat"] is True and record["config"]["data"]["allow_repeat"] is True
    assert record["data"]["train_rows"] == n_rows and record["data"]["rows_needed"] == steps * 16
    assert record["data"]["epochs"] > 1


def test_packed_run_resumes_to_the_same_loss(tmp_path, corpus):
    short = ["budget.tokens=8192", "trainer.ckpt_every_steps=5"]  # 8 steps of 16 rows, within one pass
    straight = run_training(_cfg(tmp_path / "a", corpus, *short))
    assert straight["data"]["format"] == "packed" and straight["data"]["epochs"] < 1
    assert straight["data"]["val_rows"] == 16
    cfg_fail = _cfg(tmp_path / "b", corpus, *short, "trainer.fail_at_step=7")
    with pytest.raises(InjectedFailure):
        run_training(cfg_fail)
    resumed = run_training(_cfg(tmp_path / "b", corpus, *short))
    assert resumed["status"] == "done" and resumed["resumed_from_step"] == 5
    assert abs(resumed["L"] - straight["L"]) < 1e-5, (resumed["L"], straight["L"])


def _published_copy(corpus, folder):
    """The corpus packed by `loopscale data pack`, copied into `folder` the way the hub lays it out:
    parquet files under data/, no meta.json."""
    root, _ = pack_offline(
        corpus / "cache",
        64,
        "--source",
        "text",
        "--path",
        str(corpus / "docs.jsonl"),
        "--vocab-size",
        "512",
        "--num-proc",
        "1",
        "--val-fraction",
        "0.2",
    )
    published = folder / "data"
    published.mkdir(parents=True)
    for f in root.glob("*.parquet"):
        shutil.copy(f, published / f.name)
    return published


def test_published_layout_from_a_local_folder_trains(tmp_path, corpus):
    published = _published_copy(corpus, tmp_path / "published")
    cfg = train_config(
        [
            *TINY,
            "data=fineweb_edu_packed",
            f"data.path={published.parent}",
            "data.vocab_size=512",
            "data.val_rows=8",
            "budget.tokens=8192",
            f"runs_dir={tmp_path / 'runs'}",
            *ONE_THREAD,
        ]
    )
    record = run_training(cfg)
    assert record["status"] == "done" and math.isfinite(record["L"]) and record["step"] == 8
    assert record["vocab_size"] == 512 and record["data"]["val_rows"] == 8
    assert record["data"]["set"] == str(published.parent.resolve())


# What would make the failure slow, counted: the hub libraries imported (~1 s) and connections opened (each
# may wait on the network). The wall time is printed, never asserted.
_LOCATE = """
import json, socket, sys, time
connections = []
real_connect = socket.create_connection
def counted(address, *args, **kwargs):
    connections.append(list(address))
    return real_connect(address, *args, **kwargs)
socket.create_connection = counted
from loopscale.config.dirs import train_config
cfg = train_config(['data=fineweb_edu_packed', 'model=paper'])
from loopscale.data.run_data import open_run_data
before = sorted(m for m in ('datasets', 'huggingface_hub') if m in sys.modules)
start = time.perf_counter()
try:
    open_run_data(cfg.data, cfg.model.seq_len, progress=False)
    out = {'error': None}
except ValueError as err:
    out = {'error': str(err)}
out['seconds'] = time.perf_counter() - start
out['hub_libraries'] = sorted(m for m in ('datasets', 'huggingface_hub') if m in sys.modules and m not in before)
out['connections'] = connections
print(json.dumps(out))
"""


HF_VARIABLES = ("HF_",)  # dropped from a child's environment, so only what _no_cache_env sets is seen


def _no_cache_env(tmp_path, offline: bool) -> dict:
    """An empty Hugging Face cache, and the hub cut off when `offline` (pass drop_env=HF_VARIABLES too)."""
    return {"HF_HOME": str(tmp_path / "empty-hf-home"), **({"HF_HUB_OFFLINE": "1"} if offline else {})}


@pytest.mark.system
@pytest.mark.parametrize("offline", [True, False])
def test_published_set_without_cache_fails_at_once_in_one_line(tmp_path, offline):
    from loopscale.data.published import hub_reachable

    if not offline and hub_reachable():
        pytest.skip("the hub is reachable here: without the offline flag the set would be downloaded")
    proc = run_python(
        ["-c", _LOCATE], cwd=REPO_ROOT, env=_no_cache_env(tmp_path, offline), drop_env=HF_VARIABLES, timeout_s=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"offline={offline}: failed after {out['seconds'] * 1e3:.1f} ms")
    # at once: neither hub library imported, and no connection but (online) the one reachability probe
    assert out["hub_libraries"] == [], out
    assert out["connections"] == ([] if offline else [["huggingface.co", 443]]), out
    msg = out["error"]
    assert msg and "\n" not in msg
    assert "KristianS7/prepacked-fineweb-edu-llama2-32K-T2048" in msg and "hf download" in msg
    assert "data.path=" in msg
    assert ("HF_HUB_OFFLINE" in msg) if offline else ("unreachable" in msg)


@pytest.mark.system
def test_published_set_without_cache_fails_from_the_command_line(tmp_path):
    proc = run_loopscale(
        ["data=fineweb_edu_packed", "model=tiny", f"runs_dir={tmp_path / 'runs'}"],
        cwd=tmp_path,
        env=_no_cache_env(tmp_path, offline=True),
        drop_env=HF_VARIABLES,
        module="loopscale.train.entry",
    )
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if "prepacked-fineweb-edu-llama2-32K-T2048" in ln]
    assert lines and "hf download" in lines[0], proc.stderr[-2000:]


@pytest.mark.system
@pytest.mark.slow
def test_published_set_from_the_hugging_face_cache_trains_offline(tmp_path, corpus):
    # a cache entry exactly as huggingface_hub writes one: refs/main -> snapshots/<commit>/...
    repo = tmp_path / "hf-home" / "hub" / "datasets--KristianS7--prepacked-fineweb-edu-llama2-32K-T2048"
    commit = "0" * 40
    _published_copy(corpus, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    env = {**_no_cache_env(tmp_path, offline=True), "HF_HOME": str(tmp_path / "hf-home")}
    runs = tmp_path / "runs"
    proc = run_loopscale(
        [
            *TINY,
            *ONE_THREAD,
            "data=fineweb_edu_packed",
            "data.vocab_size=512",
            "data.val_rows=8",
            "budget.tokens=4096",
            f"runs_dir={runs}",
        ],
        cwd=tmp_path,
        env=env,
        drop_env=HF_VARIABLES,
        module="loopscale.train.entry",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record_path,) = runs.glob("*/*/run.json")
    record = json.loads(record_path.read_text())
    assert record["status"] == "done" and record["step"] == 4
    assert record["data"]["set"] == str((repo / "snapshots" / commit).resolve())


def test_final_loss_is_the_mean_over_exactly_the_val_rows(tmp_path, corpus):
    import torch
    import torch.nn.functional as F

    from loopscale.config.schema import with_vocab
    from loopscale.data.packed_batches import IGNORE_INDEX, rows_to_batch
    from loopscale.data.packed_parquet import pack
    from loopscale.model.transformer import LoopedTransformer

    cfg = _cfg(tmp_path, corpus, "budget.tokens=4096", "data.val_rows=29")  # batches of 16 and 13 rows
    record = run_training(cfg)
    packed = pack(cfg.data, cfg.model.seq_len, progress=False)
    model = LoopedTransformer(with_vocab(cfg, packed.vocab_size).model)
    state = torch.load(run_dir_of(cfg) / CHECKPOINT, weights_only=False)["state_dict"]
    model.load_state_dict({k.removeprefix("model."): v for k, v in state.items()})
    model.eval()
    x, y = rows_to_batch(*packed.val.read(0, 29))
    assert (y == IGNORE_INDEX).any()  # this corpus pads some val rows: the weighting matters
    with torch.no_grad():
        nll = [F.cross_entropy(model(x[i : i + 1], None).float()[0], y[i], reduction="sum") for i in range(29)]
    n_targets = (y != IGNORE_INDEX).sum(dim=1)
    mean = float(sum(nll) / n_targets.sum())  # per target token over the 29 rows
    batch_means = [float(sum(nll[lo:hi]) / n_targets[lo:hi].sum()) for lo, hi in ((0, 16), (16, 29))]
    per_row_weights = (16 * batch_means[0] + 13 * batch_means[1]) / 29  # batches weighted by rows: wrong
    assert abs(record["L"] - mean) < 1e-6 < abs(per_row_weights - mean), (record["L"], mean, per_row_weights)


@pytest.mark.system
@pytest.mark.slow
def test_ddp_with_accumulation_trains_one_whole_pass(tmp_path, corpus):
    # the whole pipeline on 2 gloo processes x grad_accum 2: the set is used to its last whole batch
    n_rows = _train_rows(_cfg(tmp_path, corpus))
    steps = n_rows // 16
    runs = tmp_path / "runs"
    proc = run_loopscale(
        [
            *TINY,
            *packed_text(corpus, runs),
            "trainer=ddp_cpu",
            "budget.grad_accum=2",
            f"budget.tokens={steps * 16 * 64}",
            "trainer.progress=false",
        ],
        cwd=tmp_path,
        module="loopscale.train.entry",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record_path,) = runs.glob("*/*/run.json")
    record = json.loads(record_path.read_text())
    assert record["status"] == "done" and record["step"] == steps and math.isfinite(record["L"])
    assert record["data"]["rows_needed"] == steps * 16 > n_rows - 16
