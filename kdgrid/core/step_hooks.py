"""`StepHooks`: what a method does inside one student's training, at a few named points of its life, so that the
job loop (`kdgrid.core.training.train`) and the student's step (`kdgrid.core.training.student`) name no method.

A method whose spec names a hooks factory (`kdgrid.core.method_registry.MethodSpec.hooks`, ``"module:function"``,
imported on first use) gets one `StepHooks` per trial that uses it (``MethodSpec.uses``), built when the student is
set up. Every hook is optional: the base class does nothing at each point. In the order a student meets them:

==================  ===================================================================================
hook                when, and what it may do
==================  ===================================================================================
`objective_kwargs`  before the objective is built: what the method hands it (ReAugKD's teacher head)
`prepare_model`     the student is built, before it is placed on the device: add a part (a second head), or
                    set weights from the job's teacher (MOHAWK's stage 3: copied, in the task's label order)
`set_up`            the student, objective, optimizer and scaler exist: check them, record in the row
`teacher_capture`   what the shared teacher pass captures for the method beyond its terms' features
`teacher_batch`     (the job's first trial's hooks) the batch the shared teacher pass reads
`student_batch`     the batch this student's forward pass reads (an input transform: masking)
`student_features`  the student's features in place of its forward pass, where its objective reads none
`features`          the student's captured features, after its forward pass (a second head's logits)
`gradients`         the step's loss terms are known: take the gradients itself and return True (DOT's
                    split, LKD's lookahead), or return False and let the step's backward pass run
`after_backward`    the gradients are in place, before clipping and the optimizer step (a curriculum's
                    frozen layers)
`suspended`         a context in which the method's own hooks on the model keep nothing (a held-out pass)
`end_epoch`         an epoch's scores are recorded: record what the method tracks per epoch
`checkpoint_state`  / `restore`: what the method keeps beyond the model, objective and optimizer
`after_training`    the student is done: run on the trained model, return what the row records
`evaluate`          (an evaluation-only trial) its whole result, in place of training
`before_step`       the step's progress is set, before its forward pass (a stage's fresh optimizer)
==================  ===================================================================================

The trial's objective (`kdgrid.core.training.objective.Objective`) takes the same hooks for what a method changes
in eq. 9: `projection_kwargs` (how its projections are built), `build_objective` (a learned part it owns, after
its projections, mapping and temperature learner are drawn), `teacher_features` (the teacher's features one
knowledge term reads: a per-term target the method derives from them, as Flex-KD keeps the teacher dimensions it
selected), `default_soft_t2` (the soft term's T^2 when the trial
leaves ``soft_t2`` unset), `extra_terms` and `extra_values` (a term the method adds, with its weight: a penalty),
`own_values` (the values of the method's own terms, from the batch's features, in place of eq. 9's soft, hard and
knowledge terms: a loss of its own, as MOHAWK's teacher-forced stages train on, whose spec says so with
``own_loss``; their weights are its `extra_terms`),
`set_progress` (where training is), `soft_per_example` (its own loss in place of the soft-label cross-entropy: a
second head's divergence), `instance_trade_off` (per-example weights trading each example's soft and hard
losses), `term_mask` (which tokens a term compares), `step_weights` (the weights the step's total uses: a
curriculum's stage, learned multipliers), `learned_modules` (its parameters learned beside the student) and
`formulation` (which form of its paper the row measured, recorded in the row's ``extra.formulation``).

``run`` is the student's `kdgrid.core.training.student.StudentRun` and ``job`` its
`kdgrid.core.job.loaded_job.LoadedJob` (typed ``Any`` here: this module sits below both and imports no torch).
"""

from __future__ import annotations

import contextlib
from typing import Any

# The phase a batch is read in, for transforms that draw from a seed per phase: training steps, and the warm-up
# batches that calibrate ``beta: auto``.
TRAINING = 0
CALIBRATION = 1


class StepHooks:
    """The base: every hook does nothing. Subclass it in a method's torch module and override what it needs."""

    # How a failed row names the step when `after_training` raises.
    after_training_failure = "after training"

    def objective_kwargs(self, run: Any, job: Any) -> dict[str, Any]:
        """Keyword arguments for the trial's `kdgrid.core.training.objective.Objective`."""
        return {}

    def prepare_model(self, run: Any, job: Any, model: Any) -> None:
        """The student is built and not yet placed on the device (``job``: its teacher model and label order)."""

    def teacher_capture(self, run: Any) -> tuple[frozenset[str], frozenset[int]]:
        """What the job's shared teacher pass must capture for this method beyond the features of the trial's
        terms: feature names (`kdgrid.core.model.capture.ALL_NEEDS`) and the teacher layers (1-based) they are
        kept on."""
        return frozenset(), frozenset()

    def set_up(self, run: Any, job: Any) -> None:
        """The student is ready to train: model, objective, optimizer, scaler."""

    def teacher_batch(
        self, job: Any, batch: dict[str, Any], phase: int, index: int, students: list[Any]
    ) -> dict[str, Any]:
        """The batch the job's shared teacher pass reads (called on the hooks of the job's first trial;
        ``students``: the job's students that read this pass, as `StudentRun`s)."""
        return batch

    def before_step(self, run: Any, job: Any, step: int) -> None:
        """The job's 1-based ``step`` starts for this student (its objective's progress is set)."""

    def student_batch(self, run: Any, job: Any, batch: dict[str, Any], phase: int, index: int) -> dict[str, Any]:
        """The batch this student's forward pass reads (``index``: the job's 1-based step, or the warm-up
        batch's index in calibration)."""
        return batch

    def student_features(self, run: Any, job: Any, batch: dict[str, Any], phase: int, index: int) -> Any:
        """The student's features of ``batch`` in place of its own forward pass (None: the pass runs): for an
        objective that reads nothing of the student's pass (a teacher-forced stage feeds the student's layers the
        teacher's inputs itself), a `kdgrid.core.model.capture.Features` with what the step still reads."""
        return None

    def features(self, run: Any, features: Any) -> Any:
        """The student's features of this forward pass."""
        return features

    def gradients(self, run: Any, job: Any, values: dict[str, Any], step: int) -> bool:
        """Whether this hook took the step's gradients itself (then no backward pass runs)."""
        return False

    def after_backward(self, run: Any) -> None:
        """The step's gradients are in place."""

    def suspended(self, run: Any) -> contextlib.AbstractContextManager[None]:
        """A context in which this method's hooks on the model keep nothing."""
        return contextlib.nullcontext()

    def end_epoch(self, run: Any, job: Any, epoch: int) -> None:
        """The epoch ``epoch`` (0-based) is recorded in ``run.result``."""

    def checkpoint_state(self) -> dict[str, Any] | None:
        """What an epoch checkpoint keeps of this method beyond the model, objective and optimizer."""
        return None

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from `checkpoint_state`."""

    def after_training(self, run: Any, model: Any) -> dict[str, Any]:
        """What the row records of the trained student (its ``extra``)."""
        return {}

    def projection_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for every projection of the trial (`kdgrid.core.model.projection.Projection`)."""
        return {}

    def build_objective(self, objective: Any) -> None:
        """The objective's own parts are built: add what the method owns in it (a learned module)."""

    def default_soft_t2(self) -> bool | None:
        """Whether the soft term is multiplied by T^2 when the trial leaves ``soft_t2`` unset (None: no say)."""
        return None

    def soft_per_example(self, objective: Any, logits_s: Any, logits_t: Any, temperature: Any) -> Any:
        """The method's own soft loss per example ``[B]`` in place of the soft-label cross-entropy, a divergence
        that carries its own T^2 (None: the cross-entropy). ``logits_s``: the logits the soft term reads."""
        return None

    def instance_trade_off(self, objective: Any, teacher_loss: Any) -> Any:
        """Per-example ``alpha_i`` ``[B]`` (None: none): the soft term becomes ``mean_i alpha_i soft_i`` and the hard
        term ``mean_i (1 - alpha_i) hard_i``. ``teacher_loss()`` gives the teacher's loss per example."""
        return None

    def term_mask(self, objective: Any, term: Any, mask: Any) -> Any:
        """The mask ``[B, L]`` a knowledge term compares tokens under (1 = compared)."""
        return mask

    def formulation(self, objective: Any) -> dict[str, str]:
        """Which form of its paper the trial's method computes, by option (recorded in the row)."""
        return {}

    def teacher_features(self, objective: Any, term: Any, features: dict[str, Any]) -> dict[str, Any]:
        """The teacher's features the knowledge function of ``term`` (a
        `kdgrid.core.training.objective.Term`) reads, from those the objective took for it (float32, keyed by
        feature name: ``hidden`` ``[B, L, d_T]``, ...). Called for every term of a fixed strategy, each step and
        each calibration batch; a learnable strategy's term reads its mapping's target instead. Return new
        tensors, never change ``features`` in place: the job's students share them."""
        return features

    def extra_terms(self, objective: Any) -> dict[str, float]:
        """The weights of the terms the method adds to eq. 9, by name (after the knowledge terms)."""
        return {}

    def extra_values(self, objective: Any) -> dict[str, Any]:
        """The unweighted values of the terms of `extra_terms` for this step (0-dim tensors)."""
        return {}

    def own_values(self, objective: Any, student: Any, teacher: Any, labels: Any) -> dict[str, Any] | None:
        """The unweighted values (0-dim float32 tensors) of the method's own terms for this batch, by name, in place
        of every term of eq. 9 (None: eq. 9's): the step's total is then theirs, weighted by `extra_terms`
        (eq. 9's soft and hard weights must be 0, as the method's rules ensure). ``student`` and ``teacher``: the
        two sides' `kdgrid.core.model.capture.Features` of the batch; ``labels`` its gold labels."""
        return None

    def set_progress(self, objective: Any, step_index: int, total_steps: int) -> None:
        """Training is at the 0-based step ``step_index`` of ``total_steps``."""

    def step_weights(self, objective: Any, weights: dict[str, float]) -> dict[str, float]:
        """The weights the step's total uses, from the weights of the terms now."""
        return weights

    def learned_modules(self, objective: Any) -> list[Any]:
        """The modules of the method's parameters learned beside the student (they take ``learned_lr_scale``)."""
        return []

    def evaluate(self, job: Any, teacher_info: Any, started_at: str) -> Any:
        """An evaluation-only trial's `kdgrid.result.TrialResult`, or None when this method does not evaluate it."""
        return None
