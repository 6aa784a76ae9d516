"""`loopscale params | head -1`: a reader that leaves early. A shell's writer dies of SIGPIPE quietly; the
`loopscale` command must end as quietly (exit 141 = 128 + SIGPIPE, nothing on stderr), not in a
BrokenPipeError traceback nor Python's "Exception ignored ... BrokenPipeError" at interpreter exit."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

PARAMS = [sys.executable, "-m", "loopscale", "params", "--preset", "paper", "--size", "6", "--r", "2"]


def test_reader_closed_before_the_first_write_ends_quietly(tmp_path):
    """The reader closes its end before `loopscale` writes a byte (it is still importing): every write fails
    with EPIPE, deterministically, as when `head` has long exited."""
    read_fd, write_fd = os.pipe()
    os.close(read_fd)  # the reader is gone before the writer starts
    try:
        proc = subprocess.run(PARAMS, stdout=write_fd, stderr=subprocess.PIPE, text=True, cwd=tmp_path, timeout=300)
    finally:
        os.close(write_fd)
    assert proc.stderr == "" and proc.returncode == 141, proc.stderr[-3000:]


def test_head_pipeline_in_a_shell(tmp_path):
    """The pipeline as a user types it: `head -1` gets the first line, the shell's stderr stays empty. Whether
    `loopscale` wrote everything before `head` left (exit 0) or not (141) depends on timing; both are quiet."""
    command = f"cd {shlex.quote(str(tmp_path))} && {shlex.join(PARAMS)} | head -1; echo ${{PIPESTATUS[0]}} >&2"
    proc = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.stdout == "{\n"
    assert proc.stderr.strip() in {"0", "141"}, proc.stderr[-3000:]
