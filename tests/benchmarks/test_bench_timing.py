"""The benchmarks' timing helpers: wall and CPU seconds of the same intervals, and the fixed-width batch check."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _common import fixed_batches_served, require_fixed_batches
from grid_throughput import Clock


def test_clock_separates_waiting_from_computing() -> None:
    clock = Clock()
    clock.start()
    time.sleep(0.2)  # waiting: wall time passes, this process uses (almost) no CPU
    clock.stop()
    clock.start()
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:  # computing: at least 0.05 CPU seconds
        pass
    clock.stop()
    assert len(clock.wall) == len(clock.cpu) == 2
    assert clock.wall[0] >= 0.2 and clock.cpu[0] < 0.1
    assert clock.cpu[1] >= 0.05 and clock.wall[1] >= clock.cpu[1] * 0.9  # one thread: CPU <= wall (rounding)


def test_clock_laps_time_the_gaps_between_calls() -> None:
    clock = Clock()
    clock.lap()  # the first call opens the first interval and closes none (run_job's step 1: not timed)
    assert clock.wall == [] and clock.cpu == []
    for _ in range(3):
        time.sleep(0.01)
        clock.lap()
    assert len(clock.wall) == 3 and all(gap >= 0.01 for gap in clock.wall)


def test_stop_before_start_is_refused() -> None:
    with pytest.raises(AssertionError, match="before"):
        Clock().stop()


def test_no_fixed_width_batch_since_a_count_is_refused() -> None:
    served = fixed_batches_served()
    with pytest.raises(RuntimeError, match="fix_batch_width"):
        require_fixed_batches(since=served)
