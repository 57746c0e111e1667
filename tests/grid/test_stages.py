"""Chains of trials in the grid language (teacher assistants): expansion, identity, refusals, stages."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kdgrid.errors import ConfigError
from kdgrid.grid import load_sweep, plan_jobs
from kdgrid.grid.stages import job_stages
from kdgrid.trial import Trial
from tests.commands.test_sweep_commands import as_json, invoke
from tests.sweep_studies import trials_of

CHAIN = """
name: chain
fixed: {task: mrpc, teacher: bert-base, init: random, knowledge: [hidden_mse], strategy: Last}
studies:
  assistant:
    fixed: {student: bert-mini}
  direct:
    fixed: {student: bert-tiny}
  student:
    fixed: {student: bert-tiny, teacher: "study:assistant"}
"""


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def by_study(path: Path) -> dict[str, list[Trial]]:
    sweep = load_sweep(path)
    return {study: trials_of(sweep, study) for study in sweep.studies}


def test_a_dependant_learns_from_the_assistants_trial_by_its_id(tmp_path: Path) -> None:
    studies = by_study(write(tmp_path, CHAIN))
    (assistant,) = studies["assistant"]
    (direct,) = studies["direct"]
    (dependant,) = studies["student"]
    assert dependant.teacher == f"trial:{assistant.trial_id}"
    # the id hashes the assistant's id (never a path): the same trial as written by hand with that teacher
    assert dependant.trial_id == Trial(**{**direct.to_dict(), "teacher": f"trial:{assistant.trial_id}"}).trial_id
    assert dependant.trial_id != direct.trial_id
    # another assistant (another lr) gives another dependant id
    other = by_study(write(tmp_path, CHAIN.replace("{student: bert-mini}", "{student: bert-mini, lr: 0.001}")))
    assert other["student"][0].trial_id != dependant.trial_id
    assert other["direct"][0].trial_id == direct.trial_id


def test_a_trial_id_may_be_named_directly_and_chains_may_be_longer(tmp_path: Path) -> None:
    studies = by_study(write(tmp_path, CHAIN))
    (assistant,) = studies["assistant"]
    text = CHAIN + f"""\
  again:
    fixed: {{student: bert-tiny, teacher: "trial:{assistant.trial_id}", lr: 0.001}}
  third:
    fixed: {{student: w64-l1, teacher: "study:student"}}
"""
    chained = by_study(write(tmp_path, text))
    assert chained["again"][0].teacher == f"trial:{assistant.trial_id}"
    (dependant,) = chained["student"]
    assert chained["third"][0].teacher == f"trial:{dependant.trial_id}"
    jobs = plan_jobs([t for trials in chained.values() for t in trials])
    stages = job_stages(jobs)
    stage_of = {t.trial_id: n for n, stage in enumerate(stages) for job in stage for t in job}
    assert stage_of[assistant.trial_id] == 0 and stage_of[chained["direct"][0].trial_id] == 0
    assert stage_of[dependant.trial_id] == stage_of[chained["again"][0].trial_id] == 1
    assert stage_of[chained["third"][0].trial_id] == 2
    assert len(stages) == 3
    for job in jobs:  # never a dependant in its assistant's job
        ids = {t.trial_id for t in job}
        assert not any(t.teacher.removeprefix("trial:") in ids for t in job)


def test_with_seeds_the_kth_seed_learns_from_the_assistants_kth_seed(tmp_path: Path) -> None:
    studies = by_study(write(tmp_path, "seeds: 3\n" + CHAIN))
    assistants = {t.trial_id: t for t in studies["assistant"]}
    assert len(assistants) == 3 and len(studies["student"]) == 3
    for dependant in studies["student"]:
        assistant = assistants[dependant.teacher.removeprefix("trial:")]
        assert dependant.seed - dependant.option("data_seed") == assistant.seed - assistant.option("data_seed")
    assert len({t.teacher for t in studies["student"]}) == 3


def test_an_axis_may_mix_a_teacher_and_an_assistant(tmp_path: Path) -> None:
    text = CHAIN.replace('fixed: {student: bert-tiny, teacher: "study:assistant"}',
                         'fixed: {student: bert-tiny}\n    axes: {teacher: [bert-base, "study:assistant"]}')  # fmt: skip
    studies = by_study(write(tmp_path, text))
    assert len(studies["student"]) == 1  # the bert-base point is the `direct` study's trial, kept there
    assert studies["student"][0].teacher.startswith("trial:")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ('teacher: "study:asistant"', "no study 'asistant' in this sweep; studies: assistant, direct, student"),
        ('teacher: "trial:0123456789abcdef"', "trial 0123456789abcdef is not a trial of this sweep"),
        ('teacher: "study:student"', "the teachers of studies student -> student form a cycle"),
    ],
)
def test_a_reference_to_nothing_or_to_itself_is_refused(tmp_path: Path, change: str, expected: str) -> None:
    path = write(tmp_path, CHAIN.replace('teacher: "study:assistant"', change))
    with pytest.raises(ConfigError) as raised:
        load_sweep(path)
    assert expected in str(raised.value)
    if "asistant" in change:
        assert "did you mean 'assistant'" in str(raised.value)


def test_studies_teaching_each_other_in_a_cycle_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, """
        fixed: {task: mrpc, init: random}
        studies:
          a: {fixed: {student: bert-mini, teacher: "study:b"}}
          b: {fixed: {student: bert-tiny, teacher: "study:a"}}
          c: {fixed: {student: bert-tiny, teacher: bert-base}}
        """)  # fmt: skip
    with pytest.raises(ConfigError) as raised:
        load_sweep(path)
    message = str(raised.value)
    assert "form a cycle" in message and ("a -> b -> a" in message or "b -> a -> b" in message)


def test_an_assistant_of_another_kind_of_task_is_refused(tmp_path: Path) -> None:
    text = CHAIN.replace("{student: bert-mini}", "{student: bert-mini, task: stsb}")
    with pytest.raises(ConfigError) as raised:
        load_sweep(write(tmp_path, text))
    assert "is a regression model; task mrpc is classification" in str(raised.value)
    text = CHAIN.replace("{student: bert-mini}", "{student: bert-mini, task: rte}")
    with pytest.raises(ConfigError) as raised:
        load_sweep(write(tmp_path, text))
    assert "was trained on rte, not mrpc" in str(raised.value)


def test_a_width_the_student_cannot_match_is_refused(tmp_path: Path) -> None:
    # hidden states compared at the teacher's width (256) from a 128-wide student, with no projection
    text = CHAIN.replace('teacher: "study:assistant"}', 'teacher: "study:assistant", projection: none}')
    with pytest.raises(ConfigError) as raised:
        load_sweep(write(tmp_path, text))
    assert "has width 256, the student bert-tiny 128" in str(raised.value)
    # pre-loading copies the assistant's layers: the trial rules judge against the assistant's shape (256 wide)
    text = CHAIN.replace('{student: bert-tiny, teacher: "study:assistant"}',
                         '{student: bert-tiny, teacher: "study:assistant", init: preload, knowledge: []}')  # fmt: skip
    with pytest.raises(ConfigError) as raised:
        load_sweep(write(tmp_path, text))
    assert "init 'preload'" in str(raised.value) and "256" in str(raised.value)
    # the same student under an assistant of its own width is fine
    text = CHAIN.replace('teacher: "study:assistant"}', 'teacher: "study:assistant", projection: none}')
    text = text.replace("{student: bert-mini}", "{student: w128-l4}")
    assert len(by_study(write(tmp_path, text))["student"]) == 1


def test_plan_shows_the_stages(tmp_path: Path) -> None:
    path = write(tmp_path, "seeds: 2\n" + CHAIN)
    summary = as_json("plan", str(path), "--store", str(tmp_path / "store"))
    assert summary["stages"] == [
        "stage 1: 1 job(s), 4 trial(s) (assistant, direct)",
        "stage 2: 2 job(s), 2 trial(s) (student)",
    ]
    code, output = invoke("plan", str(path), "--store", str(tmp_path / "store"))
    assert code == 0 and "stage 1: 1 job(s), 4 trial(s) (assistant, direct)" in output
    assert "stage 2: 2 job(s), 2 trial(s) (student)" in output


def test_without_a_chain_there_is_one_stage(tmp_path: Path) -> None:
    trials = [t for ts in by_study(write(tmp_path, CHAIN)).values() for t in ts]
    unchained = [t for t in trials if not t.teacher.startswith("trial:")]
    jobs = plan_jobs(unchained)
    assert job_stages(jobs) == [jobs]


STARTS = """
name: starts
fixed: {task: mrpc, teacher: bert-base, init: random, student: ssm-l12-h768-a12}
studies:
  first: {fixed: {soft_weight: 0, alpha: 0, options: {mohawk_stage: 1}}}
  then: {fixed: {init_from: "study:first", options: {mohawk_stage: 3}}, axes: {seed: [0, 1]}}
"""


def test_init_from_a_study_starts_each_seed_from_that_studys_student_and_orders_the_jobs(tmp_path: Path) -> None:
    studies = by_study(write(tmp_path, STARTS.replace("fixed: {soft", "axes: {seed: [0, 1]}, fixed: {soft")))
    first, then = studies["first"], studies["then"]
    assert len(then) == 4  # each 'then' point from each trial of 'first' (no `seeds:`, so no pairing by seed)
    assert {t.init_from for t in then} == {f"trial:{t.trial_id}" for t in first}
    assert all(t.teacher == "bert-base" for t in then)
    stages = job_stages(plan_jobs([*first, *then]))
    assert [sorted(t.trial_id for job in stage for t in job) for stage in stages] == [
        sorted(t.trial_id for t in first),
        sorted(t.trial_id for t in then),
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ('init_from: "study:frist"', "init_from 'study:frist': no study 'frist' in this sweep"),
        ('init_from: "study:first", student: ssm-l12-h768-a12-causal', "is another student than"),
        ('init_from: "study:first", task: rte', "was trained on mrpc, not rte"),
        ('init_from: "study:first", teacher: "study:first"', "as its teacher or as its init_from, not both"),
    ],
)
def test_an_init_source_that_cannot_serve_is_refused(tmp_path: Path, change: str, expected: str) -> None:
    path = write(tmp_path, STARTS.replace('init_from: "study:first"', change))
    with pytest.raises(ConfigError) as raised:
        load_sweep(path)
    assert expected in str(raised.value)


def test_kdgrid_plan_expands_the_mohawk_sweep_in_three_stages(tmp_path: Path) -> None:
    sweeps = Path(__file__).resolve().parents[2] / "sweeps"
    summary = as_json("plan", str(sweeps / "mohawk.yaml"), "--store", str(tmp_path / "store"))
    assert summary["trials"] == 24 and summary["jobs"] == 12
    assert summary["stages"] == [
        "stage 1: 3 job(s), 15 trial(s) (ssm_scratch, stage1, stage2_only, stage3_only, transformer)",
        "stage 2: 6 job(s), 6 trial(s) (stage2_after1, stage3_after2)",
        "stage 3: 3 job(s), 3 trial(s) (stage3_after12)",
    ]
