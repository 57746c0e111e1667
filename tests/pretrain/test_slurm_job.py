"""`kdgrid pretrain --slurm`: the job's shape and sbatch parameters from a profile, the rendezvous from the node
list, and the requeue contract (a signalled task writes its step checkpoint, hands the signal to submitit, and
the requeued task resumes to the uninterrupted result), without a cluster."""

from __future__ import annotations

import os
import pickle
import signal
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, ClassVar

import pytest
import torch
from submitit.helpers import DelayedSubmission

from kdgrid.cli import main
from kdgrid.core.pretrained import artifacts
from kdgrid.errors import ConfigError
from kdgrid.launch.slurm import SlurmSettings, submitter
from kdgrid.pretrain import slurm, step_checkpoint, train
from kdgrid.pretrain.processes import RENDEZVOUS_PORTS, slurm_rendezvous
from kdgrid.pretrain.train import RunSettings, run_pretrain
from tests.pretrain.test_preemption import _signal_during
from tests.pretrain.test_train import _recipe, _weights


def _job_parameters(settings: SlurmSettings, shape: slurm.JobShape, folder: Path) -> dict[str, Any]:
    """What `slurm.submit` submits a job of ``shape`` with: the one submitter's parameters (no job is submitted)."""
    return submitter(settings, folder, nodes=shape.nodes, tasks_per_node=shape.tasks_per_node).parameters


def test_one_task_per_gpu_across_nodes(tmp_path: Path) -> None:
    gpus = SlurmSettings(gpus=8, cpus_per_task=4, partition="gpu", time=90)
    shape = slurm.job_shape(gpus, nodes=4, tasks_per_node=None)
    assert (shape.nodes, shape.tasks_per_node, shape.world_size) == (4, 8, 32)
    params = _job_parameters(gpus, shape, tmp_path)
    assert params["nodes"] == 4 and params["ntasks_per_node"] == 8 and params["gpus_per_node"] == 8
    assert params["cpus_per_task"] == 4 and params["partition"] == "gpu" and params["time"] == 90
    assert "array_parallelism" not in params
    cpu = slurm.job_shape(SlurmSettings(), nodes=1, tasks_per_node=2)
    assert cpu.world_size == 2 and "gpus_per_node" not in _job_parameters(SlurmSettings(), cpu, tmp_path)


@pytest.mark.parametrize(
    ("gpus", "nodes", "tasks", "message"),
    [
        (8, 1, 4, "one task per GPU"),
        (None, 0, None, "--nodes must be at least 1"),
        (None, 1, 0, "--tasks-per-node must be at least 1"),
    ],
)
def test_a_job_shape_that_is_not_one_task_per_gpu_is_refused(
    gpus: int | None, nodes: int, tasks: int | None, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        slurm.job_shape(SlurmSettings(gpus=gpus), nodes=nodes, tasks_per_node=tasks)


def test_the_rendezvous_is_the_first_node_and_a_port_of_the_job() -> None:
    first = slurm_rendezvous(["gpu-03", "gpu-04"], "812345")
    assert first["MASTER_ADDR"] == "gpu-03"
    assert int(first["MASTER_PORT"]) in RENDEZVOUS_PORTS
    assert slurm_rendezvous(["gpu-03"], "812345") == first  # every task, every requeue: the same
    assert slurm_rendezvous(["gpu-03"], "812346")["MASTER_PORT"] != first["MASTER_PORT"]
    with pytest.raises(ConfigError, match="node list"):
        slurm_rendezvous([], "1")


def test_slurm_and_nproc_per_node_together_are_refused(
    corpus: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["pretrain", "--student", "w16-l2-h2-f32", "--corpus", corpus, "--slurm", "local",
              "--nproc-per-node", "2"])  # fmt: skip
    assert refused.value.code == 2 and "choose one" in capsys.readouterr().err


class _FakeJobEnvironment:
    """submitit's view of a one-task job on node ``n1``."""

    hostnames: ClassVar[list[str]] = ["n1"]
    raw_job_id = "4242"
    global_rank = 0


class _Requeued(Exception):
    """Raised by the stand-in for submitit's handler where submitit requeues the job and exits."""


def test_a_signalled_task_checkpoints_requeues_and_the_requeued_task_finishes_the_run(
    corpus: str,
    cache: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recipe = _recipe(corpus, steps=4, dropout=0.1)
    settings = RunSettings(micro_batch=4, device="cpu", progress=False, checkpoint_every=100)
    cache("whole")
    whole = run_pretrain(recipe, settings)
    cache("slurm")
    monkeypatch.setattr(slurm.submitit, "JobEnvironment", _FakeJobEnvironment)
    for name in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "SLURM_NTASKS"):
        monkeypatch.setenv(name, "")  # restored (unset) after the test: the task sets the first two
        monkeypatch.delenv(name)
    task = slurm.PretrainTask(recipe.to_dict(), settings)
    resubmitted: list[DelayedSubmission] = []
    sigterm_at_requeue: list[object] = []

    def submitit_handler(signum: int, frame: FrameType | None) -> None:
        resubmitted.append(task.checkpoint())  # what submitit's handler does before `scontrol requeue`
        sigterm_at_requeue.append(signal.getsignal(signal.SIGTERM))
        raise _Requeued

    previous = signal.signal(signal.SIGUSR2, submitit_handler)
    try:
        with monkeypatch.context() as patch:
            patch.setattr(train._Steps, "run", _signal_during(1, signal.SIGUSR2))
            with pytest.raises(_Requeued):
                task()
    finally:
        signal.signal(signal.SIGUSR2, previous)
    # SLURM's SIGTERM to every process of the requeued job must not kill submitit's `scontrol requeue` child.
    assert sigterm_at_requeue == [signal.SIG_IGN]
    assert [step for step, _ in step_checkpoint.checkpoints(artifacts.work_dir(recipe))] == [2]
    assert not artifacts.exists(recipe)
    (again,) = resubmitted
    requeued = pickle.loads(pickle.dumps(again))  # what the requeued job loads from submitit's folder
    summary = requeued.function(*requeued.args, **requeued.kwargs)
    assert summary["finished"] and summary["steps"] == 4 and summary["stopped_by"] is None
    assert os.environ["MASTER_ADDR"] == "n1"  # the rendezvous of the job's node list
    one, two = _weights(whole.path), _weights(Path(summary["path"]))
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=1e-5, atol=1e-6, msg=name)
