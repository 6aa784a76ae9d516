"""optim=muonh end to end on CPU: a CPU-grid model trains below the unigram entropy and records its lrs; a
run killed mid-way resumes to bit-identical weights and loss; two DDP processes (gloo) match one process
that trains on the same global batches, locally and as a real 2-task SLURM job (submitit)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset

from loopscale.config.schema import with_vocab
from loopscale.data.shards import prepare
from loopscale.data.windows import TokenDataModule, TrainStream, unigram_entropy_nats
from loopscale.train.entry import run_training
from loopscale.train.lightning_module import InjectedFailure, LoopedLM
from loopscale.train.plan import CHECKPOINT, plan_run, plan_training, run_dir_of
from support.procs import run_loopscale
from support.train import TINY, train_config

# TINY (30 steps of 16 x 64 tokens, d = 64) with the published optimizer at r = 2, so the injection's
# matrices are MuonH matrices too; one torch thread so runs are reproducible and fair on a shared CPU
MUONH_TINY = [a for a in TINY if not a.startswith("optim.")] + ["optim=muonh", "model.r=2", "trainer.num_threads=1"]
DDP_LOSS_TOL = 1e-4


def _cfg(tmp_path, data_dir, *extra, base=MUONH_TINY):
    return train_config([*base, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}", *extra])


@pytest.mark.slow
def test_muonh_trains_a_cpu_grid_model_below_the_unigram_entropy(tmp_path, data_dir):
    # the CPU grid's smallest width at its middle budget (222 steps of 8 x 64 tokens), published lr transfer
    cfg = train_config(
        [
            "experiment=isodepth_cpu",
            "point=C5e11-d64",
            "model.r=2",
            "optim=muonh",
            "trainer.progress=false",
            "trainer.num_threads=1",
            f"runs_dir={tmp_path}",
            f"data.data_dir={data_dir}",
        ]
    )
    record = run_training(cfg)
    prepared = prepare(cfg.data, progress=False)
    # entropy of the unigram distribution of the TRAINING tokens: the best a context-free model can do on them
    entropy = unigram_entropy_nats(prepared.tokens("train"))
    print(
        f"muonh C5e11-d64 r=2: val L = {record['L']:.4f}, train loss {record['train_loss']:.4f}, "
        f"unigram entropy {entropy:.4f}, lrs {record['lrs']}"
    )
    assert record["status"] == "done" and record["optimizer"] == "muonh"
    assert record["L"] < entropy and record["train_loss"] < entropy
    assert set(record["lrs"]) == {"matrix", "head", "embedding", "norm"} and record["ortho_dtype"] == "fp32"


def _final_state(run_dir: Path) -> tuple[dict, dict]:
    ckpt = torch.load(run_dir / CHECKPOINT, map_location="cpu", weights_only=False)
    return ckpt["state_dict"], ckpt["optimizer_states"][0]


def test_killed_muonh_run_resumes_to_bit_identical_weights_and_loss(tmp_path, data_dir):
    straight_cfg = _cfg(tmp_path / "a", data_dir)
    straight = run_training(straight_cfg)
    cfg_fail = _cfg(tmp_path / "b", data_dir, "trainer.fail_at_step=25")
    with pytest.raises(InjectedFailure):
        run_training(cfg_fail)
    resumed = run_training(_cfg(tmp_path / "b", data_dir))
    assert resumed["status"] == "done" and resumed["resumed_from_step"] == 20
    assert resumed["L"] == straight["L"] and resumed["train_loss"] == straight["train_loss"]
    assert resumed["lrs"] == straight["lrs"]
    weights_a, opt_a = _final_state(run_dir_of(straight_cfg))
    weights_b, opt_b = _final_state(run_dir_of(cfg_fail))
    assert weights_a.keys() == weights_b.keys()
    assert all(torch.equal(weights_a[k], weights_b[k]) for k in weights_a)
    # the optimizer state too: every matrix's momentum buffer and the radius c of its first step
    assert opt_a["state"].keys() == opt_b["state"].keys()
    for i, state in opt_a["state"].items():
        assert all(torch.equal(v, opt_b["state"][i][k]) for k, v in state.items())
    assert sum("norm" in s for s in opt_a["state"].values()) > 10  # MuonH matrices were checkpointed


class _GlobalBatches(IterableDataset):
    """What `world` DDP ranks draw together at each step, concatenated, as the datamodule's own per-rank
    streams give it. Once the data is world-invariant (a step's global batch split over ranks) this is exactly
    a one-process run's batch; while each rank draws its own windows, it is the union of theirs."""

    def __init__(self, prepared, seed: int, rank_batch: int, seq_len: int, world: int):
        super().__init__()
        invariant = "world_size" in inspect.signature(TrainStream).parameters
        self.streams = [
            TrainStream(prepared, seed, rank_batch, seq_len, rank=rank, **({"world_size": world} if invariant else {}))
            for rank in range(world)
        ]

    def __iter__(self):
        for parts in zip(*self.streams):
            yield torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


class _GlobalBatchData(TokenDataModule):
    world = 2

    def train_dataloader(self) -> DataLoader:
        stream = _GlobalBatches(self.prepared, self.seed, self.batch_size // self.world, self.seq_len, self.world)
        return DataLoader(stream, batch_size=None, num_workers=0)


def one_process_reference(cfg, world: int = 2) -> float:
    """Val loss of `cfg` trained in one process on the global batches `world` ranks would see (the same
    seeding order as loopscale.train.runner.train_run, so the same initial weights)."""
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    prepared = prepare(cfg.data, progress=False)
    cfg = with_vocab(cfg, prepared.vocab_size)
    plan = plan_run(cfg)
    datamodule = _GlobalBatchData(
        prepared,
        seq_len=cfg.model.seq_len,
        batch_size=cfg.budget.batch_size,
        seed=cfg.seed,
        val_tokens=cfg.data.val_tokens,
    )
    datamodule.world = world
    module = LoopedLM(cfg.model, cfg.optim, cfg.trainer, plan_training(cfg, plan))
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=plan.steps,
        max_epochs=-1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        val_check_interval=plan.steps + 1,
        check_val_every_n_epoch=None,
    )
    trainer.fit(module, datamodule=datamodule)
    return float(trainer.validate(module, datamodule=datamodule, verbose=False)[0]["val/loss"])


def _only_record(runs: Path) -> dict:
    (record_path,) = runs.glob("*/*/run.json")
    return json.loads(record_path.read_text())


@pytest.mark.system
@pytest.mark.slow
def test_ddp_on_cpu_matches_one_process_on_the_same_global_batch(tmp_path, data_dir):
    runs = tmp_path / "ddp"
    proc = run_loopscale(
        [*MUONH_TINY, f"runs_dir={runs}", f"data.data_dir={data_dir}", "trainer=ddp_cpu", "trainer.progress=false"],
        cwd=tmp_path,
        module="loopscale.train.entry",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ddp = _only_record(runs)
    reference = one_process_reference(_cfg(tmp_path / "one", data_dir))
    print(f"muonh DDP x2 L = {ddp['L']:.6f}, one process on the same global batches L = {reference:.6f}")
    assert ddp["status"] == "done" and ddp["config"]["trainer"]["devices"] == 2
    assert abs(ddp["L"] - reference) < DDP_LOSS_TOL


@pytest.mark.system
@pytest.mark.slurm
def test_ddp_as_a_two_task_slurm_job_matches_one_process(slurm_cluster, tmp_path, data_dir):
    """One training run as a real 2-task SLURM job (hydra-submitit-launcher, gloo): 2 tasks on one node
    when a node has 2 CPUs, else 1 task on each of 2 nodes (trainer.num_nodes = 2)."""
    prepare(_cfg(tmp_path, data_dir).data, progress=False)  # tokenized once here; the job only reads the cache
    if slurm_cluster.cpus >= 2:
        shape = [
            "hydra.launcher.tasks_per_node=2",
            "hydra.launcher.nodes=1",
            "trainer.devices=2",
            "trainer.num_nodes=1",
        ]
    else:
        shape = [
            "hydra.launcher.tasks_per_node=1",
            "hydra.launcher.nodes=2",
            "trainer.devices=1",
            "trainer.num_nodes=2",
        ]
    runs = tmp_path / "runs"
    args = [
        "-m",
        *MUONH_TINY,
        f"runs_dir={runs}",
        f"data.data_dir={data_dir}",
        "trainer.strategy=ddp",
        "trainer.progress=false",
        "hydra/launcher=slurm",
        "hydra.launcher.gpus_per_node=0",
        "hydra.launcher.cpus_per_task=1",
        "hydra.launcher.timeout_min=10",
        f"hydra.launcher.partition={slurm_cluster.partition}",
        *shape,
    ]
    proc = run_loopscale(args, cwd=tmp_path, timeout_s=600, module="loopscale.train.entry")
    assert proc.returncode == 0, proc.stderr[-4000:]
    ddp = _only_record(runs)
    assert ddp["status"] == "done", ddp.get("reason")
    trainer = ddp["config"]["trainer"]
    assert trainer["devices"] * trainer["num_nodes"] == 2
    reference = one_process_reference(_cfg(tmp_path / "one", data_dir))
    print(f"muonh SLURM 2-task DDP L = {ddp['L']:.6f}, one process L = {reference:.6f}")
    assert abs(ddp["L"] - reference) < DDP_LOSS_TOL
