"""The local executor's GPUs: worker processes spread round robin over a declared device list, each told its GPU
through ``CUDA_VISIBLE_DEVICES`` before it starts; checked on the CPU with a job function that records it."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from kdgrid.device_sharing import SHARING_VARIABLE
from kdgrid.errors import ConfigError
from kdgrid.launch import memory
from kdgrid.launch.local import LocalExecutor, gpu_slots
from kdgrid.trial import Trial


def record_gpu_job(
    trials: list[Trial],
    store_dir: Path,
    *,
    sweep: str,
    studies: Mapping[str, str] | None = None,
    checkpoint_dir: Path | None = None,
) -> None:
    """A job function (importable by reference from a worker process) that writes, into the folder named by
    its trials' option ``gpu_log``, one line: the ``CUDA_VISIBLE_DEVICES`` it was given, its start and end time."""
    started = time.time()
    time.sleep(float(trials[0].option("seconds", 0.3)))
    log = Path(str(trials[0].option("gpu_log"))) / f"{trials[0].trial_id}.txt"
    log.write_text(f"{os.environ.get('CUDA_VISIBLE_DEVICES', '-')} {started} {time.time()}\n")


def jobs(log: Path, count: int) -> list[list[Trial]]:
    return [[Trial(task="rte", teacher="bert-base", student="bert-tiny", seed=i, options={"gpu_log": str(log)})]
            for i in range(count)]  # fmt: skip


def records(log: Path) -> list[tuple[str, float, float]]:
    out = []
    for path in log.glob("*.txt"):
        gpu, start, end = path.read_text().split()
        out.append((gpu, float(start), float(end)))
    return sorted(out, key=lambda r: r[1])


def most_jobs_at_once_per_gpu(rows: list[tuple[str, float, float]]) -> dict[str, int]:
    most: dict[str, int] = {}
    for gpu, start, _ in rows:
        at_once = sum(1 for g, s, e in rows if g == gpu and s <= start < e)
        most[gpu] = max(most.get(gpu, 0), at_once)
    return most


def test_worker_slots_take_the_gpus_round_robin() -> None:
    assert gpu_slots(3, ["0", "1", "2"], None) == ["0", "1", "2"]
    assert gpu_slots(5, ["0", "1"], None) == ["0", "1", "0", "1", "0"]
    assert gpu_slots(2, ["GPU-aaaa", "3"], 1) == ["GPU-aaaa", "3"]
    assert gpu_slots(2, [], None) == [None, None]
    with pytest.raises(ConfigError, match="local_workers=5 do not fit local_jobs_per_gpu=2 on 2 GPU"):
        gpu_slots(5, ["0", "1"], 2)


def test_each_worker_process_is_given_its_own_gpu(tmp_path: Path) -> None:
    # fork: quick to start here; the spawn default is covered below
    executor = LocalExecutor(
        job_fn=record_gpu_job, workers=3, gpus="0,1,2", progress=False, poll_s=0.05, start_method="fork"
    )
    assert executor.worker_gpus() == ["0", "1", "2"]
    executor.run(jobs(tmp_path, 6), tmp_path / "store", sweep="s")
    rows = records(tmp_path)
    assert len(rows) == 6
    assert {gpu for gpu, _, _ in rows[:3]} == {"0", "1", "2"}  # the first three start on three GPUs
    assert {gpu for gpu, _, _ in rows} == {"0", "1", "2"}
    assert set(most_jobs_at_once_per_gpu(rows).values()) == {1}  # never two jobs on one GPU


def test_jobs_per_gpu_share_each_gpu(tmp_path: Path) -> None:
    executor = LocalExecutor(
        job_fn=record_gpu_job,
        gpus="4,7",
        jobs_per_gpu=2,
        progress=False,
        poll_s=0.05,
        start_method="forkserver",
    )
    assert executor.workers() == 4 and executor.worker_gpus() == ["4", "7", "4", "7"]
    executor.run(jobs(tmp_path, 4), tmp_path / "store", sweep="s")
    rows = records(tmp_path)
    assert sorted(gpu for gpu, _, _ in rows) == ["4", "4", "7", "7"]
    assert max(most_jobs_at_once_per_gpu(rows).values()) <= 2


def test_the_parent_environment_is_left_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setattr(memory, "gpu_memory_gb", lambda: [16.0, 16.0])
    executor = LocalExecutor(job_fn=record_gpu_job, workers=2, progress=False, poll_s=0.05)  # spawn
    assert executor.worker_gpus() == ["0", "1"]  # the visible GPUs, by default
    executor.run(jobs(tmp_path, 2), tmp_path / "store", sweep="s")
    assert sorted(gpu for gpu, _, _ in records(tmp_path)) == ["0", "1"]
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_jobs_in_this_process_keep_the_default_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    LocalExecutor(job_fn=record_gpu_job, gpus="0,1", progress=False).run(
        jobs(tmp_path, 1), tmp_path / "s", sweep="s"
    )
    assert [gpu for gpu, _, _ in records(tmp_path)] == ["-"]


def test_bad_gpu_settings_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "gpu_memory_gb", lambda: [])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(ConfigError, match="local_jobs_per_gpu is set but this machine has no GPU"):
        LocalExecutor(jobs_per_gpu=2, progress=False)
    with pytest.raises(ConfigError, match="local_gpus: expected GPU names"):
        LocalExecutor(gpus=" , ", progress=False)
    with pytest.raises(ConfigError, match="do not fit"):
        LocalExecutor(workers=3, gpus="0", jobs_per_gpu=2, progress=False)
    with pytest.raises(ConfigError, match="local_jobs_per_gpu: expected a whole number >= 1"):
        LocalExecutor(jobs_per_gpu=0, progress=False)


def record_environment_job(
    trials: list[Trial],
    store_dir: Path,
    *,
    sweep: str,
    studies: Mapping[str, str] | None = None,
    checkpoint_dir: Path | None = None,
) -> None:
    """A job function that writes, into the folder named by its trials' option ``gpu_log``, what its process was
    told: its GPU, the CUDA device order, and how its device is shared."""
    names = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", SHARING_VARIABLE)
    log = Path(str(trials[0].option("gpu_log"))) / f"{trials[0].trial_id}.json"
    log.write_text(json.dumps({name: os.environ.get(name) for name in names}))


def environments(log: Path) -> list[dict[str, str | None]]:
    return [json.loads(path.read_text()) for path in sorted(log.glob("*.json"))]


@pytest.mark.parametrize(
    ("settings", "sharing", "order"),
    [
        ({"gpus": "4,7", "jobs_per_gpu": 2}, "local: 2 jobs per GPU", "PCI_BUS_ID"),
        ({"gpus": "0,1", "workers": 3}, None, "PCI_BUS_ID"),  # two on GPU 0, one on GPU 1
        ({"gpus": "0,1", "workers": 2}, "exclusive", "PCI_BUS_ID"),
        ({"workers": 2}, "local: 2 workers on the CPU", None),
    ],
)
def test_each_worker_is_told_how_its_device_is_shared_and_the_pci_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: dict, sharing: str | None, order: str | None
) -> None:
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    monkeypatch.delenv(SHARING_VARIABLE, raising=False)
    monkeypatch.setattr(memory, "gpu_memory_gb", lambda: [])
    executor = LocalExecutor(
        job_fn=record_environment_job, progress=False, poll_s=0.05, start_method="fork", **settings
    )
    slots = executor.worker_gpus()
    executor.run(jobs(tmp_path, len(slots)), tmp_path / "store", sweep="s")
    seen = environments(tmp_path)
    assert len(seen) == len(slots) and all(env["CUDA_DEVICE_ORDER"] == order for env in seen)
    if sharing is not None:
        assert {env[SHARING_VARIABLE] for env in seen} == {sharing}
    else:
        by_gpu = {env["CUDA_VISIBLE_DEVICES"]: env[SHARING_VARIABLE] for env in seen}
        assert by_gpu == {"0": "local: 2 jobs per GPU", "1": "exclusive"}
    assert "CUDA_DEVICE_ORDER" not in os.environ  # the parent's own environment is left as it was
