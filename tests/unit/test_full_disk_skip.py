"""The full-disk tests' tmpfs (tests/support/fs.py): where it cannot be mounted they skip, but under
LOOPSCALE_REQUIRE_ROOT=1 (.ci/run, which runs as root) they fail, so CI cannot pass without them. A mount
that cannot succeed (a size tmpfs refuses) stands in for a machine without root."""

from __future__ import annotations

import pytest

from support.fs import small_tmpfs


@pytest.mark.system  # runs mount(8)
@pytest.mark.parametrize(("required", "outcome"), [("1", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_an_unmountable_tmpfs_skips_unless_root_is_required(tmp_path, monkeypatch, required, outcome):
    monkeypatch.setenv("LOOPSCALE_REQUIRE_ROOT", required)
    with pytest.raises(outcome, match="cannot mount a tmpfs"):
        with small_tmpfs(tmp_path / "disk", "not-a-size"):
            pass
