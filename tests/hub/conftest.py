"""The Hub-shaped offline cache of `hub_cache`, built once per session, and the offline switch for a test.

``small_hub`` holds the MRPC, MNLI and STS-B BERT-base teachers, BERT-tiny's compact BERT and those three GLUE
configs (built in a few seconds, for the fast tests); ``paper_hub`` holds every repo and all 8 GLUE configs (slow
tests). ``use_hub(root)`` points the libraries at a cache for one test: the environment variables (read by
subprocesses and by kdgrid's own offline check) and the constants `huggingface_hub` and `datasets` read from
them at import time, which an in-process test must patch because both libraries are already imported.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import datasets
import huggingface_hub.constants
import pytest

from tests.hub.hub_cache import build_hub_cache, offline_environment

SMALL_REPOS = (
    "textattack/bert-base-uncased-MRPC",
    "textattack/bert-base-uncased-STS-B",
    "ishan/bert-base-uncased-mnli",
    "google/bert_uncased_L-2_H-128_A-2",
)
SMALL_CONFIGS = ("mrpc", "mnli", "stsb")


@pytest.fixture(scope="session")
def small_hub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_hub_cache(
        tmp_path_factory.mktemp("small_hub"), repo_ids=SMALL_REPOS, glue_configs=SMALL_CONFIGS
    )


@pytest.fixture(scope="session")
def paper_hub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_hub_cache(tmp_path_factory.mktemp("paper_hub"))


@pytest.fixture
def use_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[Path], dict[str, str]]:
    """``use_hub(root)`` makes this test read ``root`` offline (kdgrid's own cache in ``tmp_path``); returns the
    environment a subprocess needs."""

    def switch(root: Path) -> dict[str, str]:
        env = {**offline_environment(root), "KDGRID_CACHE": str(tmp_path / "kdgrid-cache")}
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", env["HF_HUB_CACHE"])
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
        monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
        monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", Path(env["HF_DATASETS_CACHE"]))
        return env

    return switch
