"""The trainer's own check of a job: a trial validated and set up (its shapes, teacher, layer pairs and loss
terms) without loading weights or data. `kdgrid.preflight.local` applies it to every job before a run submits
anything; the core applies it again as each job starts.

The static rules are `kdgrid.core.trial_rules` (the same checks and messages as sweep expansion); here they are
applied with the resolved teacher, and completed by what needs the machine (local checkpoints, `check_init`) and
by the loss terms (`knowledge_terms`: unknown knowledge or option, a projection the trial forbids).
"""

from __future__ import annotations

from dataclasses import dataclass

from kdgrid.core.data import get_task
from kdgrid.core.job.init import check_init
from kdgrid.core.model.shapes import (
    ResolvedTeacher,
    StudentShape,
    check_teacher_config,
    resolve_teacher,
    student_shape,
)
from kdgrid.core.training.objective import Term, knowledge_terms
from kdgrid.core.trial_rules import matched_pairs, trial_problems
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.trial import GROUP_DESCRIPTION, Trial, group_key


@dataclass(frozen=True)
class TrialSetup:
    """A validated trial: its student shape, its teacher, matched layer pairs and knowledge terms."""

    trial: Trial
    shape: StudentShape
    teacher: ResolvedTeacher
    pairs: list[tuple[int, int]]
    terms: list[Term]

    @property
    def used_pairs(self) -> list[tuple[int, int]]:
        """The pairs some knowledge term was applied on, in the strategy's order."""
        used = {term.pair for term in self.terms if term.pair is not None}
        return [pair for pair in self.pairs if pair in used]


def set_up_trial(trial: Trial, teacher: ResolvedTeacher | None = None) -> TrialSetup:
    """Validate one trial without loading weights or data; raises `ConfigError` / `KdgridError` naming the key.

    ``teacher`` (the job's, already resolved) spares resolving it again.
    """
    get_task(trial.task)
    shape = student_shape(trial.student)
    teacher = teacher or resolve_teacher(trial.teacher, trial.task)
    problems = trial_problems(trial, (shape, teacher.shape))
    if problems:
        raise ConfigError("; ".join(problems))
    check_init(trial, shape, teacher)
    pairs = matched_pairs(trial, shape.layers, teacher.shape.layers)
    # (the methods' ``terms`` rules ran in trial_problems, on the terms counted as knowledge_terms builds them)
    terms = knowledge_terms(trial, pairs, shape, teacher.shape) if trial.knowledge else []
    return TrialSetup(trial, shape, teacher, pairs, terms)


def validate_trials(trials: list[Trial]) -> list[TrialSetup]:
    """Validate a whole job before anything trains: the shared group key, the teacher (its config read, from the
    cache or downloaded unless offline: its head must fit the task and its shape the planned one), then every
    trial (all problems in one `ConfigError`, each prefixed by the trial id)."""
    if not trials:
        raise ConfigError("a job needs at least one trial")
    keys = {group_key(t) for t in trials}
    if len(keys) > 1:
        raise ConfigError(
            f"the trials of one job must agree on {GROUP_DESCRIPTION}; found {len(keys)} different groups"
        )
    first = trials[0]
    try:  # the job's one teacher: its config must fit the task (labels, shape); read before any weight loads
        teacher = resolve_teacher(first.teacher, first.task)
        check_teacher_config(teacher, get_task(first.task).num_labels)
    except KdgridError as error:
        raise ConfigError(str(error)) from None
    plans: list[TrialSetup] = []
    problems: list[str] = []
    for trial in trials:
        try:
            plans.append(set_up_trial(trial, teacher))
        except KdgridError as error:
            problems.append(f"trial {trial.trial_id} ({trial.student}, {list(trial.knowledge)}): {error}")
    if problems:
        raise ConfigError("invalid trial(s):\n" + "\n".join(problems))
    return plans
