"""Fixtures of the pre-training tests: a small text corpus, a fresh ``KDGRID_CACHE`` per test (and per name
within a test), and the local SLURM cluster of the launch tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.launch.conftest import slurm_cluster  # noqa: F401  (the fixture, for test_slurm_cluster.py)

SENTENCES = [
    "the cat sat on the mat and looked at the door.",
    "a small dog ran across the field after the ball.",
    "rain fell on the old town all through the night.",
    "she read the letter twice before she put it away.",
]


@pytest.fixture
def corpus(tmp_path: Path) -> str:
    path = tmp_path / "corpus.txt"
    path.write_text("\n\n".join(SENTENCES[i % 4] + " " + SENTENCES[(i + 1) % 4] for i in range(60)))
    return str(path)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """Point KDGRID_CACHE at a fresh folder per name (two runs of one recipe need two caches)."""

    def use(name: str) -> Path:
        folder = tmp_path / name
        monkeypatch.setenv("KDGRID_CACHE", str(folder))
        return folder

    use("cache")
    return use
