"""On the offline assets, the paper's Table 1 in miniature: a BERT-tiny general-distilled from the MiniLM (its
base weights, `minilm-l6`) on the polarity corpus's sentences, then distilled on polarity from the fine-tuned
MiniLM teacher, against the same student from random init. The general-distilled student must score better.

Slow (minutes on 2 CPU cores). The fine-tuned polarity teacher is the one `kdgrid demo` and
tests/core/test_polarity_slow.py use (made once, in the usual kdgrid cache); the general-distillation checkpoint
is made here, through a sweep's route (``init_recipe`` naming a recipe file), in a temporary kdgrid cache.

Measured (2 shared CPU cores; polarity dev accuracy on 1,000 sentences, about +-1.4 points of noise; both task
students in one job, task lr 1e-3): random init 0.711; general distillation for 160 steps with masked LM +
MiniLMv2's q/k/v relations of the last layer at lr 2e-3 (this test's recipe) 0.692 (also worse at task lr 3e-4:
0.655 vs 0.672, and 1e-4: 0.575 vs 0.593); with masked LM + TinyBERT's embedding and hidden-state MSE on both
student layers (Dilatation, linear projection) at lr 1e-3, beta 1: 0.699 (beta 20: its task stage was not
measured). General distillation took about 3.5 CPU-minutes, the task stage about 8. No objective tried beats
random init at this budget, so the test is a strict expected failure: it runs and states the goal, and the day a
recipe makes it pass, pytest says so (README, "General distillation").
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import yaml

from kdgrid import assets
from kdgrid.core.teacher import finetune_teacher
from kdgrid.core.teacher_cache import TeacherRecipe
from kdgrid.pretrain import artifacts
from kdgrid.pretrain.needed import recipe_for_trial
from kdgrid.pretrain.train import RunSettings, run_pretrain
from kdgrid.trial import Trial

pytestmark = pytest.mark.slow

# The user's kdgrid cache as the process started (before any fixture changed it): where the teacher is kept.
USER_CACHE = os.environ.get("KDGRID_CACHE")

# General distillation, small enough for CPU: 160 steps of 16 blocks of 64 tokens (~160k tokens, ~3 passes over
# the corpus), the bundled `offline` recipe's objective (masked LM + MiniLMv2's q/k/v relations of the last
# layer) at a higher learning rate.
RECIPE = {
    "teacher": "minilm-l6",
    "corpus": "polarity",
    "steps": 160,
    "global_batch": 16,
    "block_length": 64,
    "lr": 2.0e-3,
    "warmup_ratio": 0.05,
}
# Task distillation on polarity: Table 1's setting (soft labels only), the demo's optimisation.
TASK = {"batch_size": 32, "max_length": 64, "epochs": 3, "lr": 1e-3, "max_train_samples": 2000}


@pytest.fixture
def teacher_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The fine-tuned polarity teacher from the user's kdgrid cache (made there once, as the demo makes it); then
    KDGRID_CACHE points at a fresh folder holding only a link to the polarity corpus, so the general-distillation
    artifact never lands in the user's cache. (The package's autouse `cache` fixture has already pointed
    KDGRID_CACHE at a per-test folder: the user's setting, read at import, is put back first.)"""
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
    (cache / assets.polarity_dir().name).symlink_to(polarity, target_is_directory=True)
    monkeypatch.setenv("KDGRID_CACHE", str(cache))
    yield teacher.path
    torch.set_num_threads(threads)


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,  # only the comparison's failure is expected; any other error fails the test
    reason="at a CPU budget (160 steps, ~160k tokens) no general-distillation recipe tried beats random init; "
    "see the docstring's numbers",
)
def test_general_distilled_student_beats_random_init_on_polarity(teacher_dir: Path, tmp_path: Path) -> None:
    from kdgrid.core.train import run_job

    recipe_file = tmp_path / "tiny_gd.yaml"
    recipe_file.write_text(yaml.safe_dump(RECIPE))
    common = dict(task="polarity", teacher=str(teacher_dir), student="bert-tiny", **TASK)
    random = Trial(**common, init="random")  # type: ignore[arg-type]
    general = Trial(**common, init="general_distillation", options={"init_recipe": str(recipe_file)})  # type: ignore[arg-type]
    use = recipe_for_trial(general)
    assert use is not None and use.recipe.teacher == "minilm-l6"
    made = run_pretrain(use.recipe, RunSettings(micro_batch=16, checkpoint_every=10**6, progress=False))
    assert made.finished and artifacts.exists(use.recipe)
    first, last = made.history[0]["mlm"], made.history[-1]["mlm"]
    assert last < first - 1.0, f"masked-LM loss {first:.2f} -> {last:.2f}"

    from_random, from_general = run_job([random, general], device="cpu")  # one teacher pass per batch
    assert from_random.status == from_general.status == "done"
    assert from_general.extra["init_recipe"] == {"name": str(recipe_file), "key": use.recipe.key}
    random_acc = from_random.scores["validation"]["accuracy"]
    general_acc = from_general.scores["validation"]["accuracy"]
    print(f"polarity dev accuracy: random init {random_acc:.4f}; general distillation {general_acc:.4f}")
    assert general_acc > random_acc
