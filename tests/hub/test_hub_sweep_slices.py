"""The sliced paper sweeps (`tests.hub.paper_sweeps`) are the paper's files with fewer axis values: every table's
sweep is sliced, they load as sweeps of the same name, a few trials each on tiny subsets, and together they use
all 8 GLUE tasks, both teachers and every initialisation scheme."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kdgrid.core.data.glue import GLUE_TASKS
from kdgrid.grid import load_sweep
from kdgrid.paper import PAPER_INITS
from tests.hub.paper_sweeps import PRELOAD_STUDENTS, QUICK, SLICES, SWEEPS_DIR, write_sliced_sweep

Switch = Callable[[Path], dict[str, str]]


def test_every_paper_sweep_is_sliced() -> None:
    assert sorted(s.file for s in SLICES.values()) == sorted(p.name for p in SWEEPS_DIR.glob("table*.yaml"))
    assert sorted(s.table for s in SLICES.values()) == [str(n) for n in range(1, 9)]


@pytest.mark.slow
def test_slices_are_small_runs_of_the_papers_sweeps(paper_hub: Path, use_hub: Switch, tmp_path: Path) -> None:
    """Slow only for the fixture: Table 1's pre-load students have the fixture teacher's width, which a sweep
    checks against the teacher's shape."""
    # The paper's files as they are, read with the shapes declared for its teachers (no Hub cache yet); the
    # slices through the fixture, whose BERT-base is narrow.
    fulls = {piece.file: load_sweep(SWEEPS_DIR / piece.file) for piece in SLICES.values()}
    use_hub(paper_hub)
    tasks, teachers, inits = set(), set(), set()
    for piece in SLICES.values():
        full = fulls[piece.file]
        sliced = load_sweep(write_sliced_sweep(piece, tmp_path / piece.name))
        assert sliced.name == full.name and list(sliced.studies) == list(full.studies)
        assert 2 <= len(sliced.trials) <= 8, piece.file
        for planned in sliced.trials:
            trial = planned.trial
            assert {k: getattr(trial, k) for k in QUICK} == QUICK
            tasks.add(trial.task)
            teachers.add(trial.teacher)
            inits.add(trial.init)
            if trial.init == "preload":
                assert trial.student in PRELOAD_STUDENTS.values()
    assert tasks == set(GLUE_TASKS) and teachers == {"bert-base", "bert-large"} and inits == set(PAPER_INITS)
