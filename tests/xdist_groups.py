"""How ``pytest -n 2`` (pytest-xdist, ``--dist loadgroup``, what `make test` runs) splits the suite between its
worker processes: whole groups of tests go to one worker.

A test's group (`group_of`) is, in order: the name of its own ``xdist_group`` mark; the shared resource it uses
(`SHARED_FIXTURES`: one SLURM cluster per machine, whose state directory two workers must not start at once and
whose queue a test counts; one Ray runtime per session, not one per worker; the polarity teacher, fine-tuned once
for minutes into the user's cache, not once per worker at the same time); else its file, so that a module-scoped
fixture is built once. Groups holding slow tests are handed out first, those with the most first: a long group
started last would leave one worker running alone at the end.

The groups travel from the workers (which collect the tests and see their fixtures) to the scheduler in the
controlling process (which sees only node ids) as a JSON file per worker in a folder the controller makes: xdist's
own loadgroup scheduler reads a group appended to the node id, which newer pytest releases no longer let a plugin
change, and then it silently stops grouping.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

# fixture -> group: every test using the fixture runs in one worker.
SHARED_FIXTURES = {
    "slurm_cluster": "slurm",
    "ray_runtime": "ray",
    "finetuned_polarity_teacher": "polarity-teacher",
}
# workerinput key: the folder where each worker writes its tests' groups.
GROUPS_DIR = "kdgrid_groups_dir"


def group_of(item: pytest.Item) -> str:
    """The group of a test: its ``xdist_group`` mark's name, the shared resource it uses, else its file."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    fixtures = getattr(item, "fixturenames", ())
    for fixture, group in SHARED_FIXTURES.items():
        if fixture in fixtures:
            return group
    return item.nodeid.split("::", 1)[0]


def slow_groups_first(items: list[pytest.Item]) -> None:
    """Sort ``items`` in place: groups by their number of slow tests, most first (the longest work first, as far
    as the marks tell), file order otherwise (stable)."""
    slow: dict[str, int] = {}
    for item in items:
        if item.get_closest_marker("slow") is not None:
            slow[group_of(item)] = slow.get(group_of(item), 0) + 1
    items.sort(key=lambda item: -slow.get(group_of(item), 0))


class GroupScheduling(LoadScopeScheduling):
    """xdist's scope scheduling (a scope's tests all go to one worker, scopes in collection order with
    ``--no-loadscope-reorder``) with the groups the workers wrote as scopes."""

    def __init__(self, config: pytest.Config, log: Any, folder: Path) -> None:
        super().__init__(config, log)
        self.folder = folder
        self.groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self.groups is None:
            # Called once every worker has finished collecting (and so has written its file): any file will do,
            # since xdist refuses to run when the workers' collections differ.
            written = sorted(self.folder.glob("*.json"))
            if not written:
                raise RuntimeError(f"no worker wrote the groups of its tests into {self.folder}")
            self.groups = json.loads(written[0].read_text())
        return self.groups.get(nodeid, nodeid)


class XdistGroups:
    """The plugin: registered by tests/conftest.py where pytest-xdist is installed."""

    def __init__(self) -> None:
        self.folder: Path | None = None

    @pytest.hookimpl
    def pytest_configure(self, config: pytest.Config) -> None:
        distributed = config.getoption("numprocesses", None) or config.getoption("tx", None)
        if not hasattr(config, "workerinput") and distributed and config.getoption("dist") == "loadgroup":
            self.folder = Path(tempfile.mkdtemp(prefix="kdgrid-xdist-groups-"))

    @pytest.hookimpl
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    @pytest.hookimpl
    def pytest_configure_node(self, node: Any) -> None:
        if self.folder is not None:
            node.workerinput[GROUPS_DIR] = str(self.folder)

    @pytest.hookimpl
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> GroupScheduling | None:
        if self.folder is None:
            return None  # another --dist mode: xdist's own scheduler
        return GroupScheduling(config, log, self.folder)

    @pytest.hookimpl(trylast=True)  # the order the workers send is the order the scheduler hands groups out
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if GROUPS_DIR in getattr(config, "workerinput", {}):
            slow_groups_first(items)

    @pytest.hookimpl
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        workerinput = getattr(session.config, "workerinput", {})
        if GROUPS_DIR in workerinput:
            groups = {item.nodeid: group_of(item) for item in session.items}
            path = Path(workerinput[GROUPS_DIR]) / f"{workerinput['workerid']}.json"
            staging = path.with_suffix(".tmp")
            staging.write_text(json.dumps(groups))
            os.replace(staging, path)  # the scheduler never reads half a file


_torch_threads_set = False


def one_torch_thread_per_worker(config: pytest.Config) -> None:
    """Under xdist, torch in each worker uses one thread from the first test that finds it imported: the
    workers share the cores, and their threads would fight for them. A test or fixture that sets its own thread
    count still does (afterwards); child processes keep torch's default."""
    global _torch_threads_set
    if not _torch_threads_set and hasattr(config, "workerinput") and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
        _torch_threads_set = True
