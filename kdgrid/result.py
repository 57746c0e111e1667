"""What one trial produced: the contract between the distillation core and the results store.

`kdgrid.core.training.train.run_job` yields one `TrialResult` per trial, done or failed; `kdgrid.store` turns it into a
row (adding the sweep, study, host, package versions and git commit) and writes it atomically.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from kdgrid.predictions import TrialPredictions
from kdgrid.trial import Trial

# A trial's write fence: ``fence(trial_id)`` right before a file that readers take as the trial's is written or
# removed (an epoch checkpoint, a kept student, a knowledge base): None while this process still holds the trial,
# else why not, and then nothing is written. Whoever runs a job supplies it (the worker: its claims' check,
# `kdgrid.store.claims.HeldClaims.validate`); without one every write goes ahead (`kdgrid trial`, a job run by hand).
Fence = Callable[[str], "str | None"]

Status = Literal["done", "failed"]


@dataclass
class TrialResult:
    """The outcome of one trial.

    Scores are nested ``{dev_set: {metric: value}}``; dev sets are named as the task names them
    (``validation``; MNLI: ``validation_matched`` and ``validation_mismatched``); metrics are fractions in
    [0, 1] (accuracy, f1, mcc) or correlations in [-1, 1] (pearson, spearman).

    Attributes:
        trial: the configuration that ran.
        status: ``done`` or ``failed``.
        scores: the scores at the best epoch (best by the task's primary metric on its first dev set).
        last_scores: the scores after the last epoch.
        best_epoch: 1-based epoch of ``scores``; ``None`` if no epoch finished.
        curve: one entry per finished epoch: ``{"epoch": int, "scores": {...}, "loss_terms": {...}}``.
        loss_terms: each term's unweighted mean over the last epoch, by term name (``soft``, ``hard``,
            ``hidden_mse@1-6``, ...).
        step_curves: every N optimizer steps, each term's unweighted and weighted mean, the total, the learning
            rate, the gradient norm, the sampled gradient cosine and a learned mapping
            (`kdgrid.core.training.step_curves` states the format); empty when the trial recorded none.
        weights: the weight each term was given (``auto`` weights as calibrated).
        layer_pairs: the (student layer, teacher layer) pairs the knowledge was applied on.
        student_params: parameter count of the student (embeddings included, classifier included).
        student_flops: forward FLOPs of one sequence of ``max_length`` tokens.
        wall_time_s: seconds from the trial's first step to its last evaluation (its share of the job's time).
        device: where it ran (``cpu``, ``cuda:0 (NVIDIA H100 ...)``).
        started_at, ended_at: ISO-8601 UTC timestamps.
        error_type, error_message, traceback: set when ``status == "failed"``.
        extra: anything else the core wants recorded (e.g. the teacher's dev score, the step of a divergence).
        predictions: per-example dev predictions at the best epoch, the student's and the job's teacher's
            (`kdgrid.predictions`), ``{dev_set: DevSetPredictions}``; empty when none were recorded (a failed
            trial). The row stores them with the teacher agreement and the degenerate flags they give.
    """

    trial: Trial
    status: Status
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    last_scores: dict[str, dict[str, float]] = field(default_factory=dict)
    best_epoch: int | None = None
    curve: list[dict[str, Any]] = field(default_factory=list)
    loss_terms: dict[str, float] = field(default_factory=dict)
    step_curves: dict[str, Any] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    layer_pairs: list[tuple[int, int]] = field(default_factory=list)
    student_params: int | None = None
    student_flops: int | None = None
    wall_time_s: float | None = None
    device: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    predictions: TrialPredictions = field(default_factory=dict)
