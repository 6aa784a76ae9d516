"""Which checkpoint a relaunched run resumes from (loopscale/train/checkpoint.py, `newest_checkpoint`): the newer of
checkpoints/last.ckpt and the hpc_ckpt_<n>.ckpt Lightning saves on SLURM's SIGUSR1, so a requeued job loses
none of the steps it trained after its last save (docs/operations.md, slurm/README.md). The end-to-end requeue is
tests/system/test_slurm_hpc_resume.py (slurm, slow); this is the choice itself, on real files (blind round 3)."""

from __future__ import annotations

import os

from loopscale.train.checkpoint import newest_checkpoint, prune_hpc_checkpoints


def _write(path, mtime_s: int):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"ckpt")
    os.utime(path, (mtime_s, mtime_s))
    return path


def test_the_newer_of_last_ckpt_and_the_hpc_checkpoints_is_resumed(tmp_path):
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert newest_checkpoint(last, tmp_path) is None  # nothing yet: a fresh start
    _write(last, 1_000)
    assert newest_checkpoint(last, tmp_path) == last
    # SIGUSR1 came after the last save: the hpc checkpoint holds the later steps
    hpc1 = _write(tmp_path / "hpc_ckpt_1.ckpt", 2_000)
    hpc2 = _write(tmp_path / "hpc_ckpt_2.ckpt", 3_000)
    assert newest_checkpoint(last, tmp_path) == hpc2
    # a later last.ckpt beats them (and prunes them: they are older now)
    _write(last, 4_000)
    assert newest_checkpoint(last, tmp_path) == last
    prune_hpc_checkpoints(tmp_path)
    assert not hpc1.exists() and not hpc2.exists() and last.exists()
    # an hpc checkpoint alone (killed before the first last.ckpt) is resumed too
    last.unlink()
    hpc3 = _write(tmp_path / "hpc_ckpt_3.ckpt", 5_000)
    assert newest_checkpoint(last, tmp_path) == hpc3
