"""`loopscale plan` reads how busy the machine is now (loopscale/launch/wall_time.py, `busy_cpus`): processes
spinning on every CPU are seen as every CPU busy, and the load it plans with is never above the 1-minute average."""

import os
import subprocess
import sys
import time

from loopscale.launch.wall_time import busy_cpus, others_load


def test_spinning_processes_are_seen_busy_and_the_planned_load_is_at_most_the_average():
    cpus = os.cpu_count() or 1
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cpus)]
    try:
        time.sleep(0.5)
        busy = busy_cpus(1.0)
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()
    assert busy is not None and 0.75 * cpus <= busy <= cpus + 1e-6, busy
    before = os.getloadavg()[0]
    load = others_load(0.2)
    assert 0.0 <= load <= max(before, os.getloadavg()[0]) + 1e-9
