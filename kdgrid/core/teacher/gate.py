"""The teacher gate: a teacher kdgrid did not fine-tune itself is scored at job start, before any student trains.

A Hub checkpoint or a local directory can be untrained, fine-tuned for another task, or have its classes in
another order than the task's (`kdgrid.core.teacher.label_order`); distilling from it gives rows that say ``done`` and
mean nothing. So every job whose teacher is not one of kdgrid's own fine-tuned teachers (`is_kdgrid_finetuned`:
those were checked against the majority class when they were made, `kdgrid.core.teacher.finetune`) first scores the
teacher, its logits read in the job's label order, on up to `GATE_MAX_EXAMPLES` examples of the task's first dev
set (evenly spaced, so a dev file sorted by label still gives every class):

- classification: accuracy in the job's order, in every other class order (tasks with up to
  `MAX_PERMUTED_CLASSES` classes: 2 or 6 orders), and the majority class's (the most frequent class of the
  examples scored: the best constant predictor there). Refused when another order beats the job's order
  significantly (a paired sign test on the examples the two orders disagree on: ``b - c > GATE_Z *
  sqrt(b + c)``, b = examples only the other order gets right, c = only the job's order) and beats the majority
  class itself; or when the job's order does not beat the majority class significantly (``accuracy - p >
  GATE_Z * sqrt(p (1 - p) / n)``).
- regression (STS-B): Pearson's r with the gold scores must exceed ``GATE_Z / sqrt(n)`` (a constant predictor
  has r = 0, and r's standard error near 0 is 1 / sqrt(n); a negated teacher has r < 0). Correlation ignores scale
  and offset, and the soft loss (an MSE on the teacher's outputs) teaches both, so the outputs must also be on the
  labels' scale (`regression_problems`): their mean squared error against the gold scores clearly below the best
  constant predictor's (the gold mean's: a paired test on the per-example squared errors, ``GATE_Z`` standard
  errors), their mean within `REGRESSION_OFFSET` of the label range's width of the gold mean (plus ``GATE_Z``
  standard errors), their spread (standard deviation) within `REGRESSION_SPREAD` times the gold scores', and their
  1st to 99th percentile inside the label range (the gold scores' min to max) widened by `REGRESSION_RANGE_SLACK`
  of its width. A teacher on 0-1 for labels on 0-5, or shifted by a point, is refused naming what differs.

Why three standard errors: a teacher at the majority level (or an order no better than the job's) passes the
test by chance with probability about 0.1%, and a real teacher is tens of standard errors away (the paper's
weakest, RTE at about 0.66 accuracy on 277 examples against 0.53, is 4.4 away; a permuted MNLI teacher is
hundreds). Ties and small dev sets therefore keep the job's order: a different order must win clearly.

A refusal is one `TeacherGateRefused` (a `KdgridError`) naming the teacher, the task, the accuracy as given,
the order that scores best and the declaration to add to the sweep file; the trainer turns it into a failed row
for every trial of the job (`kdgrid.core.training.train.run_job`). The verdict (accepted or refused, with its scores) is
cached per (teacher weights, task data, max length, label order) under ``$KDGRID_CACHE/teacher_gate/`` so a
teacher is scored once, and recorded in every row (``extra_json["teacher_gate"]``). `kdgrid run`'s pre-flight gates
each teacher itself where jobs run on this machine (`kdgrid.preflight.gate`); elsewhere it refuses a teacher
whose refusal is cached before any job is submitted (`cached_refusals`: the same key, `gate_key`, with the label
order read from the teacher's ``config.json``, no weights loaded). ``teacher_gate: false``
(`kdgrid.core.teacher.options`) skips it, recorded as such.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from kdgrid.assets import cache_dir
from kdgrid.core.data import get_task
from kdgrid.core.data.batching import eval_batches
from kdgrid.core.data.tokenization import TokenizedSplit, task_fingerprint
from kdgrid.core.model.shapes import CONFIG_FILE, ResolvedTeacher, resolve_teacher
from kdgrid.core.model.teacher_cache import TEACHER_INFO, base_digest, teacher_cache_root
from kdgrid.core.teacher.label_order import BASIS_WORDS, LabelOrder, resolve_label_order
from kdgrid.core.teacher.options import TEACHER_GATE, declared_label_order, gate_enabled
from kdgrid.errors import KdgridError
from kdgrid.metrics import pearson

if TYPE_CHECKING:
    from kdgrid.trial import Trial

GATE_MAX_EXAMPLES = 2000  # dev examples scored at most: enough to see a 3-point gap, seconds on a GPU
GATE_Z = 3.0  # standard errors a teacher must clear (module docstring)
MAX_PERMUTED_CLASSES = 3  # tasks with more classes are checked against the majority class only (C! orders)
GATE_BATCH_SIZE = 64
GATE_VERSION = 2  # bump when the gate's rules change: cached verdicts are then recomputed
GATE_CACHE = "teacher_gate"
# A regression teacher's scale and offset (module docstring). Generous on purpose: a fine-tuned teacher's outputs
# shrink towards the mean (spread ratio about r, 0.9 on STS-B) and may carry a small bias; a teacher on another
# scale (0-1 for 0-5: spread 0.2, mean 2 points off) or with an offset of a point is far outside them.
REGRESSION_OFFSET = 0.1  # |mean output - mean gold| allowed, as a fraction of the label range's width
REGRESSION_SPREAD = (0.5, 2.0)  # std(outputs) / std(gold) allowed
# The outputs' 1st-99th percentile may leave the label range by this much of its width.
REGRESSION_RANGE_SLACK = 0.1
REGRESSION_PERCENTILES = (1.0, 99.0)
REGRESSION_REASONS = ("mse", "offset", "spread", "range")  # refusals of a correlated teacher on another scale


class TeacherGateRefused(KdgridError):
    """The teacher gate refused a job's teacher; ``report`` holds the scores (recorded in every failed row)."""

    def __init__(self, message: str, report: dict[str, Any]) -> None:
        super().__init__(message)
        self.report = report


def is_kdgrid_finetuned(teacher: ResolvedTeacher) -> bool:
    """True for a teacher made by `kdgrid teacher finetune`: a directory of the teacher cache whose
    ``teacher.json`` names it by its own key (a copy elsewhere, or an edited one, is gated like any teacher)."""
    if not teacher.is_local:
        return False
    path = Path(teacher.source).expanduser().resolve()
    info = path / TEACHER_INFO
    if path.parent != teacher_cache_root().resolve() or not info.is_file():
        return False
    try:
        return json.loads(info.read_text()).get("key") == path.name
    except (OSError, ValueError):
        return False


def teacher_identity(teacher: ResolvedTeacher) -> str | None:
    """What names the teacher's weights: the SHA-256 of a directory's weight files, or a Hub repository's
    cached commit; None when neither can be found (then the verdict is not cached)."""
    if teacher.is_local:
        try:
            return "sha256:" + base_digest(teacher.source)
        except KdgridError:
            return None
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(teacher.source, "config.json")
    if isinstance(found, str):  # .../models--owner--name/snapshots/<commit>/config.json
        return f"hub:{teacher.source}@{Path(found).parent.name}"
    return None


def gate_indices(total: int, limit: int = GATE_MAX_EXAMPLES) -> np.ndarray:
    """Up to ``limit`` indices of ``range(total)``, evenly spaced, ascending."""
    if total <= limit:
        return np.arange(total)
    return (np.arange(limit) * total) // limit


def subset(split: TokenizedSplit, indices: np.ndarray) -> TokenizedSplit:
    """The examples ``indices`` of a tokenized split, as a split of their own."""
    pieces = [split.example(int(i)) for i in indices]
    lengths = np.array([len(ids) for ids, _ in pieces], dtype=np.int64)
    return TokenizedSplit(
        input_ids=np.concatenate([ids for ids, _ in pieces]).astype(np.int32),
        token_type_ids=np.concatenate([types for _, types in pieces]).astype(np.int8),
        offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        labels=split.labels[indices],
        pad_token_id=split.pad_token_id,
    )


@torch.no_grad()
def teacher_logits(
    model: Any, split: TokenizedSplit, device: torch.device | str, autocast: Any
) -> np.ndarray:
    """The teacher's raw logits ``[N, C]`` (float64, the checkpoint's own output order), in the split's order."""
    model.eval()
    batches = eval_batches(split, GATE_BATCH_SIZE)
    outputs = []
    for batch in batches:
        inputs = {k: v.to(device) for k, v in batch.items() if k != "labels"}
        with autocast():
            outputs.append(model(**inputs).logits.float().cpu())
    return batches.restore_order(outputs).double().numpy()


def standard_error(p: float, n: int) -> float:
    return max(math.sqrt(p * (1 - p) / n), 1 / n)


def judge_classifier(
    logits: np.ndarray, labels: np.ndarray, order: LabelOrder
) -> tuple[dict[str, Any], str | None]:
    """The gate's scores of a classifier and why it is refused (None when accepted); see the module docstring.

    Args:
        logits: the teacher's raw logits ``[N, C]`` in its own output order.
        labels: gold label ids ``[N]``.
        order: the job's label order (teacher output k means label ``order.order[k]``).
    """
    outputs = logits.argmax(axis=1)
    n, classes = len(labels), logits.shape[1]
    given = order.order
    candidates = (
        [tuple(p) for p in itertools.permutations(range(classes))]
        if classes <= MAX_PERMUTED_CLASSES
        else [given]
    )
    correct = {perm: np.asarray(perm)[outputs] == labels for perm in candidates}
    accuracy = {perm: float(hits.mean()) for perm, hits in correct.items()}
    best = max(candidates, key=lambda perm: (accuracy[perm], perm == given))
    majority = float(np.bincount(labels.astype(np.int64), minlength=classes).max() / n)
    needed = majority + GATE_Z * standard_error(majority, n)
    only_best = int((correct[best] & ~correct[given]).sum())
    only_given = int((correct[given] & ~correct[best]).sum())
    order_wrong = best != given and only_best - only_given > GATE_Z * math.sqrt(only_best + only_given)
    report = {
        "metric": "accuracy",
        "examples": n,
        "score": accuracy[given],
        "majority": majority,
        "needed": needed,
        "order": order.labels_of(),
        "order_basis": order.basis,
        "best_order": order.labels_of(best),
        "best_score": accuracy[best],
        "orders": {json.dumps(order.labels_of(p)): accuracy[p] for p in candidates},
        "declaration": order.declaration(best),
    }
    if order_wrong and accuracy[best] > needed:
        return report, "label_order"
    if not accuracy[given] > needed:
        return report, "majority"
    return report, None


def regression_problems(predictions: np.ndarray, labels: np.ndarray) -> dict[str, str]:
    """How a regression teacher's outputs ``[N]`` differ from the gold scores ``[N]`` in scale or offset: one
    entry per problem (``mse``, ``offset``, ``spread``, ``range``, in that order) saying what differs; empty when
    the outputs are on the labels' scale (module docstring)."""
    p, y = predictions.astype(np.float64), labels.astype(np.float64)
    n = len(y)
    low, high = float(y.min()), float(y.max())
    width = high - low
    problems: dict[str, str] = {}
    teacher_se, constant_se = (p - y) ** 2, (y - y.mean()) ** 2
    gain = constant_se - teacher_se  # per example: how much better than the gold mean the teacher is
    mse, constant_mse = float(teacher_se.mean()), float(constant_se.mean())
    if not gain.mean() > GATE_Z * gain.std() / math.sqrt(n):
        problems["mse"] = (
            f"its mean squared error {mse:.3f} is not clearly below a constant predictor's ({constant_mse:.3f}, "
            "the gold mean)"
        )
    offset = float(p.mean() - y.mean())
    allowed = REGRESSION_OFFSET * width + GATE_Z * float((p - y).std()) / math.sqrt(n)
    if abs(offset) > allowed:
        problems["offset"] = (
            f"its outputs' mean {p.mean():.3f} is {offset:+.3f} from the gold mean {y.mean():.3f} (allowed "
            f"+-{allowed:.3f})"
        )
    spread = float(p.std() / y.std()) if y.std() > 0 else math.inf
    if not REGRESSION_SPREAD[0] <= spread <= REGRESSION_SPREAD[1]:
        problems["spread"] = (
            f"its outputs' spread (standard deviation {p.std():.3f}) is {spread:.2f} times the gold scores' "
            f"({y.std():.3f}; allowed {REGRESSION_SPREAD[0]}-{REGRESSION_SPREAD[1]} times)"
        )
    first, last = (float(v) for v in np.percentile(p, REGRESSION_PERCENTILES))
    slack = REGRESSION_RANGE_SLACK * width
    if first < low - slack or last > high + slack:
        problems["range"] = (
            f"its outputs span {first:.3f} to {last:.3f} (percentiles {REGRESSION_PERCENTILES[0]:g}-"
            f"{REGRESSION_PERCENTILES[1]:g}), outside the label range {low:g} to {high:g} (+-{slack:.3f})"
        )
    return problems


def judge_regression(predictions: np.ndarray, labels: np.ndarray) -> tuple[dict[str, Any], str | None]:
    """The gate's scores of a regression teacher and why it is refused (None when accepted): Pearson's r must
    exceed ``GATE_Z / sqrt(n)`` (else ``constant``), then its outputs must be on the labels' scale (else the first
    of `regression_problems`: ``mse``, ``offset``, ``spread`` or ``range``; all are in the report)."""
    n = len(labels)
    p, y = predictions.astype(np.float64), labels.astype(np.float64)
    r = pearson(p, y)
    needed = GATE_Z / math.sqrt(n)
    report: dict[str, Any] = {
        "metric": "pearson",
        "examples": n,
        "score": r,
        "majority": 0.0,
        "needed": needed,
        "mse": float(((p - y) ** 2).mean()),
        "constant_mse": float(((y - y.mean()) ** 2).mean()),
        "output_mean": float(p.mean()),
        "output_std": float(p.std()),
        "label_mean": float(y.mean()),
        "label_std": float(y.std()),
        "label_range": [float(y.min()), float(y.max())],
        "output_range": [float(v) for v in np.percentile(p, REGRESSION_PERCENTILES)],
    }
    if not r > needed:
        return report, "constant"
    problems = regression_problems(p, y)
    report["problems"] = problems
    return report, next(iter(problems), None)


def refusal_message(
    teacher: str, task: str, dev_set: str, report: dict[str, Any], reason: str, order: LabelOrder
) -> str:
    """The one message of a refusal (module docstring)."""
    n, score = report["examples"], report["score"]
    head = f"teacher gate: teacher {teacher!r} on task {task!r}"
    skip = f"or set `options: {{{TEACHER_GATE}: false}}` if it is not meant to be accurate"
    if reason == "constant":
        negated = score < -report["needed"]
        why = (
            "its outputs are negated (or it is for another task)"
            if negated
            else "it is untrained or for another task"
        )
        return (
            f"{head} has Pearson r {score:.3f} with the gold scores on {n} {dev_set} examples, not clearly above a "
            f"constant predictor (r 0; needed > {report['needed']:.3f}): {why}. Name a fine-tuned teacher, {skip}; "
            "no student was trained"
        )
    if reason in REGRESSION_REASONS:
        return (
            f"{head} correlates with the gold scores (Pearson r {score:.3f} on {n} {dev_set} examples) but its "
            f"outputs are not on the labels' scale, which the soft loss would teach: "
            f"{'; '.join(report['problems'].values())}. Name a teacher fine-tuned on this task's labels, {skip}; "
            "no student was trained"
        )
    given = f"{report['order']} ({BASIS_WORDS[order.basis]})"
    if reason == "label_order":
        best = report["best_order"]
        return (
            f"{head} has a wrong label order: with its outputs read as {given} it scores accuracy {score:.3f} on "
            f"{n} {dev_set} examples, read as {best} it scores {report['best_score']:.3f} (majority class "
            f"{report['majority']:.3f}). If {best} is the order it was trained with, declare it in the sweep file: "
            f"add `{report['declaration']}` to its trials (merged into any options they have); no "
            "student was trained"
        )
    best_clause = (
        f"; its best label order {report['best_order']} scores {report['best_score']:.3f}"
        if report.get("best_order") not in (None, report["order"])
        else ""
    )
    return (
        f"{head} scores accuracy {score:.3f} on {n} {dev_set} examples with its outputs read as {given}, not "
        f"clearly above the majority class ({report['majority']:.3f}; needed > {report['needed']:.3f})"
        f"{best_clause}: it is untrained or for another task. Name a fine-tuned teacher, {skip}; no student was "
        "trained"
    )


def gate_key(identity: str, task: Any, max_length: int, order: LabelOrder) -> dict[str, Any]:
    """What a verdict is cached under: the teacher's weights (`teacher_identity`), the task's data, its first dev
    set, the max length, the examples scored at most and the job's label order (the one home of the key: the
    gate and the pre-flight's `cached_refusals` both read it)."""
    return {
        "version": GATE_VERSION,
        "teacher": identity,
        "task": task_fingerprint(task),
        "dev_set": task.dev_sets[0],
        "max_length": max_length,
        "max_examples": GATE_MAX_EXAMPLES,
        "order": order.labels_of(),
    }


def gate_cache_path(key: dict[str, Any]) -> Path:
    """The file of a cached verdict (`gate_key`) under ``$KDGRID_CACHE/teacher_gate/``."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:24]
    return cache_dir() / GATE_CACHE / f"{digest}.json"


def _write_json_atomically(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as stream:
            json.dump(payload, stream, indent=1, sort_keys=True)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def check_teacher(
    *,
    teacher: ResolvedTeacher,
    model: Any,
    task: Any,
    dev_split: TokenizedSplit,
    max_length: int,
    order: LabelOrder,
    enabled: bool,
    device: torch.device | str,
    autocast: Any,
) -> dict[str, Any]:
    """Gate a job's teacher; returns what every row records (``extra_json["teacher_gate"]``).

    ``dev_split`` is the task's first dev set tokenized at ``max_length``; ``autocast`` the runtime's autocast
    context factory. Raises `TeacherGateRefused` (from the cache too: a refused teacher stays refused until its
    weights, the task or the declared order change).
    """
    dev_set = task.dev_sets[0]
    if not enabled:
        return {"checked": False, "why": f"{TEACHER_GATE}: false"}
    if is_kdgrid_finetuned(teacher):
        return {"checked": False, "why": "fine-tuned by kdgrid (checked when it was made)"}
    identity = teacher_identity(teacher)
    path = gate_cache_path(gate_key(identity, task, max_length, order)) if identity is not None else None
    if path is not None and path.is_file():
        report = {**json.loads(path.read_text()), "cached": True}
    else:
        indices = gate_indices(len(dev_split))
        scored = subset(dev_split, indices)
        logits = teacher_logits(model, scored, device, autocast)
        if task.is_regression:
            scores, reason = judge_regression(logits[:, 0], scored.labels)
        else:
            scores, reason = judge_classifier(logits, scored.labels.astype(np.int64), order)
        report = {
            "checked": True,
            "teacher": teacher.source,
            "teacher_identity": identity,
            "task": task.name,
            "dev_set": dev_set,
            "decision": "refused" if reason else "accepted",
            "reason": reason,
            "message": refusal_message(teacher.source, task.name, dev_set, scores, reason, order)
            if reason
            else None,
            "z": GATE_Z,
            **scores,
        }
        if path is not None:
            _write_json_atomically(path, report)
        report = {**report, "cached": False}
    if report["decision"] == "refused":
        raise TeacherGateRefused(report["message"], report)
    return report


def _config_json(teacher: ResolvedTeacher) -> dict[str, Any] | None:
    """The teacher's ``config.json`` as read from this machine (its directory, or the Hugging Face cache), without
    the network; None when it is not here or cannot be read."""
    if teacher.is_local:
        path: Path | None = Path(teacher.source).expanduser() / CONFIG_FILE
    else:
        from huggingface_hub import try_to_load_from_cache

        try:
            found = try_to_load_from_cache(teacher.source, CONFIG_FILE)
        except ValueError:  # not a valid repo id
            return None
        path = Path(found) if isinstance(found, str) else None
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def gate_applies(trial: Trial) -> bool:
    """Whether a job of ``trial`` gates its teacher: ``teacher_gate`` is on and the teacher is not one of kdgrid's
    own fine-tuned teachers. False too when the teacher cannot be resolved here (the job's own error says why)."""
    if not gate_enabled(trial):
        return False
    try:
        return not is_kdgrid_finetuned(resolve_teacher(trial.teacher, trial.task))
    except KdgridError:
        return False


def gate_inputs(trial: Trial) -> tuple[Any, ...]:
    """What of a trial its job's gate verdict depends on, beside the teacher's weights: trials equal here share
    one verdict (the pre-flight looks at one of them)."""
    return (trial.teacher, trial.task, trial.max_length, gate_enabled(trial), declared_label_order(trial))


def cached_verdict(trial: Trial, identities: dict[str, str | None] | None = None) -> dict[str, Any] | None:
    """The gate's cached verdict (accepted or refused, with its scores) of ``trial``'s teacher on its task, read
    without loading any weight: the key `check_teacher` would use (`gate_key`), the label order resolved from the
    teacher's ``config.json``. None when the gate would not run (`gate_applies`), when the teacher, its identity
    or its config is not on this machine, or when no verdict is cached: the job's own gate then decides.

    Args:
        trial: any trial of the job.
        identities: `teacher_identity` by teacher source, filled as teachers are met (a local directory's identity
            hashes its weights: once per teacher over many trials).
    """
    if not gate_applies(trial):
        return None
    try:
        task = get_task(trial.task)
        teacher = resolve_teacher(trial.teacher, trial.task)
    except KdgridError:
        return None
    identities = {} if identities is None else identities
    if teacher.source not in identities:
        identities[teacher.source] = teacher_identity(teacher)
    identity = identities[teacher.source]
    config = _config_json(teacher)
    if identity is None or config is None:
        return None
    id2label = config.get("id2label")
    try:
        order = resolve_label_order(
            task, teacher.source, id2label if isinstance(id2label, dict) else None, declared_label_order(trial)
        )
        path = gate_cache_path(gate_key(identity, task, trial.max_length, order))
    except KdgridError:  # a declared order the task refuses: the job says so
        return None
    if not path.is_file():
        return None
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) and report.get("decision") in ("accepted", "refused") else None


def cached_refusal(trial: Trial, identities: dict[str, str | None] | None = None) -> str | None:
    """The message of the gate's cached refusal of ``trial``'s teacher on its task (`cached_verdict`); None when
    no refusal is cached."""
    report = cached_verdict(trial, identities)
    if report is None or report.get("decision") != "refused":
        return None
    return str(report.get("message"))


def cached_refusals(trials: Iterable[Trial]) -> list[str]:
    """The messages of every cached refusal among ``trials``' teachers (`cached_refusal`), once per distinct
    (teacher, task, max length, declared order); empty, without reading any teacher, when no verdict is cached."""
    folder = cache_dir() / GATE_CACHE
    if not folder.is_dir() or next(folder.glob("*.json"), None) is None:
        return []
    identities: dict[str, str | None] = {}
    seen: set[tuple[Any, ...]] = set()
    messages: list[str] = []
    for trial in trials:
        inputs = gate_inputs(trial)
        if inputs in seen:
            continue
        seen.add(inputs)
        message = cached_refusal(trial, identities)
        if message is not None and message not in messages:
            messages.append(message)
    return messages
