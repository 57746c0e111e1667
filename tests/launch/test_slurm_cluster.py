"""The SLURM executor against a real single-node cluster (slurmctld + slurmd + slurmdbd, see conftest.py).

Jobs are real SLURM array tasks running the real worker and store; only the training is faked
(`tests.launch.fakes`), so each task takes seconds. Fault tests: a trial that raises, a task killed with
SIGKILL, a task cancelled with scancel, a requeue at a time limit. After each, the store must tell the truth and
a resume must complete exactly the missing trials: one done row per trial, no duplicates.
"""

from __future__ import annotations

import collections
import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kdgrid.errors import ConfigError, LaunchError
from kdgrid.grid import load_sweep
from kdgrid.launch.environment import OFFLINE_ENVIRONMENT, environment
from kdgrid.launch.job import Launch
from kdgrid.launch.slurm import SlurmExecutor, cluster_max_array_size, cluster_partitions
from kdgrid.store import read_store
from kdgrid.trial import Trial
from slurm.local_cluster import PARTITION, LocalCluster
from tests.commands.test_sweep_commands import as_json
from tests.launch import fakes
from tests.launch.fakes import (
    KDGRID_WITH_FAKES,
    log_events,
    make_trial,
    pending_jobs,
    store_rows,
    store_studies,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]


def executor(**settings: object) -> SlurmExecutor:
    return SlurmExecutor("local", job_fn=fakes.job_to_store, poll_interval_s=1.0, **settings)  # type: ignore[arg-type]


def done_once_each(store: Path, trials: list[Trial]) -> None:
    """Every trial has exactly one done row, and the store has no done row of anything else."""
    done = collections.Counter(trial_id for trial_id, status in store_rows(store) if status == "done")
    assert done == collections.Counter(t.trial_id for t in trials)


def queued_job_ids() -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def squeue_count() -> int:
    return len(queued_job_ids())


def test_the_local_cluster_reports_its_partition_and_array_limit(slurm_cluster: LocalCluster) -> None:
    assert slurm_cluster.is_running()
    assert PARTITION in cluster_partitions()
    assert cluster_max_array_size() == slurm_cluster.max_array_size == 1001


def test_a_profile_naming_a_missing_partition_is_refused_before_submission(
    slurm_cluster: LocalCluster, tmp_path: Path
) -> None:
    before = queued_job_ids()
    with pytest.raises(ConfigError, match=r"'gpu-a100' is not a partition.*local"):
        executor(slurm_partition="gpu-a100").run([[make_trial(0)]], tmp_path, sweep="s")
    assert not queued_job_ids() - before  # nothing submitted (a job queued before may end meanwhile)
    assert not (tmp_path / "_slurm").exists()


def test_jobs_run_as_split_arrays_and_a_raising_trial_is_failed_while_its_mates_finish(
    slurm_cluster: LocalCluster, tmp_path: Path
) -> None:
    flag = tmp_path / "raised-once"
    jobs = [[make_trial(seed), make_trial(seed, k=1)] for seed in range(5)]
    jobs[1].append(make_trial(1, test_raise_once=str(flag)))
    run = executor(slurm_jobs_per_task=2, slurm_max_array_size=2)
    submission = run.submit(Launch.of(jobs, tmp_path, sweep="split"))
    assert submission is not None
    # 5 jobs, 2 per task -> 3 tasks; at most 2 per array -> 2 arrays.
    assert len(submission.tasks) == 3
    assert len({job_id.split("_")[0] for job_id in submission.job_ids}) == 2
    run.wait_for(submission)  # a failed trial is a row, not a failed task

    rows = store_rows(tmp_path)
    raising = jobs[1][-1]
    assert (raising.trial_id, "failed") in rows
    done_once_each(tmp_path, [t for job in jobs for t in job if t is not raising])

    # Resume: exactly the failed trial runs again, and now finishes.
    remaining = pending_jobs(jobs, tmp_path)
    assert remaining == [[raising]]
    executor().run(remaining, tmp_path, sweep="split")
    done_once_each(tmp_path, [t for job in jobs for t in job])


def test_a_task_killed_with_sigkill_records_its_lost_trials_and_resume_runs_exactly_those(
    slurm_cluster: LocalCluster, tmp_path: Path
) -> None:
    log, sentinel = tmp_path / "log.txt", tmp_path / "killed-once"
    first = make_trial(0, test_log=str(log))
    victim = make_trial(0, k=1, test_log=str(log), test_kill_once=str(sentinel))
    last = make_trial(0, k=2, test_log=str(log))
    other = make_trial(1, test_log=str(log))
    jobs = [[first, victim, last], [other]]
    studies = {
        first.trial_id: "a",
        victim.trial_id: "b",
        last.trial_id: "a",
        other.trial_id: "b",
    }  # mixed jobs
    with pytest.raises(LaunchError, match=r"1 of 2 SLURM array task\(s\) did not finish.*FAILED"):
        executor().run(jobs, tmp_path, sweep="kill", studies=studies)

    rows = store_rows(tmp_path)
    assert sorted(rows) == sorted(
        [
            (first.trial_id, "done"),
            (other.trial_id, "done"),
            (victim.trial_id, "failed"),
            (last.trial_id, "failed"),
        ]
    )
    lost = read_store(tmp_path).set_index("trial_id").loc[victim.trial_id]
    assert lost["error_type"] == "JobLost" and "FAILED" in lost["error_message"]
    # rows written by the task and the failed rows written for it alike record each trial's own study
    assert store_studies(tmp_path) == studies

    remaining = pending_jobs(jobs, tmp_path)
    assert remaining == [[victim, last]]
    executor().run(remaining, tmp_path, sweep="kill", studies=studies)
    done_once_each(tmp_path, [first, victim, last, other])
    started = collections.Counter(trial_id for event, trial_id, _, _ in log_events(log) if event == "start")
    assert started == {first.trial_id: 1, other.trial_id: 1, victim.trial_id: 2, last.trial_id: 1}


def test_a_task_cancelled_with_scancel_is_reported_and_resume_completes_it(
    slurm_cluster: LocalCluster, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    quick = make_trial(0, test_log=str(log))
    slow = make_trial(0, k=1, test_log=str(log), test_seconds=6.0, test_epochs=3)
    jobs = [[quick, slow]]
    run = SlurmExecutor("local", job_fn=fakes.job_to_store, poll_interval_s=1.0, wait=False)
    submission = run.submit(Launch.of(jobs, tmp_path, sweep="cancel"))
    assert submission is not None
    deadline = time.monotonic() + 90
    while (quick.trial_id, "done") not in store_rows(tmp_path):  # cancel while `slow` is running
        assert time.monotonic() < deadline, "the task never wrote its first row"
        time.sleep(0.5)
    subprocess.run(["scancel", submission.job_ids[0]], check=True)
    with pytest.raises(LaunchError, match="CANCELLED"):
        run.wait_for(submission)
    assert sorted(store_rows(tmp_path)) == sorted([(quick.trial_id, "done"), (slow.trial_id, "failed")])

    remaining = pending_jobs(jobs, tmp_path)
    assert remaining == [[slow]]
    executor().run(remaining, tmp_path, sweep="cancel")
    done_once_each(tmp_path, [quick, slow])


def test_a_task_at_its_time_limit_is_requeued_and_continues_from_its_checkpoint(
    slurm_cluster: LocalCluster, tmp_path: Path
) -> None:
    """2-minute limit, signal 60 s before it: the task checkpoints, is requeued, and finishes the epochs left.
    (A 30 s window was too short: the signal could come while submitit was still unpickling the job, before its
    handler was installed, and killed the task.)"""
    log = tmp_path / "log.txt"
    long_trial = make_trial(0, test_log=str(log), test_seconds=100.0, test_epochs=10)
    run = executor(slurm_time=2, slurm_signal_delay_s=60, slurm_max_num_timeout=4)
    run.run([[long_trial]], tmp_path, sweep="requeue")

    done_once_each(tmp_path, [long_trial])
    attempts = [pid for event, _, pid, _ in log_events(log) if event == "start"]
    assert len(attempts) >= 2, "the task was never requeued"
    row = read_store(tmp_path).iloc[0]
    assert '"resumed_from_epoch": 0' not in row["extra_json"], "the requeued task started over"


def test_a_real_core_job_runs_as_an_array_task_and_writes_its_rows(
    slurm_cluster: LocalCluster, tmp_path: Path, real_job: list[Trial]
) -> None:
    """No fake: the default job function (run_job_to_store -> the core's run_job) in a SLURM task."""
    SlurmExecutor("local", poll_interval_s=1.0).run([real_job], tmp_path, sweep="real")
    done_once_each(tmp_path, real_job)
    rows = read_store(tmp_path)
    assert set(rows["status"]) == {"done"}
    accuracy = [column for column in rows.columns if "accuracy" in column]
    assert accuracy and rows[accuracy[0]].between(0, 1).all()


def test_a_request_the_cluster_cannot_satisfy_is_refused_with_sbatchs_reason(
    slurm_cluster: LocalCluster, tmp_path: Path
) -> None:
    with pytest.raises(LaunchError, match=r"sbatch refused.*Memory specification"):
        executor(slurm_mem_gb=100_000).run([[make_trial(0)]], tmp_path, sweep="mem")
    assert store_rows(tmp_path) == []


def test_a_resume_while_the_killed_drivers_array_still_runs_trains_every_trial_once(
    slurm_cluster: LocalCluster, tmp_path: Path
) -> None:
    """Submit, SIGKILL the waiting driver, `kdgrid resume -e slurm` while the first array still runs: the trials
    its tasks hold are running (claimed), so they are not re-submitted; the ones queued in both arrays are
    trained by whichever task claims them first; every trial ends with exactly one done row and no JobLost."""
    log, store = tmp_path / "log.txt", tmp_path / "store"
    options = {"test_log": str(log), "test_seconds": 30.0, "test_epochs": 3}  # outlives a resume's start-up
    spec = {"name": "claims-slurm", "fixed": {"teacher": "bert-base", "student": "bert-tiny", "task": "rte",
            "options": options}, "studies": {"grid": {"axes": {"seed": list(range(6))}}}}  # fmt: skip
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(json.dumps(spec))
    trials = [planned.trial for planned in load_sweep(sweep).trials]
    args = [*KDGRID_WITH_FAKES, "--store", str(store), "-e", "slurm", "--profile", "local",
            "--set", "job_fn=tests.launch.fakes:job_to_store", "--set", "poll_interval_s=1", "--no-preflight",
            "--max-group-size", "1"]  # fmt: skip

    def kdgrid(command: str) -> subprocess.Popen[str]:
        cli = len(KDGRID_WITH_FAKES)
        return subprocess.Popen([*args[:cli], command, str(sweep), *args[cli:]], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=os.environ.copy())  # fmt: skip

    driver = kdgrid("run")
    deadline = time.monotonic() + 180
    while not any(event == "start" for event, *_ in log_events(log)):
        assert time.monotonic() < deadline and driver.poll() is None, "no task started"
        time.sleep(0.5)
    driver.send_signal(signal.SIGKILL)  # the waiting driver dies; its array goes on
    driver.communicate()
    running = as_json("status", sweep, "--store", store)["running"]
    assert running >= 1

    resume = kdgrid("resume")
    out = resume.communicate(timeout=300)[0]
    assert resume.returncode == 0, out
    assert "claimed by another run, skipped" in out
    deadline = time.monotonic() + 240
    while squeue_count() and time.monotonic() < deadline:  # the first array's last tasks
        time.sleep(1)
    assert squeue_count() == 0

    done_once_each(store, trials)
    assert all(status == "done" for _, status in store_rows(store)), store_rows(store)
    started = collections.Counter(trial_id for event, trial_id, _, _ in log_events(log) if event == "start")
    assert started == collections.Counter(t.trial_id for t in trials), "a trial was trained twice"
    assert not list((store / "_claims").glob("*.json"))


def test_tasks_of_an_export_none_profile_still_run_with_the_hub_variables(
    slurm_cluster: LocalCluster, tmp_path: Path
) -> None:
    """``--export=NONE``: a task inherits nothing from the submitting shell, so the script's setup lines must export
    the Hub's variables (the test's own PYTHONPATH too, for its job function)."""
    setup = [f"export PYTHONPATH={shlex.quote(os.environ['PYTHONPATH'])}"]
    run = executor(slurm_additional_parameters={"export": "NONE"}, slurm_setup=setup)
    run.job_fn = fakes.hub_environment_job
    with environment(OFFLINE_ENVIRONMENT):
        run.run([[make_trial(0)]], tmp_path, sweep="exported")
    assert fakes.hub_environment_seen(tmp_path) == [
        {"HF_HUB_OFFLINE": "1", "hub_offline": True, "datasets_offline": True}
    ]
    done_once_each(tmp_path, [make_trial(0)])
