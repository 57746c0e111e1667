"""How a job's device is shared, as each executor words it (recorded beside the latency)."""

from __future__ import annotations

import pytest

from kdgrid.device_sharing import EXCLUSIVE, SHARING_VARIABLE, current_sharing, local_sharing, ray_sharing


def test_local_workers_count_their_mates_on_the_same_device() -> None:
    slots = ["0", "1", "0", None]
    assert local_sharing("0", slots) == "local: 2 jobs per GPU"
    assert local_sharing("1", slots) == EXCLUSIVE
    assert local_sharing(None, [None, None, None]) == "local: 3 workers on the CPU"
    assert local_sharing(None, [None]) == EXCLUSIVE


def test_ray_jobs_are_shared_by_their_gpu_fraction_or_their_number_on_the_cpus() -> None:
    assert ray_sharing(0.25, 16) == "ray: GPU fraction 0.25 per job"
    assert ray_sharing(1.0, 16) == ray_sharing(2.0, 1) == EXCLUSIVE
    assert ray_sharing(0.0, 4) == "ray: up to 4 jobs on the CPUs"
    assert ray_sharing(0.0, 1) == EXCLUSIVE


def test_a_job_told_nothing_had_its_device_to_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SHARING_VARIABLE, raising=False)
    assert current_sharing() == EXCLUSIVE
    monkeypatch.setenv(SHARING_VARIABLE, "local: 2 jobs per GPU")
    assert current_sharing() == "local: 2 jobs per GPU"
