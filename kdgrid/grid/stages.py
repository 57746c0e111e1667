"""Chains of trials: a trial whose teacher is another trial's trained student, and the stages they run in.

Teacher assistants (Mirzadeh et al., "Improved Knowledge Distillation via Teacher Assistant", AAAI 2020): a large
teacher distils into a mid-sized assistant, and the assistant's trained student teaches the small student. In a
sweep file the dependant's ``teacher`` names a study of the same sweep, ``study:<name>`` (docs/sweeps.md,
"Chains"): the dependant is made once per trial of that study, each with ``teacher: trial:<its id>``
(`kdgrid.trial.trained_teacher`), so its id includes its assistant's id and never a path. With ``seeds: N`` the
k-th seed of a dependant learns from the k-th seed of its assistant. ``trial:<id>`` may also be written directly;
the id must be a trial of the sweep. Chains may be longer (a study whose teacher is a dependant study).

Expansion (`resolve_references`) refuses, each with one message: a study that is not in the sweep, a trial id
that is not, studies whose teachers form a cycle, an assistant on another task or another kind of task
(regression against classification), and a width the dependant cannot match (``projection: none`` with a
knowledge that compares at the teacher's width); the trial rules then judge the dependant against the
assistant's student shape (`kdgrid.core.model.trained_teacher.declare_planned`), e.g. ``init: preload`` into another
width.

A trial may also *start from* another trial's trained student: ``init_from: study:<name>`` (or ``trial:<id>``),
resolved the same way, seed to seed, into ``init_from: trial:<id>`` (`kdgrid.trial.init_source_id`). That is how
MOHAWK's stages chain (docs/ssm.md): each stage's student starts where the stage before left it. Such a source
must be on the same task with the same student (its weights load into the dependant's model as they are).

Running: a dependant's teacher differs from its assistant's (it is part of the group key), and a trial that
starts from another's has that trial in its group key (`kdgrid.trial.group_fields`), so planning never puts the
two in one job; `job_stages` orders the jobs into stages, each after every stage its sources are in.
"""

from __future__ import annotations

import dataclasses
import graphlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kdgrid.core.data import get_task
from kdgrid.core.model.shapes import is_ssm_name, student_shape
from kdgrid.core.model.trained_teacher import declare_planned
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.grid.memory_estimate import projected_knowledge
from kdgrid.suggest import did_you_mean
from kdgrid.trial import DATA_SEED, Trial, assistant_id, source_trial_ids, trained_teacher

STUDY_PREFIX = "study:"
BOTH_NAMED = "a trial may name one other trial of its sweep, as its teacher or as its init_from, not both"

Job = list[Trial]


def study_reference(teacher: str) -> str | None:
    """The study a ``teacher`` value names (``study:<name>``), else None."""
    return teacher[len(STUDY_PREFIX) :].strip() if teacher.startswith(STUDY_PREFIX) else None


def _names_trial(value: str | None) -> bool:
    return value is not None and (study_reference(value) is not None or assistant_id(value) is not None)


def referring_field(trial: Trial) -> str | None:
    """The field of ``trial`` that names another trial of its sweep (``study:`` or ``trial:``): ``teacher`` (a
    teacher assistant) or ``init_from`` (a student that starts from another's), else None."""
    if _names_trial(trial.teacher):
        return "teacher"
    return "init_from" if _names_trial(trial.init_from) else None


def is_reference(trial: Trial) -> bool:
    """Whether ``trial``'s teacher or initialisation names another trial of its sweep (``study:`` or
    ``trial:``)."""
    return referring_field(trial) is not None


@dataclass(frozen=True)
class Reference:
    """A grid point whose teacher names a study or a trial of the sweep, before it is resolved."""

    point: Trial
    study: str
    where: str


def _seed_offset(trial: Trial) -> int:
    """Which of a cell's ``seeds: N`` a trial is (0 for the first, or without ``seeds``)."""
    data_seed = trial.option(DATA_SEED)
    return 0 if data_seed is None else trial.seed - int(data_seed)


def assistant_problems(dependant: Trial, assistant: Trial) -> list[str]:
    """Why ``assistant``'s trained student cannot teach ``dependant`` (empty when it can): another kind of task
    (regression against classification), another task, a width the dependant cannot reach."""
    try:
        mine, theirs = get_task(dependant.task), get_task(assistant.task)
    except KdgridError as error:
        return [str(error)]
    name = f"assistant trial {assistant.trial_id} ({assistant.student} on {assistant.task})"
    if mine.is_regression != theirs.is_regression:
        kinds = {True: "regression", False: "classification"}
        return [
            f"{name} is a {kinds[theirs.is_regression]} model; task {dependant.task} is "
            f"{kinds[mine.is_regression]}: a teacher assistant must be trained on the dependant's task"
        ]
    if mine.name != theirs.name:
        return [f"{name} was trained on {assistant.task}, not {dependant.task}: a teacher assistant must be "
                "trained on the dependant's task"]  # fmt: skip
    student, teacher = student_shape(dependant.student), student_shape(assistant.student)
    if is_ssm_name(teacher.name):
        return [f"{name} is an SSM student: kdgrid's teachers are BERTs (an SSM student cannot teach yet)"]
    needs_width = sorted(name for name in set(dependant.knowledge) if projected_knowledge(name))
    if dependant.projection == "none" and needs_width and student.width != teacher.width:
        return [
            f"{name} has width {teacher.width}, the student {dependant.student} {student.width}: knowledge "
            f"{', '.join(needs_width)} compares at the teacher's width and projection is 'none'; use projection "
            "'linear' or 'mlp', or an assistant of width " + str(student.width)
        ]
    return []


def init_source_problems(dependant: Trial, source: Trial) -> list[str]:
    """Why ``dependant`` cannot start from ``source``'s trained student (empty when it can): another task, or
    another student (the saved weights load into the dependant's model as they are)."""
    name = f"init_from trial {source.trial_id} ({source.student} on {source.task})"
    if dependant.task != source.task:
        return [f"{name} was trained on {source.task}, not {dependant.task}: a student continues on its own task"]
    if dependant.student != source.student:
        return [f"{name} is another student than {dependant.student}: a student starts from a trained student of "
                "its own shape"]  # fmt: skip
    return []


def resolve_references(
    references: Sequence[Reference],
    resolved: Sequence[tuple[Trial, str]],
    *,
    studies: Sequence[str],
    seeds: int | None,
    add_problem: Callable[[str, str], None],
    trial_problems: Callable[[Trial], list[str]],
    seed_variants: Callable[[Trial, int | None], list[Trial]],
) -> list[tuple[Trial, str]]:
    """The trials that ``references`` (grid points whose teacher or init_from names a study or a trial) make,
    in study order
    along the chains, each with its study. ``resolved`` are the sweep's other trials (with their studies);
    ``add_problem(where, message)`` records each problem; ``trial_problems`` are the trial rules, run once each
    assistant's shape is declared (`kdgrid.core.model.trained_teacher.declare_planned`); ``seed_variants`` is the
    sweep's ``seeds: N`` expansion."""
    by_study: dict[str, list[Trial]] = {name: [] for name in studies}
    for trial, study in resolved:
        by_study[study].append(trial)
    # which study waits for which: a study's `study:` references (a `trial:` one is placed once all are made)
    graph: dict[str, set[str]] = {}
    def named_value(point: Trial) -> tuple[str, str]:
        field = referring_field(point)
        assert field is not None
        return field, getattr(point, field)

    for ref in references:
        field, value = named_value(ref.point)
        named = study_reference(value)
        if named is None:
            continue
        if named not in by_study:
            add_problem(ref.where, f"{field} {value!r}: no study {named!r} in this sweep; studies: "
                        f"{', '.join(studies)}{did_you_mean(named, studies)}")  # fmt: skip
            continue
        graph.setdefault(ref.study, set()).add(named)
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        cycle = " -> ".join(error.args[1][::-1])
        add_problem("studies", f"the teachers of studies {cycle} form a cycle (each study's teacher is `study:` "
                    "the next one): a chain must start at a teacher that is not a trial of the sweep")  # fmt: skip
        return []
    rank = {study: index for index, study in enumerate(order)}
    made: list[tuple[Trial, str]] = []
    seen = {trial.trial_id for trial, _ in resolved}

    def add(trial: Trial, study: str, where: str, assistant: Trial) -> None:
        if _names_trial(trial.teacher) and _names_trial(trial.init_from):
            what, messages = "init_from", [BOTH_NAMED]
        elif referring_field(trial) == "teacher":
            declare_planned(assistant.trial_id, student_shape(assistant.student), assistant.task)
            what, messages = "teacher assistant", assistant_problems(trial, assistant)
        else:
            what, messages = "init_from", init_source_problems(trial, assistant)
        messages = messages or trial_problems(trial)
        for message in messages:
            add_problem(f"{where}: {what} {assistant.trial_id}", message)
        if messages or trial.trial_id in seen:
            return
        seen.add(trial.trial_id)
        made.append((trial, study))
        by_study[study].append(trial)

    study_refs = [r for r in references if study_reference(named_value(r.point)[1]) in by_study]
    for ref in sorted(study_refs, key=lambda r: rank.get(r.study, -1)):
        field, value = named_value(ref.point)
        named = study_reference(value)
        assert named is not None
        assistants = list(by_study[named])
        if not assistants:
            add_problem(ref.where, f"{field} 'study:{named}': study {named!r} has no trials to learn from")
        for assistant in assistants:
            point = dataclasses.replace(ref.point, **{field: trained_teacher(assistant.trial_id)})
            for trial in seed_variants(point, seeds):
                if _seed_offset(trial) == _seed_offset(assistant):  # the k-th seed learns from the k-th seed
                    add(trial, ref.study, ref.where, assistant)
    every = {trial.trial_id: trial for trials in by_study.values() for trial in trials}
    for ref in references:
        field, value = named_value(ref.point)
        wanted = assistant_id(value)
        if wanted is None:
            continue
        if wanted not in every:
            add_problem(ref.where, f"{field} {value!r}: trial {wanted} is not a trial of this sweep (a trial "
                        "learnt from must be trained by the same sweep; name its study as "
                        "`study:<name>`)")  # fmt: skip
            continue
        for trial in seed_variants(ref.point, seeds):
            add(trial, ref.study, ref.where, every[wanted])
    return made


# ------------------------------------------------------------------------------------------------ running order


def dependencies(trials: Iterable[Trial]) -> dict[str, tuple[str, ...]]:
    """``{dependant id: source ids}`` of the trials that need other trials' students: as their teacher (a
    teacher assistant) or to start from (``init_from: trial:<id>``)."""
    return {t.trial_id: sources for t in trials if (sources := source_trial_ids(t))}


def without_assistant_teachers(trials: Iterable[Trial]) -> list[Trial]:
    """The trials whose teacher is not another trial's student: those a pre-flight can check against their
    teacher on this machine (a dependant's teacher is checked when its job starts, after its assistant)."""
    return [trial for trial in trials if assistant_id(trial.teacher) is None]


def assistant_ids(trials: Iterable[Trial]) -> set[str]:
    """The ids of the trials some trial of ``trials`` learns from or starts from: their students are kept."""
    return {source for sources in dependencies(trials).values() for source in sources}


def job_stages(jobs: Sequence[Job]) -> list[list[Job]]:
    """``jobs`` in stages: stage 0 holds the jobs that need no trained student of a trial among ``jobs`` (as
    teacher or init_from; sources done already count as such), and each later stage the jobs whose sources are
    all in earlier stages. Without any
    chain, one stage holding every job in its order. Job order is kept within a stage.

    Raises:
        ConfigError: a job holding a trial and its assistant (planning never makes one), or a cycle.
    """
    job_of: dict[str, int] = {}
    for index, job in enumerate(jobs):
        for trial in job:
            job_of[trial.trial_id] = index
    graph: dict[int, set[int]] = {index: set() for index in range(len(jobs))}
    for index, job in enumerate(jobs):
        for trial in job:
            for assistant in source_trial_ids(trial):
                if assistant not in job_of:
                    continue
                if job_of[assistant] == index:
                    raise ConfigError(f"trial {trial.trial_id} and its source trial {assistant} are in one job")
                graph[index].add(job_of[assistant])
    sorter = graphlib.TopologicalSorter(graph)
    try:
        sorter.prepare()
    except graphlib.CycleError as error:
        raise ConfigError(f"jobs {' -> '.join(map(str, error.args[1]))} depend on each other in a cycle") from None
    stage_of: dict[int, int] = {}
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        for index in ready:
            stage_of[index] = 1 + max((stage_of[a] for a in graph[index]), default=-1)
        sorter.done(*ready)
    stages: list[list[Job]] = [[] for _ in range(1 + max(stage_of.values(), default=-1))]
    for index, job in enumerate(jobs):
        stages[stage_of[index]].append(job)
    return stages


def stage_summary(stages: Sequence[Sequence[Job]], study_of: Mapping[str, str]) -> list[str]:
    """One line per stage for `kdgrid plan`: its jobs, trials and studies."""
    lines = []
    for number, stage in enumerate(stages, start=1):
        trials = [trial for job in stage for trial in job]
        studies = sorted({study_of.get(t.trial_id, "") for t in trials} - {""})
        lines.append(f"stage {number}: {len(stage)} job(s), {len(trials)} trial(s)"
                     + (f" ({', '.join(studies)})" if studies else ""))  # fmt: skip
    return lines
