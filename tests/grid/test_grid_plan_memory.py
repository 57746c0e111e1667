"""The planner's memory estimates: each trial is costed with its own batch size and length, and a job's peak
counts every student's weights and optimizer state but only one student's activations and one teacher."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kdgrid.core.matching import layer_pairs
from kdgrid.grid import estimate_job_memory_gb, estimate_trial_memory_gb, load_sweep, plan_jobs
from kdgrid.grid.memory_estimate import (
    knowledge_feature,
    memory_key,
    projected_knowledge,
    student_activation_bytes,
    teacher_bytes,
    teacher_shape,
)
from kdgrid.trial import Trial, group_key

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30


def test_a_small_group_planned_first_does_not_lend_its_estimate_to_a_large_one() -> None:
    common = dict(task="polarity", teacher="minilm-l6", student="bert-small")
    small = Trial(**common, batch_size=8, max_length=64)
    large = [Trial(**common, batch_size=64, max_length=512, lr=lr, seed=1) for lr in (1e-4, 2e-4, 3e-4)]
    # room for one large trial per job, not two
    budget = estimate_job_memory_gb(large[:1]) + 0.5 * estimate_trial_memory_gb(large[0])
    assert estimate_job_memory_gb([small]) < budget / 3
    jobs = plan_jobs([small, *large], memory_budget_gb=budget)  # the small group (seed 0) is planned first
    assert sorted(len(job) for job in jobs) == [1, 1, 1, 1]


def test_every_field_the_estimate_reads_is_part_of_its_cache_key() -> None:
    base = Trial(
        task="mrpc", teacher="bert-base", student="bert-mini", knowledge=("hidden_mse",), strategy="Last"
    )
    changes = dict(
        student="bert-small",
        batch_size=64,
        max_length=256,
        knowledge=("gram",),
        strategy="Last-1",
        projection="mlp",
        teacher="bert-large",
        task="rte",
    )
    for field, value in changes.items():
        other = dataclasses.replace(base, **{field: value})
        assert memory_key(other) != memory_key(base), field
        if (
            field != "task"
        ):  # the task picks the teacher (its shape here is the same BERT-base for every task)
            assert estimate_job_memory_gb([other]) != estimate_job_memory_gb([base]), field


def test_the_cache_key_tells_apart_random_pairs_and_options() -> None:
    """A `Random` strategy's pairs depend on the seed (so do the teacher layers a job must keep), and options
    change what a student carries: neither may share a cached estimate with a trial they differ from."""
    random = Trial(task="mrpc", teacher="bert-base", student="bert-mini", knowledge=("hidden_mse",),
                   strategy="Random")  # fmt: skip
    other_seed = next(
        dataclasses.replace(random, seed=s)
        for s in range(1, 50)
        if layer_pairs("Random", 4, 12, seed=s) != layer_pairs("Random", 4, 12, seed=0)
    )
    assert memory_key(other_seed) != memory_key(random)
    last = dataclasses.replace(random, strategy="Last")
    assert memory_key(dataclasses.replace(last, seed=7)) == memory_key(last)  # fixed pairs: seeds share it
    soft = Trial(task="mrpc", teacher="bert-base", student="bert-mini")
    dual = dataclasses.replace(soft, options={"dual_head": True})
    assert memory_key(dual) != memory_key(soft)
    # the distillation head: one more Linear(256, 2) with its gradient and AdamW's two moments, 16 bytes each
    extra = estimate_trial_memory_gb(dual) - estimate_trial_memory_gb(soft)
    assert extra == pytest.approx((256 * 2 + 2) * 16 / GIB)


def test_a_job_counts_one_students_activations_and_one_teacher() -> None:
    trial = Trial(task="mrpc", teacher="bert-base", student="bert-small", knowledge=("hidden_mse",))
    mates = [dataclasses.replace(trial, lr=lr) for lr in (1e-4, 2e-4, 3e-4, 4e-4)]
    one, four = estimate_job_memory_gb(mates[:1]), estimate_job_memory_gb(mates)
    # three more students add their weights, gradients and AdamW moments, nothing else
    assert four - one == pytest.approx(3 * estimate_trial_memory_gb(trial))
    assert one == pytest.approx(
        estimate_trial_memory_gb(trial) + (student_activation_bytes(trial) + teacher_bytes([trial])) / GIB
    )
    # the teacher: BERT-base's fp32 weights at least
    assert teacher_bytes([trial]) > teacher_shape("bert-base", "mrpc").param_count() * 4


def test_the_teacher_features_follow_the_knowledge_and_layers_the_students_read() -> None:
    base = Trial(
        task="mrpc", teacher="bert-base", student="bert-tiny", strategy="Last-1", knowledge=("hidden_mse",)
    )
    every_layer = dataclasses.replace(base, strategy="First")
    scores = dataclasses.replace(base, knowledge=("attention_mse_sum",))
    assert teacher_bytes([base]) < teacher_bytes([every_layer]) < teacher_bytes([base, every_layer, scores])
    assert teacher_bytes([base, base]) == teacher_bytes([base])  # one pass, whatever number of readers


def test_the_teacher_shape_is_read_without_loading(tmp_path: Path) -> None:
    assert teacher_shape("bert-large", "rte").layers == 24
    assert teacher_shape("textattack/bert-base-uncased-MRPC", "mrpc").width == 768
    assert teacher_shape("minilm-l6", "polarity").width == 384
    (tmp_path / "config.json").write_text(
        '{"num_hidden_layers": 3, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128}'
    )
    assert teacher_shape(str(tmp_path), "mrpc").layers == 3


def test_the_estimate_reads_the_knowledge_registry() -> None:
    from kdgrid.core.knowledge import KNOWLEDGE

    assert {name: {knowledge_feature(name)} for name in KNOWLEDGE} == {
        name: set(spec.needs) for name, spec in KNOWLEDGE.items()
    }
    assert {name for name in KNOWLEDGE if projected_knowledge(name)} == {
        name for name, spec in KNOWLEDGE.items() if spec.needs_projection
    }


def test_a_150_student_table5_group_is_one_job_on_an_80_gb_gpu() -> None:
    """Table 5 (3 students x 10 knowledge x 5 strategies per task) with BERT-base teachers: one teacher pass
    per task at the 72 GB budget of an 80 GB GPU (0.9 x 80)."""
    trials = [planned.trial for planned in load_sweep(ROOT / "sweeps" / "table5_single_match.yaml").trials]
    jobs = plan_jobs(trials, memory_budget_gb=72.0)
    per_group: dict[tuple, int] = {}
    for job in jobs:
        per_group[group_key(job[0])] = per_group.get(group_key(job[0]), 0) + 1
    assert len(per_group) == 8 and set(per_group.values()) == {1}
    assert sorted({len(job) for job in jobs}) == [150]
    assert all(estimate_job_memory_gb(job) <= 72.0 for job in jobs)


def test_the_teacher_share_counts_each_layer_the_students_read_once() -> None:
    """The running sum a job keeps (`JobMemory`) against the sum by hand: hidden_mse keeps each read teacher
    layer's hidden states [B, L, d] and a target copy of the same size, once however many students read it."""
    from kdgrid.core.matching import layer_pairs

    base = Trial(task="mrpc", teacher="bert-base", student="bert-tiny", knowledge=("hidden_mse",))
    trials = [dataclasses.replace(base, strategy=s) for s in ("First", "Last", "Dilatation", "First")]
    read = {t for s in ("First", "Last", "Dilatation") for _, t in layer_pairs(s, 2, 12)}
    assert read == {1, 2, 6, 11, 12}
    per_layer = base.batch_size * base.max_length * 768  # fp32 values of one layer's hidden states
    expected = teacher_shape("bert-base", "mrpc").param_count() * 4 + 4 * len(read) * 2 * per_layer
    assert teacher_bytes(trials) == expected
    assert teacher_bytes(trials[::-1]) == expected  # the order the job was built in does not matter
