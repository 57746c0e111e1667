"""What the processes of each executor get of the plugins (`kdgrid.plugins`): ``KDGRID_PLUGINS`` naming the plugins
the driver loaded from a sweep file or the variable, and each job's process loading them before its job.

Fast, except one test on the local SLURM cluster: the SLURM script is built but not submitted; the Ray trainable and
the SLURM task run in this process, as an actor or a task would run them; the local executor's worker process is
covered end to end in tests/test_plugins.py.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer

from kdgrid.commands import pretrain as pretrain_command
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.errors import LaunchError
from kdgrid.launch import slurm
from kdgrid.launch.job import Launch
from kdgrid.launch.local import _run_in_child
from kdgrid.launch.ray import RayExecutor, run_one_job
from kdgrid.launch.slurm import ArrayTask, SlurmExecutor, SlurmSettings, submitter
from kdgrid.plugins import PLUGINS_VARIABLE, load_plugins, loaded_plugins
from kdgrid.pretrain import child as pretrain_child
from kdgrid.pretrain import slurm as pretrain_slurm
from kdgrid.pretrain.train import RunSettings
from kdgrid.store import read_table
from slurm.local_cluster import LocalCluster
from tests.launch import fakes
from tests.launch.fakes import make_trial
from tests.plugin_files import PLUGIN_VERSION, isolated_plugins, write_broken_plugin, write_plugin

PLUGIN = "kdplug_launch"


@pytest.fixture
def plugin_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The plugin `PLUGIN` (and a broken one) importable, in a process that has loaded no plugin yet."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    write_plugin(folder, PLUGIN)
    write_broken_plugin(folder, "kdplug_launch_broken")
    monkeypatch.syspath_prepend(str(folder))
    with isolated_plugins():
        yield


def recorded_plugin_versions(store: Path) -> list[str | None]:
    column = read_table(store, ["package_versions_json"]).column("package_versions_json")
    return [json.loads(versions).get(f"plugin:{PLUGIN}") for versions in column.to_pylist()]


def test_slurm_task_scripts_export_the_plugins_of_the_sweep_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plugin_here: None
) -> None:
    load_plugins([PLUGIN], source="the sweep file s.yaml")
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
    with pytest.raises(LaunchError, match="no sbatch here"):
        SlurmExecutor(job_fn=fakes.job_to_store).submit(Launch.of([[make_trial(0)]], tmp_path, sweep="s"))
    (params,) = given
    assert f"export {PLUGINS_VARIABLE}={PLUGIN}" in params["setup"]


def test_a_slurm_task_loads_the_exported_plugins_before_its_jobs(tmp_path: Path, plugin_here: None) -> None:
    os.environ[PLUGINS_VARIABLE] = PLUGIN  # what the task script's setup line exported
    assert ArrayTask([[make_trial(0)]], str(tmp_path), "s", {}, "run1", fakes.job_to_store)() == 1
    assert [p.module for p in loaded_plugins()] == [PLUGIN]
    assert recorded_plugin_versions(tmp_path) == [PLUGIN_VERSION]


def test_a_slurm_task_with_a_plugin_that_cannot_be_imported_exits_2_naming_it(
    tmp_path: Path, plugin_here: None, capsys: pytest.CaptureFixture[str]
) -> None:
    os.environ[PLUGINS_VARIABLE] = "kdplug_launch_broken"
    with pytest.raises(SystemExit) as exit_info:
        ArrayTask([[make_trial(0)]], str(tmp_path), "s", {}, "run1", fakes.job_to_store)()
    assert exit_info.value.code == 2
    assert "error: plugin 'kdplug_launch_broken' (named by the environment variable KDGRID_PLUGINS)" in (
        capsys.readouterr().err
    )


def test_the_ray_trainable_loads_the_plugins_of_the_drivers_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plugin_here: None
) -> None:
    from ray import tune

    monkeypatch.setattr(tune, "report", lambda metrics: None)
    run_one_job({"job": 0}, jobs=[[make_trial(0)]], store_dir=str(tmp_path), sweep="e", studies={},
                job_fn=fakes.job_to_store, environment={PLUGINS_VARIABLE: PLUGIN})  # fmt: skip
    assert [p.module for p in loaded_plugins()] == [PLUGIN]
    assert recorded_plugin_versions(tmp_path) == [PLUGIN_VERSION]


def test_a_joined_ray_cluster_gets_the_plugins_in_its_runtime_env(
    monkeypatch: pytest.MonkeyPatch, plugin_here: None
) -> None:
    import ray

    load_plugins([PLUGIN], source="the sweep file s.yaml")
    given: list[dict] = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: given.append(kwargs))
    RayExecutor(ray_address="auto")._init_ray()
    (kwargs,) = given
    assert kwargs["runtime_env"]["env_vars"][PLUGINS_VARIABLE] == PLUGIN


def test_a_local_worker_process_loads_the_plugins_it_is_handed(
    tmp_path: Path, plugin_here: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """`_run_in_child` as a worker process runs it (here in this process): the parent's ``KDGRID_PLUGINS`` set,
    the plugins loaded before the job; one that cannot be imported ends the process with status 2."""
    args = (fakes.job_to_store, [make_trial(0)], str(tmp_path), "s", {}, str(tmp_path / "ckpt"), None)
    with pytest.raises(SystemExit) as exit_info:
        _run_in_child(*args, None, {PLUGINS_VARIABLE: "kdplug_launch_broken"})
    assert exit_info.value.code == 2 and "plugin 'kdplug_launch_broken'" in capsys.readouterr().err
    os.environ.pop(PLUGINS_VARIABLE)
    _run_in_child(*args, None, {PLUGINS_VARIABLE: PLUGIN})
    assert os.environ[PLUGINS_VARIABLE] == PLUGIN  # handed on to the worker's own children
    assert recorded_plugin_versions(tmp_path) == [PLUGIN_VERSION]


def test_a_pretraining_job_and_its_torchrun_processes_get_the_plugins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plugin_here: None
) -> None:
    """``kdgrid pretrain --slurm``'s job script exports them; ``--processes N`` starts torchrun with them."""
    load_plugins([PLUGIN], source=f"the environment variable {PLUGINS_VARIABLE}")
    os.environ.pop(PLUGINS_VARIABLE, None)  # what this process loaded counts, not what its variable says now
    shape = pretrain_slurm.job_shape(SlurmSettings(), nodes=1, tasks_per_node=2)
    job = submitter(SlurmSettings(), tmp_path / "slurm", nodes=shape.nodes, tasks_per_node=shape.tasks_per_node)
    setup = job.parameters["setup"]  # what `kdgrid.pretrain.slurm.submit` submits with
    assert f"export {PLUGINS_VARIABLE}={PLUGIN}" in setup

    started: list[dict[str, str]] = []

    class Torchrun:  # stands for the torchrun process: records its environment, ends at once
        def __init__(self, command: list[str], env: dict[str, str], **popen_options: object) -> None:
            started.append(env)

        def wait(self) -> int:
            return 0

    monkeypatch.setattr(pretrain_child.subprocess, "Popen", Torchrun)
    (tmp_path / "corpus.txt").write_text("a sentence\n")
    recipe = PretrainRecipe.from_dict({"student": "w16-l2-h2-f32", "corpus": str(tmp_path), "steps": 1})
    with pytest.raises(typer.Exit):
        pretrain_command._relaunch_with_torchrun(2, recipe, RunSettings())
    (env,) = started
    assert env[PLUGINS_VARIABLE] == PLUGIN


@pytest.mark.slow
def test_the_array_tasks_of_a_real_slurm_cluster_load_the_plugins_of_the_sweep_file(
    slurm_cluster: LocalCluster, tmp_path: Path, plugin_here: None
) -> None:
    """Under ``--export=NONE`` (a task inherits nothing from the submitting shell): the task's script exports
    ``KDGRID_PLUGINS`` and the task loads the plugin before its job; its row records it."""
    load_plugins([PLUGIN], source="the sweep file s.yaml")
    path = os.pathsep.join([str(tmp_path / "plugins"), os.environ["PYTHONPATH"]])
    run = SlurmExecutor("local", job_fn=fakes.job_to_store, poll_interval_s=1.0,
                        slurm_additional_parameters={"export": "NONE"},
                        slurm_setup=[f"export PYTHONPATH={shlex.quote(path)}"])  # fmt: skip
    run.run([[make_trial(0)]], tmp_path / "store", sweep="plugged")
    assert recorded_plugin_versions(tmp_path / "store") == [PLUGIN_VERSION]
