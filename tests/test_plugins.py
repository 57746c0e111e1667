"""Plugins (`kdgrid.plugins`): a researcher's own knowledge function, strategy and option, named by a sweep file's
``plugins:``, by ``KDGRID_PLUGINS`` or by an installed entry point, known to the CLI and to every worker process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kdgrid import plugins
from kdgrid.cli import main
from kdgrid.core.knowledge import KNOWLEDGE
from kdgrid.core.matching import STRATEGIES
from kdgrid.core.options import OPTIONS
from kdgrid.errors import ConfigError
from kdgrid.grid import load_sweep
from kdgrid.plugins import PLUGINS_VARIABLE, PluginError, load_plugins, loaded_plugins, plugin_environment
from kdgrid.store import read_table
from kdgrid.store.provenance import package_versions
from tests.plugin_files import (
    IMPORT_LOG_VARIABLE,
    PLUGIN_VERSION,
    isolated_plugins,
    knowledge_name,
    option_name,
    strategy_name,
    write_broken_plugin,
    write_dist_info,
    write_plugin,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
PLUGIN = "kdplug"
RUN_WITH_A_WORKER_PROCESS = [
    "--set", "job_fn=tests.launch.fakes:job_to_store", "--set", "local_workers=1", "--set", "local_progress=false",
    "--no-preflight", "--no-compact",
]  # fmt: skip


@pytest.fixture
def fresh_plugins() -> Iterator[None]:
    with isolated_plugins():
        yield


@pytest.fixture
def plugin_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding the plugin `PLUGIN`, importable here and (``PYTHONPATH``) by every subprocess, whose
    imports are logged to ``imports.log`` in the test's folder."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    write_plugin(folder, PLUGIN)
    monkeypatch.syspath_prepend(str(folder))
    path = [str(folder), str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    monkeypatch.setenv(IMPORT_LOG_VARIABLE, str(tmp_path / "imports.log"))
    return folder


def imports(tmp_path: Path) -> list[int]:
    """The process ids that imported the plugin, once per import."""
    log = tmp_path / "imports.log"
    return [int(line) for line in log.read_text().split()] if log.exists() else []


def sweep_using_the_plugin(path: Path, *, plugins_key: bool, module: str = PLUGIN) -> Path:
    """Two trials using the plugin's knowledge, strategy and option; ``plugins_key``: the file names the plugin."""
    spec: dict[str, object] = {
        "name": "plugged",
        "fixed": {"teacher": "bert-base", "student": "bert-tiny", "task": "rte", "knowledge": [knowledge_name(module)],
                  "strategy": strategy_name(module), "options": {option_name(module): 2.0}},
        "axes": {"temperature": [1, 2]},
    }  # fmt: skip
    if plugins_key:
        spec["plugins"] = [module]
    path.write_text(json.dumps(spec))
    return path


def run_cli(
    args: list[str], env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], int]:
    """``kdgrid ARGS`` in a fresh process (as a user starts it); returns what it did and its process id."""
    process = subprocess.Popen([sys.executable, "-m", "kdgrid.cli", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})  # fmt: skip
    out, err = process.communicate(timeout=300)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err), process.pid


def rows(store: Path) -> dict[str, tuple[str, dict[str, str]]]:
    """trial id -> (status, package versions) of every row."""
    table = read_table(store, ["trial_id", "status", "package_versions_json"]).to_pylist()
    return {row["trial_id"]: (row["status"], json.loads(row["package_versions_json"])) for row in table}


def test_a_plugin_named_by_the_sweep_file_or_the_variable_reaches_the_worker_process(
    tmp_path: Path, plugin_folder: Path
) -> None:
    """The CLI started fresh knows the plugin's names; its worker process (``local_workers=1``) loads the plugin
    too and records it in its rows; the trial ids do not depend on where the plugin was named."""
    stored: dict[str, set[str]] = {}
    for how in ("sweep file", "variable"):
        sweep = sweep_using_the_plugin(tmp_path / f"{how}.yaml", plugins_key=how == "sweep file")
        store = tmp_path / f"store-{how}"
        env = {PLUGINS_VARIABLE: PLUGIN} if how == "variable" else {}
        (tmp_path / "imports.log").unlink(missing_ok=True)
        done, driver = run_cli(["run", str(sweep), "--store", str(store), *RUN_WITH_A_WORKER_PROCESS], env)
        assert done.returncode == 0, done.stderr
        pids = imports(tmp_path)
        # the driver and its worker, once each
        assert len(pids) == len(set(pids)) == 2 and driver in pids, pids
        written = rows(store)
        assert len(written) == 2 and all(status == "done" for status, _ in written.values())
        assert all(versions[f"plugin:{PLUGIN}"] == PLUGIN_VERSION for _, versions in written.values())
        stored[how] = set(written)
    assert stored["sweep file"] == stored["variable"]


def test_without_the_plugin_the_sweep_is_refused_naming_the_unknown_knowledge(
    tmp_path: Path, plugin_folder: Path, capsys: pytest.CaptureFixture[str], fresh_plugins: None
) -> None:
    sweep = sweep_using_the_plugin(tmp_path / "s.yaml", plugins_key=False)
    with pytest.raises(ConfigError, match=knowledge_name(PLUGIN)):
        load_sweep(sweep)


def test_the_trial_ids_do_not_depend_on_where_the_plugin_was_named(
    tmp_path: Path, plugin_folder: Path, fresh_plugins: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    named = load_sweep(sweep_using_the_plugin(tmp_path / "named.yaml", plugins_key=True))
    assert load_sweep(named.path).trials  # loading it again is harmless
    monkeypatch.setenv(PLUGINS_VARIABLE, PLUGIN)
    unnamed = load_sweep(sweep_using_the_plugin(tmp_path / "unnamed.yaml", plugins_key=False))
    assert [t.trial.trial_id for t in named.trials] == [t.trial.trial_id for t in unnamed.trials]
    assert all("plugin" not in json.dumps(t.trial.options) for t in named.trials)


def test_loading_is_idempotent(tmp_path: Path, plugin_folder: Path, fresh_plugins: None) -> None:
    os.environ[PLUGINS_VARIABLE] = f" {PLUGIN}, ,{PLUGIN}"
    first = load_plugins()
    again = load_plugins([PLUGIN], source="the sweep file x.yaml")
    assert imports(tmp_path) == [os.getpid()]  # imported once, registered once (a second would raise)
    assert first == again == loaded_plugins()
    (plugin,) = first
    assert (plugin.module, plugin.version) == (PLUGIN, PLUGIN_VERSION)
    assert plugin.source == f"the environment variable {PLUGINS_VARIABLE}"  # where it was named first
    assert knowledge_name(PLUGIN) in KNOWLEDGE and strategy_name(PLUGIN) in STRATEGIES
    assert option_name(PLUGIN) in OPTIONS
    assert package_versions()[f"plugin:{PLUGIN}"] == PLUGIN_VERSION


def test_plugins_of_a_sweep_file_are_handed_on_to_the_jobs_processes(
    tmp_path: Path, plugin_folder: Path, fresh_plugins: None
) -> None:
    assert plugin_environment() == {}
    write_plugin(plugin_folder, "kdplug_two")
    load_sweep(sweep_using_the_plugin(tmp_path / "s.yaml", plugins_key=True))
    os.environ[PLUGINS_VARIABLE] = "kdplug_two"
    load_plugins()
    assert plugin_environment() == {PLUGINS_VARIABLE: f"kdplug_two,{PLUGIN}"}


def test_an_entry_point_plugin_is_loaded_by_every_kdgrid_process(
    tmp_path: Path, plugin_folder: Path, fresh_plugins: None
) -> None:
    """A package that declares an entry point in the group ``kdgrid.plugins`` (here: its metadata on the path)."""
    write_dist_info(plugin_folder, "kdplug-dist", "0.3", {"mine": PLUGIN})
    (plugin,) = load_plugins()
    assert (plugin.module, plugin.version, plugin.from_entry_point) == (PLUGIN, "0.3", True)
    assert plugin.source == "entry point 'mine' of kdplug-dist 0.3"
    assert package_versions()[f"plugin:{PLUGIN}"] == "0.3"
    assert plugin_environment() == {}  # each process finds its entry points itself
    plan, _ = run_cli(["plan", str(sweep_using_the_plugin(tmp_path / "s.yaml", plugins_key=False)), "--json"])
    assert plan.returncode == 0, plan.stderr


@pytest.mark.parametrize("named_by", ["sweep file", "variable", "entry point"])
def test_a_plugin_that_cannot_be_imported_is_one_message_naming_it_and_its_source(
    tmp_path: Path,
    plugin_folder: Path,
    fresh_plugins: None,
    capsys: pytest.CaptureFixture[str],
    named_by: str,
) -> None:
    write_broken_plugin(plugin_folder, "kdplug_broken")
    sweep = tmp_path / "s.yaml"
    sweep.write_text(json.dumps({"fixed": {"teacher": "bert-base", "student": "bert-tiny", "task": "rte"}}))
    source = {
        "sweep file": f"the sweep file {sweep}",
        "variable": f"the environment variable {PLUGINS_VARIABLE}",
        "entry point": "entry point 'bad' of kdplug-broken 0.1",
    }[named_by]
    if named_by == "sweep file":
        sweep.write_text(json.dumps({"plugins": ["kdplug_broken"], **json.loads(sweep.read_text())}))
    elif named_by == "variable":
        os.environ[PLUGINS_VARIABLE] = "kdplug_broken"
    else:
        write_dist_info(plugin_folder, "kdplug-broken", "0.1", {"bad": "kdplug_broken"})
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", str(sweep)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err
    assert " ".join(err.split()) == (
        f"error: plugin 'kdplug_broken' (named by {source}) cannot be imported: "
        "RuntimeError: this plugin is broken on purpose"
    )
    with pytest.raises(PluginError):  # and again: a broken plugin is never taken for a loaded one
        load_plugins(["kdplug_broken"], source=source)
    assert "kdplug_broken" not in [p.module for p in plugins.loaded_plugins()]


def test_a_plugins_key_that_is_not_a_list_of_module_names_is_a_problem_of_the_file(
    tmp_path: Path, fresh_plugins: None
) -> None:
    sweep = tmp_path / "s.yaml"
    sweep.write_text(json.dumps({"plugins": "kdplug", "fixed": {"teacher": "bert-base", "student": "bert-tiny",
                                                                 "task": "rte"}}))  # fmt: skip
    with pytest.raises(ConfigError, match="plugins: must be a list of module names, got 'kdplug'"):
        load_sweep(sweep)


@pytest.mark.parametrize("args", [["--help"], [], ["run", "--help"]])
def test_a_broken_plugin_never_blocks_help(
    plugin_folder: Path, fresh_plugins: None, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    write_broken_plugin(plugin_folder, "kdplug_broken")
    os.environ[PLUGINS_VARIABLE] = "kdplug_broken"
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    assert exit_info.value.code in (0, 2) and "Traceback" not in captured.err  # no_args_is_help exits 2
    assert "Usage" in captured.out + captured.err
    assert "warning: plugin 'kdplug_broken'" in " ".join(captured.err.split())
    with pytest.raises(SystemExit) as exit_info:  # a real command still refuses it
        main(["plan", "demo"])
    assert exit_info.value.code == 2


def test_a_plugin_that_exits_at_import_is_a_broken_plugin_not_the_end_of_kdgrid(
    plugin_folder: Path, fresh_plugins: None, capsys: pytest.CaptureFixture[str]
) -> None:
    (plugin_folder / "kdplug_exits.py").write_text("import sys\nsys.exit(3)\n")
    os.environ[PLUGINS_VARIABLE] = "kdplug_exits"
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    captured = capsys.readouterr()
    assert exit_info.value.code == 0 and "Usage" in captured.out, captured
    assert "warning: plugin 'kdplug_exits'" in " ".join(captured.err.split())
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "demo"])
    assert exit_info.value.code == 2
    assert " ".join(capsys.readouterr().err.split()) == (
        "error: plugin 'kdplug_exits' (named by the environment variable KDGRID_PLUGINS) cannot be imported: "
        "SystemExit: 3"
    )
