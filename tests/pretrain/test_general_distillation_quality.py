"""On the offline assets, the paper's Table 1 in miniature: a BERT-tiny general-distilled from the offline MiniLM
(its base weights, `minilm-l6`) with the bundled `offline` recipe, then distilled on polarity from the MiniLM
fine-tuned on polarity, against the same student from random init. The general-distilled student must be better,
by a difference kdgrid's own paired bootstrap test calls real.

Slow (161 s on 2 idle CPU cores: the general distillation ~1.5 minutes, the task stage ~1). The trials are what an
offline sweep writes (teacher ``minilm-l6``, ``init_recipe: offline``); the fine-tuned teacher is the one `kdgrid
demo` makes (made once, in the user's kdgrid cache, and linked into this test's cache), the general-distillation
checkpoint is made here, in a temporary kdgrid cache.

The task stage is Table 1's setting (soft labels, hard-label weight 0.1, 3 epochs, batch 32) at lr 3e-4, for
two student seeds of each init sharing one data order (a paired design, docs/seeds.md). The measured numbers and
the other settings tried (task lr 1e-3 and 1e-4, other recipes) are in docs/pretrain.md, "Quality on the offline assets".
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from kdgrid import assets
from kdgrid.analysis.stats import paired_bootstrap_test
from kdgrid.core.model.teacher_cache import TeacherRecipe
from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.needed import recipe_for_trial
from kdgrid.core.teacher.finetune import finetune_teacher
from kdgrid.core.training.train import run_job
from kdgrid.pretrain.train import RunSettings, run_pretrain
from kdgrid.trial import Trial

# Slow; and with the tests that share the fine-tuned polarity teacher (tests/xdist_groups.py): it fine-tunes the same
# teacher into the user's cache, which two workers must not do at once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("polarity-teacher")]

# The user's kdgrid cache as the process started (before any fixture changed it): where the teacher is kept.
USER_CACHE = os.environ.get("KDGRID_CACHE")
SEEDS = (0, 1)
# Table 1's task distillation (soft labels + 0.1 x hard labels, the trial defaults), on 2,000 polarity sentences.
TASK = {"batch_size": 32, "max_length": 64, "epochs": 3, "lr": 3e-4, "max_train_samples": 2000}
MIN_GAIN = 0.02  # accuracy points (as a fraction) the general-distilled students must gain on average
MAX_P_VALUE = 0.05


@pytest.fixture
def offline_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh kdgrid cache holding links to the user's polarity corpus and fine-tuned teachers (the teacher made
    there once, as the demo makes it), so the general-distillation artifact never lands in the user's cache. (The
    package's autouse `cache` fixture has already pointed KDGRID_CACHE at a per-test folder: the user's setting,
    read at import, is put back first.)"""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    if USER_CACHE is None:
        monkeypatch.delenv("KDGRID_CACHE", raising=False)
    else:
        monkeypatch.setenv("KDGRID_CACHE", USER_CACHE)
    polarity = assets.fetch_all()["polarity"]
    teacher = finetune_teacher("polarity", "minilm-l6", TeacherRecipe())
    cache = tmp_path / "general_distillation_cache"
    cache.mkdir()
    (cache / polarity.name).symlink_to(polarity, target_is_directory=True)
    (cache / teacher.path.parent.name).symlink_to(teacher.path.parent, target_is_directory=True)
    monkeypatch.setenv("KDGRID_CACHE", str(cache))
    yield cache
    torch.set_num_threads(threads)


def _trial(init: str, seed: int) -> Trial:
    options: dict[str, object] = {"data_seed": SEEDS[0]}
    if init == "general_distillation":
        options["init_recipe"] = "offline"
    return Trial(
        task="polarity",
        teacher="minilm-l6",
        student="bert-tiny",
        init=init,
        seed=seed,
        options=options,
        **TASK,
    )  # type: ignore[arg-type]


def test_general_distilled_student_beats_random_init_on_polarity(offline_cache: Path) -> None:
    random = [_trial("random", seed) for seed in SEEDS]
    general = [_trial("general_distillation", seed) for seed in SEEDS]
    use = recipe_for_trial(general[0])
    assert use is not None and use.recipe.teacher == "minilm-l6"  # the MiniLM's base, not the task teacher
    made = run_pretrain(use.recipe, RunSettings(micro_batch=16, checkpoint_every=10**6, progress=False))
    assert made.finished and artifacts.exists(use.recipe)
    first, last = made.history[0], made.history[-1]
    for term in use.recipe.knowledge:
        for name in (name for name in first if name.startswith(f"{term}@")):
            assert last[name] < 0.6 * first[name], f"{name}: {first[name]:.3f} -> {last[name]:.3f}"

    results = run_job([*random, *general], device="cpu")  # one teacher pass per batch for all four
    assert [result.status for result in results] == ["done"] * len(results)
    for result in results[len(random) :]:
        assert result.extra["init_recipe"] == {"name": "offline", "key": use.recipe.key}
    accuracy = [result.scores["validation"]["accuracy"] for result in results]
    from_random, from_general = accuracy[: len(random)], accuracy[len(random) :]
    dev = [result.predictions["validation"] for result in results]
    assert len({outcome.fingerprint for outcome in dev}) == 1  # every student scored on the same examples
    test = paired_bootstrap_test(
        "accuracy",
        dev[0].gold,
        np.stack([outcome.student for outcome in dev[len(random) :]]),
        np.stack([outcome.student for outcome in dev[: len(random)]]),
    )
    print(
        f"polarity dev accuracy per seed {SEEDS}: random init {from_random}; general distillation "
        f"{from_general}; difference {test.difference:+.4f} (paired bootstrap p = {test.p_value:.4f})"
    )
    assert all(g > r for g, r in zip(from_general, from_random, strict=True))  # seed by seed
    assert test.difference >= MIN_GAIN
    assert test.p_value < MAX_P_VALUE
