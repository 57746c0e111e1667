"""`kdgrid pretrain --slurm` on the local single-node SLURM cluster (`slurm.local_cluster`, started by the
SLURM fixture of the launch tests): one job of 2 CPU tasks on gloo, interrupted mid-way as a preemption does
(SIGTERM, then SIGUSR2), requeued, resumed, and finished with the checkpoint one process makes with the same
global batch."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from kdgrid.core.pretrained import artifacts
from kdgrid.pretrain import slurm, step_checkpoint
from kdgrid.pretrain.train import RunSettings, run_pretrain
from slurm.local_cluster import LocalCluster
from tests.launch.conftest import REPO_ROOT
from tests.pretrain.test_train import _recipe, _weights

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
STEPS = 120
CHECKPOINT_EVERY = 5


def _wait_for_a_checkpoint(work: Path, job: object, timeout_s: float = 300.0) -> None:
    began = time.monotonic()
    while not step_checkpoint.checkpoints(work):
        assert time.monotonic() - began < timeout_s, f"no step checkpoint in {timeout_s} s ({job})"
        time.sleep(0.2)


def test_a_two_task_job_is_requeued_after_a_preemption_and_equals_one_process(
    slurm_cluster: LocalCluster,
    corpus: str,
    cache: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    recipe = _recipe(corpus, steps=STEPS)
    settings = RunSettings(micro_batch=2, device="cpu", progress=False, checkpoint_every=CHECKPOINT_EVERY)
    cache("single")
    single = run_pretrain(recipe, settings)
    cache("slurm")
    job = slurm.submit(recipe, settings, "local", nodes=1, tasks_per_node=2)
    _wait_for_a_checkpoint(artifacts.work_dir(recipe), job)
    job._interrupt()  # what a preemption sends: SIGTERM, then the time-limit signal
    summary = slurm.wait(job)
    assert summary["finished"] and summary["steps"] == STEPS
    logs = "".join(path.read_text() for path in Path(job.paths.folder).glob("*_0_log.out"))
    assert "requeueing pre-training" in logs, "the job was never requeued"
    info = artifacts.read_manifest(artifacts.artifact_dir(recipe))
    assert info is not None and info["world_size"] == 2
    one, two = _weights(single.path), _weights(Path(summary["path"]))
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=1e-5, atol=1e-5, msg=name)
