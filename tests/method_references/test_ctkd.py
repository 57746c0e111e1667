"""ctkd (sweeps/methods.yaml): kdgrid's learned temperature against CTKD's global temperature module, its
reversal curriculum and the loss it reverses."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from kdgrid.core.methods.ctkd.spec import learner_problems
from kdgrid.core.methods.ctkd.temperature import reversal_strength as kdgrid_strength
from kdgrid.core.model.capture import Features
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.options import option_problems
from kdgrid.core.training.objective import Objective
from kdgrid.trial import Trial
from tests.method_references import ctkd as paper
from tests.method_references._numpy import draw

SHAPE = StudentShape(2, 8, 2, 16)
STUDENT, TEACHER = draw((4, 3), 0, 2.0), draw((4, 3), 1, 4.0)


def logits_features(logits: np.ndarray) -> Features:
    batch = logits.shape[0]
    return Features(
        logits=torch.tensor(logits, dtype=torch.float32),
        mask=torch.ones(batch, 3, dtype=torch.long),
        heads=2,
        hidden=[torch.zeros(batch, 3, 8)],
    )


def theta_grad(temperature: float, options: dict[str, object]) -> tuple[Objective, float]:
    """kdgrid's objective for a CTKD trial past its ramp (lambda = 1): the reversed gradient of its theta."""
    trial = Trial(task="synthetic-single-binary", teacher="t", student=SHAPE.name, knowledge=(),
                  temperature=temperature, options={"temperature_learner": "ctkd", **options})  # fmt: skip
    objective = Objective(trial, [], SHAPE, SHAPE, regression=False)
    objective.set_progress(9, 10)  # p = 1: lambda = lambda_max = 1
    values = objective.term_values(
        logits_features(STUDENT), logits_features(TEACHER), torch.tensor([0, 1, 2, 0])
    )
    values["soft"].backward()
    learned = objective.temperature_learner
    assert learned is not None
    return objective, float(learned.theta.grad)


def test_the_reference_curriculum_is_the_authors() -> None:
    assert paper.initial_temperature() == pytest.approx(15.62, abs=5e-3)
    assert paper.reversal_strength(1) == pytest.approx((1 - math.cos(math.pi / 10)) / 2)
    assert paper.reversal_strength(5) == pytest.approx(0.5)
    assert paper.reversal_strength(10) == paper.reversal_strength(240) == 1.0


def test_with_the_authors_settings_the_reversed_temperature_gradient_is_theirs() -> None:
    """kdgrid's mechanics (sigmoid range [1, 21], reversal, KL's gradient, T^2) equal the authors' when asked for
    their start (theta = 1: T = 15.62) and their T^2."""
    start = paper.initial_temperature()
    objective, ours = theta_grad(start, {"soft_t2": True})
    assert float(objective.temperature_learner.theta.detach()) == pytest.approx(paper.THETA_0, abs=1e-5)
    theirs = paper.theta_gradient(torch.tensor(STUDENT), torch.tensor(TEACHER), paper.THETA_0, 1.0)
    assert ours == pytest.approx(theirs, rel=1e-4)


def test_the_sweeps_ctkd_starts_at_the_authors_temperature() -> None:
    objective, _ = theta_grad(
        2.0, {}
    )  # the sweep's cell says temperature 2: the paper's form does not read it
    learned = objective.temperature_learner
    assert float(learned.value().detach()) == pytest.approx(paper.initial_temperature(), rel=1e-4)
    assert learned.summary()["form"] == "paper" and objective.formulation() == {"ctkd_form": "paper"}


def test_the_sweeps_ctkd_reverses_the_kl_times_t_squared() -> None:
    objective, ours = theta_grad(2.0, {})
    theta = float(objective.temperature_learner.theta.detach())
    theirs = paper.theta_gradient(torch.tensor(STUDENT), torch.tensor(TEACHER), theta, 1.0)
    assert ours == pytest.approx(theirs, rel=1e-4)


def test_the_sweeps_reversal_strength_reaches_its_maximum_where_the_authors_does() -> None:
    """The authors' ramp as a fraction of their training (10 of 240 epochs), stepped continuously: kdgrid's
    strength is theirs at the end of each of their epochs."""
    objective, _ = theta_grad(2.0, {})
    ramp = objective.temperature_learner.ramp
    assert ramp == pytest.approx(paper.RAMP_EPOCHS / 240)
    for epoch in (1, 3, 5, 10, 11, 240):
        assert kdgrid_strength(epoch / 240, 1.0, ramp) == pytest.approx(
            paper.reversal_strength(epoch), abs=1e-12
        )


def test_ctkd_form_kdgrid_is_kdgrids_earlier_form() -> None:
    """``ctkd_form: kdgrid``: the start is the trial's temperature, the ramp all of training, no T^2."""
    objective, ours = theta_grad(2.0, {"ctkd_form": "kdgrid"})
    learned = objective.temperature_learner
    assert float(learned.value().detach()) == pytest.approx(2.0, abs=1e-6)
    assert learned.ramp == 1.0 and not objective.soft_t2
    theta = float(learned.theta.detach())
    parameter = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
    t = paper.temperature(parameter)
    kl = paper.kl_t2(torch.tensor(STUDENT).double(), torch.tensor(TEACHER).double(), t) / t**2  # without T^2
    (grad,) = torch.autograd.grad(kl, parameter)
    assert ours == pytest.approx(-float(grad), rel=1e-4)
    assert kdgrid_strength(0.5, 1.0, learned.ramp) == pytest.approx(0.5)


def test_the_forms_and_their_options_are_checked_before_anything_runs() -> None:
    assert option_problems([("ctkd_form", "papers")], ()) == [
        "option ctkd_form='papers' is invalid; allowed: paper, kdgrid"
    ]
    assert learner_problems({"ctkd_form": "paper"}, 1.0, 1.0, "constant") == [
        "option(s) ['ctkd_form'] need temperature_learner: ctkd"
    ]
    paper_form = {"temperature_learner": "ctkd"}
    assert (
        learner_problems(paper_form, 30.0, 1.0, "constant") == []
    )  # the paper's form reads no trial temperature
    assert "must lie strictly between" in learner_problems({**paper_form, "ctkd_form": "kdgrid"}, 30.0, 1.0,
                                                           "constant")[0]  # fmt: skip
