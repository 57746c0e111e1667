"""The SLURM executor without a cluster: settings and profiles, packing, the sbatch script, the requeueable task."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
from pathlib import Path

import pytest
from submitit.slurm.slurm import _make_sbatch_string

from kdgrid.errors import ConfigError, LaunchError
from kdgrid.launch import get_executor, slurm
from kdgrid.launch.job import Launch
from kdgrid.launch.slurm import (
    ArrayTask,
    SlurmExecutor,
    load_profile,
    pack_tasks,
    parse_time_minutes,
    resolve_settings,
    split_arrays,
    submitit_parameters,
)
from kdgrid.store import read_store
from tests.launch import fakes
from tests.launch.fakes import make_trial, store_rows, store_studies

GOLDEN = Path(__file__).parent / "golden" / "sbatch_example_profile.sh"


@pytest.mark.parametrize(
    ("value", "minutes"),
    [
        (90, 90),
        ("90", 90),
        ("1:30:00", 90),
        ("01:30:30", 91),
        ("2-00:00:00", 2880),
        ("45:00", 45),
        ("45:10", 46),
    ],
)
def test_time_limits_convert_to_whole_minutes_rounding_up(value: object, minutes: int) -> None:
    assert parse_time_minutes(value) == minutes  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["soon", "1:2:3:4", 0, "0"])
def test_a_bad_time_limit_is_refused_naming_the_key(value: object) -> None:
    with pytest.raises(ConfigError, match="slurm_time"):
        parse_time_minutes(value)  # type: ignore[arg-type]


def test_an_unknown_flag_is_refused_naming_it_and_the_allowed_ones() -> None:
    with pytest.raises(ConfigError) as info:
        SlurmExecutor(slurm_partitoin="gpu")
    message = str(info.value)
    assert "slurm_partitoin" in message
    assert "slurm_partition" in message and "slurm_array_parallelism" in message


def test_an_unknown_profile_key_is_refused_naming_the_file(tmp_path: Path) -> None:
    profile = tmp_path / "mine.yaml"
    profile.write_text("partition: gpu\ngpu: 1\n")
    with pytest.raises(ConfigError) as info:
        load_profile(profile)
    message = str(info.value)
    assert str(profile) in message and "unknown setting(s) gpu;" in message and "slurm_gpus" in message


def test_a_missing_profile_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        load_profile("no-such-profile")
    assert "example" in str(info.value) and "local" in str(info.value)


def test_flags_override_the_profile_and_values_are_typed() -> None:
    settings = resolve_settings(
        "example", {"slurm_time": "00:10:00", "slurm_array_parallelism": "8", "mem_gb": 4}
    )
    assert settings.partition == "gpu"  # from the profile
    assert settings.time == 10 and settings.array_parallelism == 8  # flags, text turned into numbers
    assert settings.mem_gb == 4.0


@pytest.mark.parametrize(
    ("key", "value"),
    [("slurm_jobs_per_task", 0), ("slurm_gpus", -1), ("slurm_cpus_per_task", "many"), ("slurm_mem_gb", "lots"),
     ("slurm_setup", "module load cuda"), ("slurm_additional_parameters", ["x"]), ("slurm_gpu_mem_gb", 0),
     ("slurm_mem_gb", -4), ("slurm_sacct_give_up_s", -1)],
)  # fmt: skip
def test_bad_values_are_refused_naming_the_key(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=key):
        resolve_settings(None, {key: value})


def test_submitit_parameters_translate_gpus_and_memory() -> None:
    params = submitit_parameters(
        resolve_settings(None, {"slurm_gpus": 2, "slurm_mem_gb": 1.5, "slurm_qos": "hi"})
    )
    assert params["gpus_per_node"] == 2 and params["mem"] == "1536MB" and params["qos"] == "hi"
    assert "gpus_per_node" not in submitit_parameters(resolve_settings(None, {}))


def test_the_sbatch_script_of_the_example_profile_matches_the_golden_file() -> None:
    folder = "/shared/results/_slurm/demo/%j"
    text = _make_sbatch_string(
        command=f"python -u -m submitit.core._submit {folder}",
        folder=folder,
        map_count=5,
        **submitit_parameters(resolve_settings("example", {})),
    )
    if os.environ.get("KDGRID_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_the_hub_variables_are_exported_first_in_every_task_script_even_with_export_none() -> None:
    settings = resolve_settings("example", {"slurm_additional_parameters": {"export": "NONE"}})
    params = submitit_parameters(settings, {"HF_HUB_OFFLINE": "1", "HF_HOME": "/shared/hf cache"})
    text = _make_sbatch_string(
        command="python -u -m submitit.core._submit /f", folder="/f", map_count=1, **params
    )
    assert "#SBATCH --export=NONE" in text
    exports = [text.index("export HF_HUB_OFFLINE=1"), text.index("export HF_HOME='/shared/hf cache'")]
    # srun hands the script's environment on to the task (it would start from nothing under --export=NONE)
    handed_on = text.index("export SLURM_EXPORT_ENV=ALL")
    assert (
        max(exports) < handed_on < text.index("module load cuda/12.1") < text.index("python -u -m submitit")
    )
    assert submitit_parameters(settings)["setup"] == ["export SLURM_EXPORT_ENV=ALL", *(settings.setup or [])]
    exporting = resolve_settings("example", {})  # sbatch's default export: the profile's own lines only
    assert submitit_parameters(exporting)["setup"] == exporting.setup


def test_submission_exports_the_hub_variables_of_the_submitting_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given: list[dict] = []

    class Refusing:  # stands for submitit's executor: records the parameters, then sbatch refuses
        def __init__(self, **kwargs: object) -> None:
            pass

        def update_parameters(self, **params: object) -> None:
            given.append(params)

        def batch(self) -> object:
            raise RuntimeError("no sbatch here")

    monkeypatch.setattr(slurm.submitit, "SlurmExecutor", Refusing)
    monkeypatch.setattr(slurm, "check_partition", lambda partition: None)
    monkeypatch.setattr(slurm, "cluster_max_array_size", lambda: 10)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", "/shared/hub")
    with pytest.raises(LaunchError, match="no sbatch here"):
        SlurmExecutor(job_fn=fakes.job_to_store).submit(Launch.of([[make_trial(0)]], tmp_path, sweep="s"))
    (params,) = given
    assert {"export HF_HUB_OFFLINE=1", "export HF_HUB_CACHE=/shared/hub"} <= set(params["setup"])


@pytest.mark.parametrize(("n_jobs", "per_task"), [(1, 1), (7, 1), (7, 3), (9, 3), (2, 5)])
def test_packing_keeps_every_job_once_in_order(n_jobs: int, per_task: int) -> None:
    jobs = [[make_trial(seed)] for seed in range(n_jobs)]
    tasks = pack_tasks(jobs, per_task)
    assert [job for task in tasks for job in task] == jobs
    assert all(1 <= len(task) <= per_task for task in tasks)
    assert len(tasks) == -(-n_jobs // per_task)


@pytest.mark.parametrize(("n_tasks", "max_size"), [(1001, 1001), (1002, 1001), (2500, 1001), (5, 2)])
def test_arrays_never_exceed_max_array_size(n_tasks: int, max_size: int) -> None:
    arrays = split_arrays(list(range(n_tasks)), max_size)
    assert [t for array in arrays for t in array] == list(range(n_tasks))
    assert max(len(a) for a in arrays) <= max_size
    assert len(arrays) == -(-n_tasks // max_size)


def test_a_requeued_array_task_skips_the_jobs_it_finished_before_and_cleans_up(tmp_path: Path) -> None:
    log, store = tmp_path / "log.txt", tmp_path / "store"
    first = make_trial(0, test_log=str(log))
    interrupted = make_trial(1, test_log=str(log), test_exit_once=str(tmp_path / "exited"))
    task = ArrayTask([[first], [interrupted]], str(store), "sweep", {}, "run1", fakes.job_to_store)
    with pytest.raises(SystemExit):  # the time limit strikes during the second job
        task()
    assert store_rows(store) == [(first.trial_id, "done")]
    # What submitit does then: pickle the callable checkpoint() returns, and run it in the requeued task.
    resubmitted = task.checkpoint()
    assert resubmitted.function is task
    again = pickle.loads(pickle.dumps(resubmitted.function))
    assert again() == 1  # only the interrupted job ran
    assert sorted(store_rows(store)) == sorted([(first.trial_id, "done"), (interrupted.trial_id, "done")])
    assert [line.split()[1] for line in log.read_text().splitlines() if line.startswith("start")] == [
        first.trial_id, interrupted.trial_id, interrupted.trial_id
    ]  # fmt: skip
    assert not list((store / "_checkpoints").rglob(".finished-*"))
    # A later submission of a job whose trials are all done runs nothing: no trial gets a second done row.
    assert ArrayTask([[first, interrupted]], str(store), "sweep", {}, "run2", fakes.job_to_store)() == 0
    assert len(store_rows(store)) == 2


def test_a_job_that_finished_with_failures_runs_again_in_a_later_submission(tmp_path: Path) -> None:
    """Markers belong to one submission: a resume of the same job (its trial failed) is not skipped."""
    flaky = make_trial(0, test_raise_once=str(tmp_path / "raised"))
    assert ArrayTask([[flaky]], str(tmp_path), "sweep", {}, "run1", fakes.job_to_store)() == 1
    assert ArrayTask([[flaky]], str(tmp_path), "sweep", {}, "run2", fakes.job_to_store)() == 1
    assert sorted(store_rows(tmp_path)) == sorted([(flaky.trial_id, "failed"), (flaky.trial_id, "done")])


def test_a_requeued_task_continues_an_unfinished_job_from_its_checkpoint(tmp_path: Path) -> None:
    trial = make_trial(0, test_epochs=4, test_seconds=0.0)
    task = ArrayTask([[trial]], str(tmp_path / "store"), "sweep", {}, "run", fakes.job_to_store)
    # Two epochs were done before the time limit (as the fake core records them), then the task is rerun.
    folder = task.job_dir([trial])
    folder.mkdir(parents=True)
    (folder / f"{trial.trial_id}.epochs").write_text("2")
    task()
    row = read_store(tmp_path / "store").iloc[0]
    assert row["status"] == "done" and '"resumed_from_epoch": 2' in row["extra_json"]


def test_array_tasks_of_jobs_mixing_studies_write_each_row_under_its_trials_study(tmp_path: Path) -> None:
    store = tmp_path / "store"
    jobs = [[make_trial(0), make_trial(0, k=1)], [make_trial(1), make_trial(1, k=1)], [make_trial(2)]]
    studies = {trial.trial_id: "ab"[i % 2] for job in jobs for i, trial in enumerate(job)}
    runner = SlurmExecutor(job_fn=fakes.job_to_store, slurm_jobs_per_task=2)
    tasks = runner.make_tasks(Launch.of(jobs, store, sweep="sweep", studies=studies), run_id="run")
    assert [len(task.jobs) for task in tasks] == [2, 1]
    for task in tasks:  # what each node runs, after the round trip submitit makes through a pickle
        pickle.loads(pickle.dumps(task))()
    assert store_studies(store) == studies
    assert sorted(store_rows(store)) == sorted((trial_id, "done") for trial_id in studies)


def test_an_executor_with_no_jobs_submits_nothing(tmp_path: Path) -> None:
    SlurmExecutor(job_fn=fakes.job_to_store).run([], tmp_path, sweep="s")
    assert not any(tmp_path.iterdir())


def test_slurm_executor_is_built_by_the_registry_with_its_prefixed_settings() -> None:
    executor = get_executor("slurm", profile="local", slurm_time=5, wait=False)
    assert isinstance(executor, slurm.SlurmExecutor)
    assert executor.settings.partition == "local" and executor.settings.time == 5 and not executor.wait


def test_named_profiles_ship_with_the_package_and_a_path_still_works(tmp_path: Path) -> None:
    package = Path(slurm.__file__).parent
    for name in ("local", "example"):
        assert slurm.find_profile(name).parent == package / "slurm_profiles"  # not the checkout's slurm/
    mine = tmp_path / "mine.yaml"
    mine.write_text("partition: mine\ntime: 5\n")
    assert resolve_settings(mine, {}).partition == "mine"


def test_every_setting_has_one_help_line_and_its_prefix() -> None:
    help_lines = slurm.SlurmSettings.help()
    assert list(help_lines) == [f"slurm_{name}" for name in slurm.SlurmSettings.names()]
    assert all(line.strip() for line in help_lines.values())


def test_a_requeueing_task_shields_the_scontrol_child_from_slurms_sigterm(tmp_path: Path) -> None:
    """`scontrol requeue` makes SLURM send SIGTERM to every process of the job: submitit's `scontrol` child must
    survive it, else submitit fails the job instead of requeueing it (its rows so far kept, the rest never run)."""
    task = ArrayTask([[make_trial(0)]], str(tmp_path / "store"), "sweep", {}, "run1", fakes.job_to_store)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    task.checkpoint()  # what submitit calls first; then it runs `scontrol requeue` as a child process
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    child = subprocess.run(
        ["sh", "-c", "kill -TERM $$; echo survived"], capture_output=True, text=True, check=False
    )
    assert (child.returncode, child.stdout.strip()) == (0, "survived")
