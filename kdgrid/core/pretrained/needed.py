"""Which pre-training checkpoints a sweep needs: each trial with the option ``init_recipe`` starts from the
artifact of one `PretrainRecipe` (`kdgrid.core.pretrained.artifacts`), its recipe file completed by the trial.

How a trial completes a recipe file (`recipe_for_trial`):

- ``student``: the trial's student shape (a recipe file must not name one);
- ``teacher``: for ``init: general_distillation``, the file's ``teacher`` if it names one, else the pre-trained
  base of the trial's teacher (`general_distillation_teacher`: ``bert-base`` and its fine-tuned task copies ->
  ``bert-base-uncased``, so every task of a shape shares one checkpoint, as in the paper); for ``init: pretrain``,
  none (the same file without a teacher is plain masked-LM pre-training).

`kdgrid plan` lists these checkpoints, present or missing, with the command that makes each
(`kdgrid.core.pretrained.recipe.PretrainRecipe.command`); `kdgrid run` refuses while any is missing (`kdgrid.preflight.local.check_init_checkpoints`), or with
``--make-checkpoints`` makes them first (`kdgrid.pretrain.checkpoint_grid`).
Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kdgrid.core.model.shapes import TEACHERS
from kdgrid.core.model.teacher_cache import MINILM_ALIAS
from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.core.pretrained.recipe_names import INIT_RECIPE, allowed_recipes, recipe_path
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial

# The init schemes that can start from a recipe's checkpoint, and the objective each asks of the recipe.
RECIPE_OBJECTIVES = {"general_distillation": "general_distillation", "pretrain": "pretrain"}
# The trial completes these; a recipe file for sweeps must leave them out.
TRIAL_FIELDS = ("student", "objective")
# `kdgrid run`'s option that makes the missing checkpoints first, and what it does (for the messages here).
MAKE_CHECKPOINTS_OPTION = "--make-checkpoints"
MAKE_CHECKPOINTS_WHAT = (
    "makes the missing ones first, one job each through the run's executor, then runs the trials"
)
# The pre-trained (not task-fine-tuned) weights of each paper teacher family: what general distillation reads.
PRETRAINED_BASES = {"bert-base": "bert-base-uncased", "bert-large": "bert-large-uncased"}


def general_distillation_teacher(teacher: str) -> str:
    """The teacher a trial's general-distillation checkpoint is distilled from: a paper teacher family
    (``bert-base``) or any of its fine-tuned task teachers -> its pre-trained base (`PRETRAINED_BASES`);
    ``minilm-l6`` (its base weights) and any other teacher -> itself."""
    if teacher in PRETRAINED_BASES or teacher == MINILM_ALIAS:
        return PRETRAINED_BASES.get(teacher, teacher)
    for family, table in TEACHERS.items():
        if any(spec.hub_name == teacher for spec in table.values()):
            return PRETRAINED_BASES[family]
    return teacher


def read_recipe_fields(name: str) -> tuple[Path, dict[str, Any]]:
    """The file a recipe name stands for and its fields; `ConfigError` for an unknown name, a file that is not
    one mapping, or a file naming what the trial completes (``student``, ``objective``)."""
    path = recipe_path(name)
    if path is None:
        raise ConfigError(f"{INIT_RECIPE} {name!r} names no recipe; allowed: {allowed_recipes()}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise ConfigError(f"{INIT_RECIPE} {name!r}: {path} cannot be read: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{INIT_RECIPE} {name!r}: {path} must hold one mapping of recipe fields")
    named = [key for key in TRIAL_FIELDS if key in data]
    if named:
        raise ConfigError(
            f"{INIT_RECIPE} {name!r}: {path} sets {named}, which a sweep's trial gives (its student and init); "
            "leave them out of the recipe file"
        )
    return path, data


@dataclass(frozen=True)
class RecipeUse:
    """A trial's recipe: the name it gave, the file, the recipe completed by the trial."""

    name: str
    path: Path
    recipe: PretrainRecipe


def recipe_for_trial(trial: Trial) -> RecipeUse | None:
    """The recipe whose checkpoint ``trial`` starts from (None without ``init_recipe``).

    Raises:
        ConfigError: ``init_recipe`` with an init scheme other than general_distillation / pretrain, together
            with ``init_from``, an unknown recipe, or a recipe that does not fit the trial (its message).
    """
    name = trial.option(INIT_RECIPE)
    if name is None:
        return None
    if trial.init not in RECIPE_OBJECTIVES:
        raise ConfigError(
            f"{INIT_RECIPE} goes with init {' or '.join(RECIPE_OBJECTIVES)}, not init {trial.init!r}"
        )
    if trial.init_from:
        raise ConfigError(
            f"init_from {trial.init_from!r} and {INIT_RECIPE} {name!r} both name the checkpoint; keep one"
        )
    path, fields = read_recipe_fields(str(name))
    if trial.init == "general_distillation":
        fields.setdefault("teacher", general_distillation_teacher(trial.teacher))
    elif fields.get("teacher") is not None:
        raise ConfigError(
            f"{INIT_RECIPE} {name!r} names teacher {fields['teacher']!r}: a general-distillation recipe; "
            "use it with init general_distillation (init pretrain takes a recipe without a teacher)"
        )
    return RecipeUse(str(name), path, PretrainRecipe.from_dict({**fields, "student": trial.student}))


@dataclass(frozen=True)
class NeededCheckpoint:
    """One checkpoint a sweep needs: its recipe, where it is (or will be), whether it is there, how to make it,
    and how many trials start from it."""

    use: RecipeUse
    path: Path
    present: bool
    command: str
    trials: int

    @property
    def key(self) -> str:
        return self.use.recipe.key

    def describe(self) -> str:
        """``general_distillation of w128-l2-h2-f512 from bert-base-uncased (recipe paper, key ...)``."""
        recipe = self.use.recipe
        source = f" from {recipe.teacher}" if recipe.teacher else ""
        return f"{recipe.objective} of {recipe.student}{source} (recipe {self.use.name}, key {recipe.key})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "recipe": self.use.name,
            "objective": self.use.recipe.objective,
            "student": self.use.recipe.student,
            "teacher": self.use.recipe.teacher,
            "path": str(self.path),
            "present": self.present,
            "command": self.command,
            "trials": self.trials,
        }


def needed_checkpoints(trials: Iterable[Trial]) -> list[NeededCheckpoint]:
    """Every recipe checkpoint the trials start from, once each, in the order of the first trial needing it."""
    uses: dict[str, RecipeUse] = {}
    counts: dict[str, int] = {}
    for trial in trials:
        use = recipe_for_trial(trial)
        if use is None:
            continue
        key = use.recipe.key
        uses.setdefault(key, use)
        counts[key] = counts.get(key, 0) + 1
    return [
        NeededCheckpoint(
            use,
            artifacts.artifact_dir(use.recipe),
            artifacts.exists(use.recipe),
            use.recipe.command(),
            counts[key],
        )
        for key, use in uses.items()
    ]


def missing_message(missing: list[NeededCheckpoint]) -> str:
    """One message naming each missing checkpoint and the command that makes it."""
    lines = [
        f"{len(missing)} pre-training checkpoint(s) of {INIT_RECIPE} missing; make each with its command "
        "(one job per student shape; they can run side by side), then run again:"
    ]
    for needed in missing:
        lines.append(f"  {needed.describe()}, for {needed.trials} trial(s):\n    {needed.command}")
    lines.append(f"or run again with {MAKE_CHECKPOINTS_OPTION}: {MAKE_CHECKPOINTS_WHAT}")
    return "\n".join(lines)


def listing(needed: list[NeededCheckpoint]) -> list[str]:
    """The lines `kdgrid plan` prints: a count, then each checkpoint present (its folder) or missing (its
    command)."""
    if not needed:
        return []
    missing = sum(not n.present for n in needed)
    lines = [f"pre-training checkpoints ({INIT_RECIPE}): {len(needed) - missing} present, {missing} to make"]
    for n in needed:
        if n.present:
            lines.append(f"  present  {n.describe()}: {n.path}")
        else:
            lines.append(
                f"  missing  {n.describe()}, for {n.trials} trial(s); make it with:\n    {n.command}"
            )
    if missing:
        lines.append(f"  or: kdgrid run {MAKE_CHECKPOINTS_OPTION} {MAKE_CHECKPOINTS_WHAT}")
    return lines
