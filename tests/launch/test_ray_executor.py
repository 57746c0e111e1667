"""The Ray executor against a real local Ray runtime (2 CPUs, 1 logical GPU; see conftest.py).

Each job is a real Tune trial in a Ray actor running the real worker and store; only the training is faked
(`tests.launch.fakes`). Checked: GPU-fraction packing (logical GPUs), actor reuse, a raising trial, an actor
killed with SIGKILL (fit() does not raise: num_errors is checked), and a resume that runs exactly what is missing.
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

import kdgrid.launch.ray
from kdgrid.device_sharing import SHARING_VARIABLE
from kdgrid.errors import ConfigError, LaunchError
from kdgrid.launch.environment import OFFLINE_ENVIRONMENT, environment
from kdgrid.launch.ray import RayExecutor, RaySettings, run_one_job
from kdgrid.store import claims, read_store
from kdgrid.trial import Trial
from tests.launch import fakes
from tests.launch.fakes import (
    hub_environment_seen,
    log_events,
    make_trial,
    max_overlap,
    pending_jobs,
    store_rows,
    store_studies,
)


def done_once_each(store: Path, trials: list[Trial]) -> None:
    done = collections.Counter(trial_id for trial_id, status in store_rows(store) if status == "done")
    assert done == collections.Counter(t.trial_id for t in trials)


# -- settings (no runtime) ------------------------------------------------------------------------------------------
def test_an_unknown_ray_setting_is_refused_naming_it_and_the_allowed_ones() -> None:
    with pytest.raises(ConfigError) as info:
        RayExecutor(ray_gpu_per_job=0.5)
    assert "ray_gpu_per_job" in str(info.value) and "ray_gpus_per_job" in str(info.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [("ray_gpus_per_job", -0.5), ("ray_gpus_per_job", 1.5), ("ray_cpus_per_job", "two"), ("ray_num_cpus", 1.5),
     ("ray_reuse_actors", "maybe"), ("ray_max_failures", -1)],
)  # fmt: skip
def test_bad_ray_values_are_refused_naming_the_key(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=key):
        RaySettings.from_flags({key: value})


def test_ray_settings_given_as_text_are_typed() -> None:
    settings = RaySettings.from_flags(
        {"ray_gpus_per_job": "0.25", "ray_reuse_actors": "false", "ray_num_cpus": "2"}
    )
    assert settings.gpus_per_job == 0.25 and settings.reuse_actors is False and settings.num_cpus == 2


def test_jobs_are_told_how_their_device_is_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recorded beside each latency: the GPU fraction of a job, or how many CPU jobs run at once."""
    monkeypatch.setattr(kdgrid.launch.ray, "job_variables", lambda: {"HF_HUB_OFFLINE": "1"})
    quarter = RayExecutor(ray_gpus_per_job=0.25, ray_num_gpus=1).job_environment()
    assert quarter == {"HF_HUB_OFFLINE": "1", SHARING_VARIABLE: "ray: GPU fraction 0.25 per job"}
    whole = RayExecutor(ray_gpus_per_job=1, ray_num_gpus=2).job_environment()
    assert whole[SHARING_VARIABLE] == "exclusive"
    cpus = RayExecutor(ray_cpus_per_job=1, ray_num_cpus=4).job_environment()
    assert cpus[SHARING_VARIABLE] == "ray: up to 4 jobs on the CPUs"


def test_importing_the_executors_does_not_import_ray() -> None:
    code = "import sys, kdgrid.launch.ray, kdgrid.launch.slurm; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False"]  # Ray starts slowly: only building a RayExecutor's run may import it


def test_a_tune_trial_runs_its_job_with_the_studies_of_its_own_trials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trainable itself, outside Tune (its report captured): a job mixing two studies writes each row
    under its trial's study, and the job function is given only its own trials' studies."""
    from ray import tune  # Ray takes seconds to import: only the tests that use it pay for it


    reports: list[dict] = []
    given: list[dict[str, str]] = []
    monkeypatch.setattr(tune, "report", reports.append)

    def recording_job(trials, store_dir, *, sweep, studies, checkpoint_dir):
        given.append(dict(studies))
        fakes.job_to_store(trials, store_dir, sweep=sweep, studies=studies, checkpoint_dir=checkpoint_dir)

    a0, b0, a1 = make_trial(0), make_trial(0, k=1), make_trial(1)
    studies = {a0.trial_id: "a", b0.trial_id: "b", a1.trial_id: "a"}
    run_one_job({"job": 0}, jobs=[[a0, b0], [a1]], store_dir=str(tmp_path), sweep="m", studies=studies,
                job_fn=recording_job)  # fmt: skip
    assert given == [{a0.trial_id: "a", b0.trial_id: "b"}] and reports == [{"trials": 2, "finished": 1}]
    assert store_studies(tmp_path) == {a0.trial_id: "a", b0.trial_id: "b"}


def test_the_trainable_runs_its_job_with_the_drivers_hub_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An actor of a cluster joined without them (by the caller's own ray.init) gets the offline switches from
    the trainable, even where the Hugging Face libraries were imported before."""
    import datasets
    import huggingface_hub.constants
    from ray import tune

    monkeypatch.setattr(tune, "report", lambda metrics: None)
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "0")  # restored after the test, as the constants below
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)
    run_one_job({"job": 0}, jobs=[[make_trial(0)]], store_dir=str(tmp_path), sweep="e", studies={},
                job_fn=fakes.hub_environment_job, environment=OFFLINE_ENVIRONMENT)  # fmt: skip
    assert hub_environment_seen(tmp_path) == [{"HF_HUB_OFFLINE": "1", "hub_offline": True, "datasets_offline": True}]


# -- a real runtime -------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_jobs_on_a_runtime_started_before_kdgrid_get_the_hub_variables_set_for_the_run(
    ray_runtime: None, tmp_path: Path
) -> None:
    """The session's runtime was started by the caller before the variables were set (its workers did not
    inherit them), as a notebook's ray.init(address=...) would be."""
    with environment(OFFLINE_ENVIRONMENT):
        RayExecutor(job_fn=fakes.hub_environment_job).run([[make_trial(0)], [make_trial(1)]], tmp_path, sweep="h")
    seen = hub_environment_seen(tmp_path)
    assert seen and all(s == {"HF_HUB_OFFLINE": "1", "hub_offline": True, "datasets_offline": True} for s in seen)


@pytest.mark.slow
def test_a_dead_actors_unfinished_trials_get_their_row_at_once_when_its_process_cannot_be_probed(
    ray_runtime: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As for an actor on another node: its claims still have a fresh heartbeat, but fit() has returned, so its
    Tune trial has ended and its claims are stale; its unfinished trials are retryable now, not in 10 minutes."""
    monkeypatch.setattr(claims, "_pid_gone", lambda pid: False)  # the driver cannot see the actor's process
    first = make_trial(0)
    victim, after = make_trial(0, k=1, test_kill_once=str(tmp_path / "killed-once")), make_trial(0, k=2)
    with pytest.raises(LaunchError, match=r"2 trial\(s\) left unfinished got a failed row"):
        RayExecutor(job_fn=fakes.job_to_store).run([[first, victim, after]], tmp_path, sweep="d")
    assert sorted(store_rows(tmp_path)) == sorted(
        [(first.trial_id, "done"), (victim.trial_id, "failed"), (after.trial_id, "failed")]
    )
    assert claims.read_claims(tmp_path) == {}  # no trial is left "running"
    assert pending_jobs([[first, victim, after]], tmp_path) == [[victim, after]]


@pytest.mark.slow
@pytest.mark.parametrize(("gpus_per_job", "expected_overlap"), [(0.5, 2), (1.0, 1)])
def test_gpu_fractions_pack_jobs_onto_one_gpu_and_actors_are_reused(
    ray_runtime: None, tmp_path: Path, gpus_per_job: float, expected_overlap: int
) -> None:
    log = tmp_path / "log.txt"
    jobs = [[make_trial(seed, test_log=str(log), test_seconds=1.0)] for seed in range(6)]
    RayExecutor(job_fn=fakes.job_to_store, ray_gpus_per_job=gpus_per_job).run(jobs, tmp_path, sweep="p")

    done_once_each(tmp_path, [t for job in jobs for t in job])
    # One logical GPU: 0.5 GPU per job lets two run at once, a whole GPU only one.
    assert max_overlap(log) == expected_overlap
    # reuse_actors: six jobs ran in no more actors (processes) than could run at once.
    pids = {pid for event, _, pid, _ in log_events(log) if event == "start"}
    assert len(pids) <= expected_overlap


@pytest.mark.slow
def test_a_raising_trial_and_a_killed_actor_leave_a_truthful_store_and_resume_runs_exactly_the_rest(
    ray_runtime: None, tmp_path: Path
) -> None:
    log, sentinel = tmp_path / "log.txt", tmp_path / "killed-once"
    raiser = make_trial(0, k=1, test_log=str(log), test_raise_once=str(tmp_path / "raised-once"))
    healthy = [make_trial(0, test_log=str(log)), raiser]
    first = make_trial(1, test_log=str(log))
    victim = make_trial(1, k=1, test_log=str(log), test_kill_once=str(sentinel))
    after = make_trial(1, k=2, test_log=str(log))
    jobs = [healthy, [first, victim, after]]
    studies = {t.trial_id: "ab"[i % 2] for job in jobs for i, t in enumerate(job)}  # jobs mixing two studies
    with pytest.raises(LaunchError, match=r"1 of 2 Ray job\(s\) did not finish.*job 1"):
        RayExecutor(job_fn=fakes.job_to_store).run(jobs, tmp_path, sweep="f", studies=studies)

    assert sorted(store_rows(tmp_path)) == sorted(
        [(healthy[0].trial_id, "done"), (raiser.trial_id, "failed"), (first.trial_id, "done"),
         (victim.trial_id, "failed"), (after.trial_id, "failed")]
    )  # fmt: skip
    errors = read_store(tmp_path).set_index("trial_id")["error_type"]
    assert errors[raiser.trial_id] == "RuntimeError" and errors[victim.trial_id] == "JobLost"
    # rows from the jobs and the JobLost rows the executor wrote alike record each trial's own study
    assert store_studies(tmp_path) == studies

    remaining = pending_jobs(jobs, tmp_path)
    assert remaining == [[raiser], [victim, after]]
    RayExecutor(job_fn=fakes.job_to_store).run(remaining, tmp_path, sweep="f", studies=studies)
    done_once_each(tmp_path, [t for job in jobs for t in job])
    started = collections.Counter(trial_id for event, trial_id, _, _ in log_events(log) if event == "start")
    assert started[healthy[0].trial_id] == 1 and started[first.trial_id] == 1 and started[after.trial_id] == 1


@pytest.mark.slow
def test_a_job_needing_more_than_the_cluster_has_is_refused_before_running(
    ray_runtime: None, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="GPU"):
        RayExecutor(job_fn=fakes.job_to_store, ray_gpus_per_job=2).run([[make_trial(0)]], tmp_path, sweep="s")
    assert store_rows(tmp_path) == []


@pytest.mark.slow
def test_a_real_core_job_runs_as_a_tune_trial_and_writes_its_rows(
    ray_runtime: None, tmp_path: Path, real_job: list[Trial]
) -> None:
    """No fake: the default job function (run_job_to_store -> the core's run_job) in a Ray actor."""
    RayExecutor().run([real_job], tmp_path, sweep="real")
    done_once_each(tmp_path, real_job)
    rows = read_store(tmp_path)
    assert set(rows["status"]) == {"done"}
    accuracy = [column for column in rows.columns if "accuracy" in column]
    assert accuracy and rows[accuracy[0]].between(0, 1).all()


@pytest.mark.slow
def test_a_job_retried_after_its_actor_died_skips_the_trials_it_had_finished(
    ray_runtime: None, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    first = make_trial(0, test_log=str(log))
    victim = make_trial(0, k=1, test_log=str(log), test_kill_once=str(tmp_path / "killed-once"))
    RayExecutor(job_fn=fakes.job_to_store, ray_max_failures=1).run([[first, victim]], tmp_path, sweep="r")

    done_once_each(tmp_path, [first, victim])
    started = collections.Counter(trial_id for event, trial_id, _, _ in log_events(log) if event == "start")
    assert started == {first.trial_id: 1, victim.trial_id: 2}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_jobs_run_on_an_existing_ray_cluster_given_its_address(tmp_path: Path) -> None:
    """A head started with `ray start --head` (as on SLURM), and a driver in a fresh process connecting to it."""
    from ray.util import get_node_ip_address

    port = _free_port()
    address = f"{get_node_ip_address()}:{port}"
    # Ray 2.60 may enable token authentication for `ray start`; a throw-away head on this machine needs none.
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    # Its own short temp dir (socket paths are limited to ~107 bytes): the head's files, including the cluster
    # address file that a bare ray.init() would pick up, stay out of the machine-wide /tmp/ray.
    temp_dir = tempfile.mkdtemp(prefix="kdray-", dir="/tmp")
    head = subprocess.Popen(
        [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
         "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp_dir}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        status = [str(Path(sys.executable).parent / "ray"), "status", f"--address={address}"]
        while (
            subprocess.run(status, capture_output=True, check=False).returncode != 0
        ):  # the head is not up yet
            assert head.poll() is None and time.monotonic() < deadline, "the Ray head did not start"
            time.sleep(1)
        driver = textwrap.dedent(f"""
            from pathlib import Path
            from tests.launch import fakes
            from kdgrid.launch.ray import RayExecutor
            jobs = [[fakes.make_trial(seed)] for seed in range(3)]
            RayExecutor(job_fn=fakes.job_to_store, ray_address={address!r}).run(jobs, Path({str(tmp_path)!r}), sweep="a")
        """)  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-c", driver], capture_output=True, text=True, timeout=180, env=env
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert (
            "Connected to Ray cluster" in done.stderr
        )  # it joined the head, it did not start its own runtime
        done_once_each(tmp_path, [make_trial(seed) for seed in range(3)])
    finally:  # stop only the head this test started: its own process group, by id
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)
