"""The planner's memory estimates: each trial is costed with its own batch size and length."""

from __future__ import annotations

from kdgrid.grid.plan import estimate_trial_memory_gb, plan_jobs
from kdgrid.trial import Trial


def test_a_small_group_planned_first_does_not_lend_its_estimate_to_a_large_one() -> None:
    common = dict(task="polarity", teacher="minilm-l6", student="bert-small")
    small = Trial(**common, batch_size=8, max_length=64)
    large = [Trial(**common, batch_size=64, max_length=512, lr=lr, seed=1) for lr in (1e-4, 2e-4, 3e-4)]
    budget = 1.5 * estimate_trial_memory_gb(large[0])  # room for one large trial per job, not two
    assert estimate_trial_memory_gb(small) < budget / 3
    jobs = plan_jobs([small, *large], memory_budget_gb=budget)  # the small group (seed 0) is planned first
    assert sorted(len(job) for job in jobs) == [1, 1, 1, 1]
