"""Fixtures shared by the test folders: tiny random teachers saved as local directories; and, with
pytest-xdist, how ``pytest -n 2`` groups the tests between its workers (`tests.xdist_groups`).

Helpers that are not fixtures live in modules of the `tests` package (`tests.teachers`,
`tests.analysis.tables_testing`) and are imported by their full name.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.xdist_groups import XdistGroups, one_torch_thread_per_worker

if TYPE_CHECKING:
    from kdgrid.core.model.teacher_cache import TeacherRecord

pytest_plugins = ["pytester"]  # tests/test_xdist_groups.py runs a small suite of its own


# The user's kdgrid cache as the process started (before any fixture changed it): where the polarity teacher is kept.
USER_CACHE = os.environ.get("KDGRID_CACHE")


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistGroups(), "kdgrid-xdist-groups")


def pytest_runtest_setup(item: pytest.Item) -> None:
    one_torch_thread_per_worker(item.config)


@pytest.fixture(autouse=True)
def _sigterm_handler_restored() -> Iterator[None]:
    """Put back this process's SIGTERM handler after each test: a requeue test calls code that ignores SIGTERM
    (`kdgrid.launch.slurm.shield_requeue_from_sigterm`), and every later child process would inherit that."""
    handler = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, handler)


@pytest.fixture(scope="module")
def teacher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A random BERT teacher (3 layers, width 64, 4 heads) with the MiniLM tokenizer, saved as a local directory.

    For the module using it, ``KDGRID_CACHE`` points at a fresh temporary folder (tokenized data and teacher
    checks never touch the user's cache) and torch uses one thread (results are reproducible bit for bit).
    """
    # torch and transformers cost seconds to import: only the modules that ask for a teacher pay for them.
    import torch

    from tests.teachers import SMALL_TEACHER_SHAPE, save_random_teacher

    root = tmp_path_factory.mktemp("teacher")
    patch = pytest.MonkeyPatch()
    patch.setenv("KDGRID_CACHE", str(root / "cache"))
    path = save_random_teacher(root / "teacher", SMALL_TEACHER_SHAPE)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield path
    torch.set_num_threads(threads)
    patch.undo()


@pytest.fixture(scope="session")
def tiny_teacher(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A random BERT teacher (2 layers, width 32, 2 heads) with the MiniLM tokenizer, saved as a local directory
    that SLURM tasks and Ray actors load by path."""
    from tests.teachers import TINY_TEACHER_SHAPE, save_random_teacher

    return save_random_teacher(tmp_path_factory.mktemp("tiny-teacher") / "teacher", TINY_TEACHER_SHAPE)


@pytest.fixture(scope="session")
def finetuned_polarity_teacher() -> TeacherRecord:
    """The offline MiniLM fine-tuned on the polarity corpus with the default recipe, as `kdgrid demo` makes it: made
    once (3 epochs, minutes on 2 threads) in the user's kdgrid cache, where the demo and a rerun find it. The tests
    using it share one xdist worker (tests/xdist_groups.py), so a run of the suite makes it at most once."""
    import torch

    from kdgrid.core.model.teacher_cache import TeacherRecipe
    from kdgrid.core.teacher.finetune import finetune_teacher

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.MonkeyPatch.context() as patch:
            if USER_CACHE is None:
                patch.delenv("KDGRID_CACHE", raising=False)
            else:
                patch.setenv("KDGRID_CACHE", USER_CACHE)
            return finetune_teacher("polarity", "minilm-l6", TeacherRecipe())
    finally:
        torch.set_num_threads(threads)


@pytest.fixture
def deterministic_torch() -> Iterator[None]:
    """One torch thread and deterministic algorithms for the test (bit-for-bit comparisons of two runs), restored
    after it."""
    import torch  # only the tests that ask for it pay for importing torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(False)
    torch.set_num_threads(threads)
