"""The job value the executors carry (`kdgrid.launch.job`): a `Launch` built from `Executor.run`'s arguments, each
`JobRun`'s key, checkpoint folder, pending trials and failure rows; and `run` written once for every executor."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

from kdgrid.grid import checkpoint_dir_for
from kdgrid.launch.base import Executor
from kdgrid.launch.job import JobRun, Launch
from kdgrid.launch.local import LocalExecutor
from kdgrid.launch.memory import MemoryBudget
from kdgrid.launch.ray import RayExecutor
from kdgrid.launch.slurm import SlurmExecutor
from tests.launch.fakes import make_trial, store_rows, store_studies


def test_a_launch_drops_empty_jobs_and_gives_each_job_its_own_studies(tmp_path: Path) -> None:
    a0, b0, a1 = make_trial(0), make_trial(0, k=1), make_trial(1)
    launch = Launch.of([[a0, b0], [], [a1]], tmp_path, sweep="s", studies={a0.trial_id: "x", a1.trial_id: "y"})
    assert [job.trials for job in launch.jobs] == [(a0, b0), (a1,)]
    assert launch.studies == {a0.trial_id: "x", b0.trial_id: "", a1.trial_id: "y"}
    assert launch.jobs[0].studies == {a0.trial_id: "x", b0.trial_id: ""}  # its own trials only
    assert launch.jobs[1].studies == {a1.trial_id: "y"}
    assert launch.trial_lists() == [[a0, b0], [a1]]
    assert launch.resolved().store == tmp_path.resolve() and launch.resolved().jobs[0].store == tmp_path.resolve()


def test_a_job_knows_its_key_folder_and_pending_trials(tmp_path: Path) -> None:
    a0, b0 = make_trial(0), make_trial(0, k=1)
    job = JobRun((b0, a0), tmp_path, "s", {})
    ids = ",".join(sorted([a0.trial_id, b0.trial_id]))
    assert job.key == hashlib.sha256(ids.encode()).hexdigest()[:16]
    assert job.key == JobRun((a0, b0), tmp_path, "s").key  # the order of its trials does not name it
    assert job.checkpoint_dir == checkpoint_dir_for(tmp_path, [a0])  # one folder per group
    assert job.pending({a0.trial_id}) == [b0] and job.pending(set()) == [b0, a0]
    assert pickle.loads(pickle.dumps(job)) == job  # what a job's process is handed


def test_a_job_writes_failure_rows_with_each_trials_study(tmp_path: Path) -> None:
    a0, b0 = make_trial(0), make_trial(0, k=1)
    job = JobRun((a0, b0), tmp_path, "s", {a0.trial_id: "x"})
    assert job.write_failures([b0], error_type="WorkerDied", message="killed") == [b0]
    assert store_rows(tmp_path) == [(b0.trial_id, "failed")] and store_studies(tmp_path) == {b0.trial_id: ""}
    job.write_failures(error_type="WorkerDied", message="again")
    assert sorted(store_rows(tmp_path)) == sorted([(b0.trial_id, "failed")] * 2 + [(a0.trial_id, "failed")])
    assert store_studies(tmp_path)[a0.trial_id] == "x"


def test_run_is_written_once_and_hands_its_executor_one_launch(tmp_path: Path) -> None:
    assert LocalExecutor.run is RayExecutor.run is SlurmExecutor.run is Executor.run
    handed: list[Launch] = []

    class Recording(Executor):
        def launch(self, launch: Launch) -> None:
            handed.append(launch)

        def memory_budget(self) -> MemoryBudget:
            return MemoryBudget(None, "none")

    trial = make_trial(0)
    Recording().run([[trial]], str(tmp_path), sweep="s", studies={trial.trial_id: "x"})
    assert handed == [Launch.of([[trial]], tmp_path, sweep="s", studies={trial.trial_id: "x"})]
