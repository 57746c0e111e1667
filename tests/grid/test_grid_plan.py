"""Planning trials into jobs that share one teacher pass, split by size and memory budget."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from kdgrid.grid import checkpoint_dir_for, estimate_trial_memory_gb, group_hash, load_sweep, plan_jobs
from kdgrid.trial import Trial, group_key


def trials() -> list[Trial]:
    base = Trial(task="mrpc", teacher="bert-base", student="bert-tiny")
    out = []
    for task in ("mrpc", "rte"):
        for student in ("bert-tiny", "bert-mini", "bert-small"):
            for temperature in (1, 2, 4, 8):
                out.append(dataclasses.replace(base, task=task, student=student, temperature=temperature))
    out.append(dataclasses.replace(base, seed=1))  # another data order: another group
    return out


def test_jobs_are_groups_sharing_a_teacher_pass() -> None:
    jobs = plan_jobs(trials())
    assert sorted(len(j) for j in jobs) == [1, 12, 12]
    for job in jobs:
        assert len({group_key(t) for t in job}) == 1
    assert sorted(t.trial_id for j in jobs for t in j) == sorted(t.trial_id for t in trials())


def test_max_group_size_splits_groups_deterministically() -> None:
    jobs = plan_jobs(trials(), max_group_size=5)
    assert sorted(len(j) for j in jobs) == [1, 2, 2, 5, 5, 5, 5]
    again = plan_jobs(list(reversed(trials())), max_group_size=5)
    assert [[t.trial_id for t in j] for j in jobs] == [[t.trial_id for t in j] for j in again]


def test_memory_budget_splits_by_estimated_student_memory() -> None:
    tiny, small = estimate_trial_memory_gb(trials()[0]), estimate_trial_memory_gb(trials()[8])
    assert 0 < tiny < small
    # bert-small needs 16 bytes per parameter for weights, gradients and AdamW moments at least
    assert small >= 28e6 * 16 / 2**30
    budget = 4 * small
    for job in plan_jobs(trials(), memory_budget_gb=budget):
        used = sum(estimate_trial_memory_gb(t) for t in job)
        assert used <= budget or len(job) == 1


def test_split_jobs_of_one_group_share_their_checkpoint_folder(tmp_path: Path) -> None:
    jobs = plan_jobs(trials(), max_group_size=5)
    mrpc = [j for j in jobs if j[0].task == "mrpc" and j[0].seed == 0]
    assert len(mrpc) == 3
    assert len({checkpoint_dir_for(tmp_path, j) for j in mrpc}) == 1
    assert checkpoint_dir_for(tmp_path, mrpc[0]) == tmp_path / "_checkpoints" / group_hash(mrpc[0][0])
    assert group_hash(trials()[0]) != group_hash(trials()[-1])


def test_bad_group_size_is_refused() -> None:
    with pytest.raises(ValueError):
        plan_jobs(trials(), max_group_size=0)


@pytest.mark.parametrize("budget", [0.0, -1.0, float("nan")])
def test_a_memory_budget_that_is_not_positive_is_refused(budget: float) -> None:
    """None is "no budget"; 0 meaning "off" is the command line's spelling, resolved before planning."""
    with pytest.raises(ValueError, match="memory_budget_gb must be > 0 GB"):
        plan_jobs(trials(), memory_budget_gb=budget)


def test_a_budget_below_one_student_gives_every_trial_its_own_job() -> None:
    smallest = min(estimate_trial_memory_gb(t) for t in trials())
    jobs = plan_jobs(trials(), memory_budget_gb=smallest / 2)
    assert len(jobs) == len(trials()) and all(len(job) == 1 for job in jobs)


@pytest.mark.slow
def test_a_paper_sized_sweep_expands_to_every_trial(tmp_path: Path) -> None:
    """The benchmark's ~30,000-trial sweep (timed by benchmarks/plan_big.py, not here) expands completely."""
    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "plan_big.py"
    spec = importlib.util.spec_from_file_location("plan_big", bench)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sweep = load_sweep(module.big_sweep(tmp_path))
    assert len(sweep.trials) == 8 * 3 * 41 * 5 * 6 == 29_520
    assert len({p.trial.trial_id for p in sweep.trials}) == 29_520
    assert len(plan_jobs([p.trial for p in sweep.trials], max_group_size=25)) == 8 * 6 * 25  # 615 per group
