"""A stop that lands inside Hydra's or omegaconf's own code is reported as the stop (loopscale/train/entry.py):
omegaconf's flag_override restores its flags in a `finally`, and a SIGTERM raised while it composes the sweep
left that clean-up failing with an AttributeError whose context is the stop (exit 1 with Hydra's traceback)."""

import os

import pytest

from loopscale.signals import Terminated
from loopscale.train import entry


@pytest.mark.parametrize("stop", [Terminated(), KeyboardInterrupt()], ids=["sigterm", "ctrl-c"])
def test_the_stop_behind_a_failed_clean_up_is_what_comes_out(stop):
    with pytest.raises(type(stop)) as raised:
        with entry._disk_errors_in_one_line():
            try:
                raise stop
            finally:
                raise AttributeError("'NoneType' object has no attribute 'flags'")  # the clean-up's own failure
    assert raised.value is stop
    assert "HYDRA_FULL_ERROR" not in os.environ


def test_the_same_error_without_a_stop_is_hydras_report_and_exit_1(capsys):
    with pytest.raises(SystemExit) as raised:
        with entry._disk_errors_in_one_line():
            raise AttributeError("'NoneType' object has no attribute 'flags'")
    assert type(raised.value) is SystemExit and raised.value.code == 1
    assert "AttributeError" in capsys.readouterr().err
