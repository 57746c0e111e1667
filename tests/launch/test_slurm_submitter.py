"""One SLURM submitter for trials and pre-training (`kdgrid.launch.slurm.submitter`, `submit_one`): the same
profile translation, with a job's nodes and tasks for a pre-training run, and one refusal message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kdgrid.errors import LaunchError
from kdgrid.launch.environment import job_variables
from kdgrid.launch.slurm import SlurmSettings, submit_one, submitit_parameters, submitter
from kdgrid.pretrain import slurm as pretrain_slurm

SETTINGS = SlurmSettings(partition="gpu", time=30, cpus_per_task=4, gpus=2, mem_gb=16.0, array_parallelism=8)


def test_a_pre_training_job_is_the_trials_translation_with_its_shape_and_no_array(tmp_path: Path) -> None:
    trials = submitit_parameters(SETTINGS, {})
    job = submitit_parameters(SETTINGS, {}, nodes=3, tasks_per_node=2)
    assert trials["array_parallelism"] == 8 and "nodes" not in trials
    assert job == {**{k: v for k, v in trials.items() if k != "array_parallelism"}, "nodes": 3, "ntasks_per_node": 2}
    shape = pretrain_slurm.job_shape(SETTINGS, nodes=3, tasks_per_node=None)  # one task per GPU of the profile
    submitted = submitter(SETTINGS, tmp_path, nodes=shape.nodes, tasks_per_node=shape.tasks_per_node)  # as `submit`
    assert submitted.parameters == submitit_parameters(SETTINGS, job_variables(), nodes=3, tasks_per_node=2)


def test_the_submitter_carries_the_profile_and_the_requeue_limit(tmp_path: Path) -> None:
    executor = submitter(SlurmSettings(partition="gpu", max_num_timeout=7), tmp_path / "%j", nodes=2)
    assert executor.max_num_timeout == 7
    assert executor.parameters["partition"] == "gpu" and executor.parameters["nodes"] == 2
    assert executor.parameters["ntasks_per_node"] == 1


def test_a_refused_submission_names_what_was_refused() -> None:
    class Refusing:
        def submit(self, task: Any) -> Any:
            raise RuntimeError("sbatch: error: Invalid account\n")

    with pytest.raises(LaunchError, match=r"^sbatch refused the pre-training job: sbatch: error: Invalid account$"):
        submit_one(Refusing(), object(), what="the pre-training job")  # type: ignore[arg-type]
