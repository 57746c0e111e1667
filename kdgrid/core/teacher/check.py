"""`kdgrid teacher check`: which class order a teacher was trained with, found by scoring every order on dev data.

A checkpoint's class order is its trainer's (`kdgrid.core.teacher.label_order`); where no public file says which (the
paper's BERT-base MNLI teacher is read in two orders by two public projects), the teacher itself can: on the
examples the gate scores (`kdgrid.core.teacher.gate.gate_indices`: up to 2,000 of the task's first dev set, evenly
spaced) its outputs are read in every order of the task's labels (C! orders) and each order's accuracy is
computed. The order that fits is the best one, provided it beats the next best clearly (the gate's paired sign
test, ``GATE_Z`` standard errors, on the examples the two orders disagree on) and beats the majority class as
the gate asks; then the line to declare it in a sweep file is printed. The order kdgrid resolves for the teacher
by itself (its ``id2label`` names, the sourced table, or output k = label k) is shown beside it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from kdgrid.core.data import get_task
from kdgrid.core.model.models import load_teacher, load_tokenizer
from kdgrid.core.model.runtime import make_runtime
from kdgrid.core.model.shapes import resolve_teacher
from kdgrid.core.teacher.gate import GATE_Z, gate_indices, standard_error, subset, teacher_logits
from kdgrid.core.teacher.label_order import BASIS_WORDS, LabelOrder, resolve_label_order
from kdgrid.errors import ConfigError

MAX_CHECKED_CLASSES = 6  # 720 orders; beyond, the orders outnumber what a dev sample can tell apart


@dataclass(frozen=True)
class OrderCheck:
    """Every class order of a teacher scored on the same dev examples.

    Attributes:
        teacher, task, dev_set, examples: what was scored.
        resolved: the order kdgrid resolves by itself (`resolve_label_order`).
        accuracies: ``(order, accuracy)`` for every order, best first (ties: the resolved order, then
            lexicographic); ``order[k]`` is the task label id of teacher output k.
        majority: the majority class's accuracy on the examples; needed: what the gate asks an order to beat.
        clear: the best order beats the runner-up by the gate's sign test (False: the dev sample cannot tell).
    """

    teacher: str
    task: str
    dev_set: str
    examples: int
    resolved: LabelOrder
    accuracies: tuple[tuple[tuple[int, ...], float], ...]
    majority: float
    needed: float
    clear: bool

    @property
    def best(self) -> tuple[int, ...]:
        return self.accuracies[0][0]

    @property
    def fits(self) -> bool:
        """The best order is clearly the best and beats the majority class as the gate asks."""
        return self.clear and self.accuracies[0][1] > self.needed


def rank_orders(
    outputs: np.ndarray, labels: np.ndarray, classes: int, resolved: tuple[int, ...]
) -> tuple[list[tuple[tuple[int, ...], float]], bool]:
    """Every order's accuracy, best first, and whether the best beats the runner-up clearly.

    Args:
        outputs: the teacher's argmax output ``[N]`` (its own output indices).
        labels: gold label ids ``[N]``.
        classes: the task's label count.
        resolved: the order kdgrid resolves (preferred among ties).
    """
    orders = list(itertools.permutations(range(classes)))
    correct = {order: np.asarray(order)[outputs] == labels for order in orders}
    ranked = sorted(orders, key=lambda order: (-float(correct[order].mean()), order != resolved, order))
    clear = True
    if len(ranked) > 1:
        best, runner_up = correct[ranked[0]], correct[ranked[1]]
        only_best = int((best & ~runner_up).sum())
        only_runner_up = int((runner_up & ~best).sum())
        clear = only_best - only_runner_up > GATE_Z * math.sqrt(only_best + only_runner_up)
    return [(order, float(correct[order].mean())) for order in ranked], clear


def check_teacher_orders(teacher_name: str, task_name: str, *, max_length: int, device: str) -> OrderCheck:
    """Score every class order of ``teacher_name`` on ``task_name``'s first dev set (module docstring).

    Raises:
        ConfigError: a regression task (no class order), or more than `MAX_CHECKED_CLASSES` classes.
        KdgridError: the teacher, its tokenizer or the task's data cannot be loaded.
    """
    task = get_task(task_name)
    if task.is_regression:
        raise ConfigError(f"task {task.name!r} is a regression task: a teacher's output has no class order")
    if task.num_labels > MAX_CHECKED_CLASSES:
        raise ConfigError(
            f"task {task.name!r} has {task.num_labels} classes ({math.factorial(task.num_labels)} orders); "
            f"`teacher check` scores every order of up to {MAX_CHECKED_CLASSES} classes"
        )
    from kdgrid.core.data.tokenization import tokenize_task

    teacher = resolve_teacher(teacher_name, task.name)
    runtime = make_runtime(device)
    model = runtime.place(load_teacher(teacher, task.num_labels))
    resolved = resolve_label_order(task, teacher.source, model.config.id2label, None)
    dev_set = task.dev_sets[0]
    split = tokenize_task(task, load_tokenizer(teacher), max_length, max_train_samples=1)[dev_set]
    scored = subset(split, gate_indices(len(split)))
    logits = teacher_logits(model, scored, runtime.device, runtime.autocast)
    labels = scored.labels.astype(np.int64)
    ranked, clear = rank_orders(logits.argmax(axis=1), labels, task.num_labels, resolved.order)
    n = len(labels)
    majority = float(np.bincount(labels, minlength=task.num_labels).max() / n)
    return OrderCheck(
        teacher=teacher.source,
        task=task.name,
        dev_set=dev_set,
        examples=n,
        resolved=resolved,
        accuracies=tuple(ranked),
        majority=majority,
        needed=majority + GATE_Z * standard_error(majority, n),
        clear=clear,
    )


def verdict_lines(check: OrderCheck) -> list[str]:
    """What `kdgrid teacher check` concludes, one line each: the order that fits and how to declare it, or why
    none does."""
    order = check.resolved
    best, accuracy = check.accuracies[0]
    resolved_accuracy = dict(check.accuracies)[order.order]
    resolved_words = f"{order.labels_of()} ({BASIS_WORDS[order.basis]})"
    head = f"teacher {check.teacher!r} on task {check.task!r}, {check.examples} {check.dev_set} examples"
    if not check.fits:
        why = (
            f"the best order {order.labels_of(best)} ({accuracy:.3f}) does not beat the majority class "
            f"({check.majority:.3f}) clearly (needed > {check.needed:.3f}): the teacher is untrained or for "
            "another task"
            if accuracy <= check.needed
            else f"the best orders score too close to tell apart on {check.examples} examples "
            f"({order.labels_of(best)} {accuracy:.3f}, {order.labels_of(check.accuracies[1][0])} "
            f"{check.accuracies[1][1]:.3f}): score it on a larger dev set"
        )
        return [f"{head}: no order fits: {why}"]
    lines = [f"{head}: the order that fits is {order.labels_of(best)}, accuracy {accuracy:.3f}"]
    if best == order.order:
        lines.append(f"kdgrid reads it in this order already: {resolved_words}; nothing to declare")
    else:
        lines.append(f"kdgrid would read it as {resolved_words}, accuracy {resolved_accuracy:.3f}")
        lines.append(f"declare it in the sweep file (on its trials): {order.declaration(best)}")
    return lines
