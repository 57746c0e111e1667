"""The grouping of `pytest -n 2` (tests/xdist_groups.py): a test's group by its mark, its shared runtime or its
file; slow groups first; and, in a real xdist run of a small suite, every group on exactly one worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.xdist_groups import group_of, slow_groups_first

ROOT = Path(__file__).resolve().parents[1]


class FakeItem:
    """What `group_of` reads of a collected test: its node id, its fixtures and its marks."""

    def __init__(
        self, nodeid: str, fixtures: tuple[str, ...] = (), marks: tuple[pytest.MarkDecorator, ...] = ()
    ):
        self.nodeid, self.fixturenames, self.marks = nodeid, fixtures, [m.mark for m in marks]

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return next((mark for mark in self.marks if mark.name == name), None)


def test_a_test_is_grouped_by_its_mark_then_its_shared_runtime_then_its_file() -> None:
    assert group_of(FakeItem("tests/a/test_x.py::test_one", ("tmp_path",))) == "tests/a/test_x.py"
    assert group_of(FakeItem("tests/a/test_x.py::test_p[1-2]")) == "tests/a/test_x.py"
    assert group_of(FakeItem("tests/a/test_x.py::test_two", ("tmp_path", "slurm_cluster"))) == "slurm"
    assert group_of(FakeItem("tests/b/test_y.py::test_three", ("ray_runtime",))) == "ray"
    marked = FakeItem("tests/b/test_y.py::test_four", ("ray_runtime",), (pytest.mark.xdist_group("mine"),))
    assert group_of(marked) == "mine"
    assert group_of(FakeItem("t.py::t", marks=(pytest.mark.xdist_group(name="kw"),))) == "kw"


def test_the_groups_with_the_most_slow_tests_come_first_then_file_order() -> None:
    items = [
        FakeItem("tests/test_a.py::one"),
        FakeItem("tests/test_b.py::fast"),
        FakeItem("tests/test_c.py::two", ("slurm_cluster",)),
        FakeItem("tests/test_b.py::slow", marks=(pytest.mark.slow,)),
        FakeItem("tests/test_d.py::three", ("slurm_cluster",), (pytest.mark.slow,)),
        FakeItem("tests/test_e.py::five", ("slurm_cluster",), (pytest.mark.slow,)),
        FakeItem("tests/test_a.py::four"),
    ]
    slow_groups_first(items)  # type: ignore[arg-type]
    assert [item.nodeid for item in items] == [
        "tests/test_c.py::two",  # slurm: 2 slow tests
        "tests/test_d.py::three",
        "tests/test_e.py::five",
        "tests/test_b.py::fast",  # tests/test_b.py: 1
        "tests/test_b.py::slow",
        "tests/test_a.py::one",  # no slow test
        "tests/test_a.py::four",
    ]


INNER_CONFTEST = """
import os, pytest
from tests.xdist_groups import XdistGroups

def pytest_configure(config):
    config.pluginmanager.register(XdistGroups(), "groups")

@pytest.fixture
def slurm_cluster():
    return None

@pytest.fixture(autouse=True)
def record(request):
    with open(LOG, "a") as out:
        out.write('{"id": "%s", "worker": "%s"}\\n' % (request.node.nodeid, os.environ["PYTEST_XDIST_WORKER"]))
"""


def test_in_a_real_xdist_run_every_group_runs_on_one_worker(pytester: pytest.Pytester) -> None:
    """Two workers, three files of eight tests each, and a group of six tests spread over the three files by a
    shared-runtime fixture: without grouping, xdist would deal the tests of each file out to both workers."""
    pytester.makeconftest(f"LOG = {str(pytester.path / 'ran.jsonl')!r}\n" + INNER_CONFTEST)
    for name in ("a", "b", "c"):
        plain = "\n".join(f"def test_{name}{i}():\n    pass\n" for i in range(8))
        shared = "\n".join(f"def test_{name}_shared{i}(slurm_cluster):\n    pass\n" for i in range(2))
        pytester.makepyfile(**{f"test_{name}": plain + "\n" + shared})
    result = pytester.runpytest_subprocess(
        "-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder", "-p", "no:cacheprovider",
        f"--rootdir={pytester.path}", "-o", f"pythonpath={ROOT}",
    )  # fmt: skip
    result.assert_outcomes(passed=30)
    ran = [json.loads(line) for line in (pytester.path / "ran.jsonl").read_text().splitlines()]
    assert len(ran) == 30
    workers: dict[str, set[str]] = {}
    for row in ran:
        group = "slurm" if "_shared" in row["id"] else row["id"].split("::")[0]
        workers.setdefault(group, set()).add(row["worker"])
    assert set(workers) == {"slurm", "test_a.py", "test_b.py", "test_c.py"}
    assert all(len(on) == 1 for on in workers.values()), workers
    assert {worker for on in workers.values() for worker in on} == {"gw0", "gw1"}  # both workers had work
