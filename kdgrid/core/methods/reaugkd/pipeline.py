"""What a job does for a ReAugKD trial (Zhang et al., ACL 2023): the steps around kdgrid's ordinary training.

1. `teacher_head_for` (at a student's set-up): the frozen teacher's pass over the train split (once per job and
   teacher: `teacher_pass`), the SupCon-trained head for the student's width (cached by content hash), and the
   check that ``retrieval_k`` fits the knowledge base (its size is the train split's), before anything trains.
   The objective then maps the teacher's sentence vector through the head (`kdgrid.core.training.objective`), so
   ``reaug_relation`` compares the student's own [CLS] vector with the projected teacher's (eq. 1-3).
2. `after_training` (when a student finishes): the knowledge base (cached by content hash), the student saved
   under its key (`kdgrid.core.methods.reaugkd.spec.student_trial`: the trial without its evaluation options)
   with the content hashes it was trained against, and, with ``retrieval_k``, the dev sets scored with and
   without retrieval, timed (`kdgrid.core.methods.reaugkd.retrieval`); all recorded in the row's ``extra["reaugkd"]``.
3. `evaluate_trained_student` (an evaluation-only trial, after the job's students): the saved student of its
   key, refused with a message naming it when it has not been trained yet, and refused when the teacher, head,
   task, train split, tokenizer or teacher label order it was trained against are not the ones the job has
   now; then step 2's evaluation. Its row's scores are the scores with retrieval; nothing trains.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import weakref
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kdgrid.core.data.batching import eval_batches
from kdgrid.core.job.loaded_job import LoadedJob, TeacherInfo
from kdgrid.core.methods.reaugkd.knowledge_base import (
    KBIdentity,
    KnowledgeBase,
    StaleKnowledgeBase,
    build_knowledge_base,
    cached_knowledge_base,
    check_identity,
    save_knowledge_base,
)
from kdgrid.core.methods.reaugkd.projection_head import (
    HeadSettings,
    ProjectionHead,
    TeacherPass,
    cached_or_trained_head,
    reaugkd_cache_root,
)
from kdgrid.core.methods.reaugkd.retrieval import RetrievalSettings, evaluate_with_retrieval
from kdgrid.core.methods.reaugkd.spec import (
    DEFAULT_BETA,
    DEFAULT_TAU,
    EVALUATE,
    RETRIEVAL_BETA,
    RETRIEVAL_INDEX,
    RETRIEVAL_TAU,
    evaluation_only,
    retrieval_k,
    student_trial,
    uses_head,
)
from kdgrid.core.model.added_parts import save_deployed
from kdgrid.core.model.evaluate import measure_latency_ms
from kdgrid.core.model.models import load_checkpoint, load_tokenizer
from kdgrid.core.model.shapes import student_shape
from kdgrid.core.model.teacher_cache import base_digest
from kdgrid.core.step_hooks import StepHooks
from kdgrid.core.teacher.label_order import LabelOrder
from kdgrid.device_sharing import current_sharing
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.predictions import DevSetPredictions
from kdgrid.result import TrialResult
from kdgrid.trial import Trial

STUDENT_INFO = "student.json"
EXTRA_KEY = "reaugkd"  # the row's ``extra`` entry of everything ReAugKD records

# The last teacher pass computed in this process, by its identity: a job's ReAugKD students share it.
_LAST_PASS: dict[str, TeacherPass] = {}
# The last job's identity, beside a weak reference to the job (a new job at the same address is not mistaken for
# it, and a finished job's teacher is not kept alive by this memo).
_LAST_IDENTITY: dict[int, tuple[weakref.ref[LoadedJob], dict[str, str]]] = {}


class StudentNotTrained(KdgridError):
    """An evaluation-only trial names a student no trial has trained (and saved) yet."""


def tokenizer_digest(job: LoadedJob) -> str:
    """SHA-256 of the teacher tokenizer's vocabulary, class and casing: what decides the token ids."""
    tokenizer = load_tokenizer(job.teacher)
    digest = hashlib.sha256(type(tokenizer).__name__.encode())
    digest.update(str(getattr(tokenizer, "do_lower_case", None)).encode())
    digest.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    return digest.hexdigest()


def label_order_identity(order: LabelOrder | None) -> str:
    """The teacher's label order the soft labels are aligned by, as an identity field: ``identity`` where the
    outputs are already in the task's order (no alignment, or the identity permutation), else the task's label
    of each teacher output (``entailment,neutral,contradiction``; ids where the task has no names). A knowledge
    base's soft labels are in this order's alignment, so a corrected ``teacher_label_order`` names another base."""
    if order is None or order.is_identity:
        return "identity"
    return ",".join(str(label) for label in order.labels_of())


def job_identity(job: LoadedJob) -> dict[str, str]:
    """The content hashes of what a knowledge base of this job is built from, the head aside: the teacher, its
    tokenizer, the task, the train split and the teacher's label order (`label_order_identity`). Computed once
    per job; the key of the in-process teacher pass (`teacher_pass`)."""
    known = _LAST_IDENTITY.get(id(job))
    if known is not None and known[0]() is job:
        return dict(known[1])
    identity = {
        "teacher": base_digest(job.teacher.source),
        "tokenizer": tokenizer_digest(job),
        "task": job.task.name,
        "train_split": _split_fingerprint(job.tokenized["train"]),
        "label_order": label_order_identity(job.label_order),
    }
    _LAST_IDENTITY.clear()
    _LAST_IDENTITY[id(job)] = (weakref.ref(job), identity)
    return dict(identity)


def _split_fingerprint(split: Any) -> str:
    from kdgrid.core.model.evaluate import dev_fingerprint  # the one fingerprint of a tokenized split

    return dev_fingerprint(split)


@torch.no_grad()
def teacher_pass(job: LoadedJob, batch_size: int = 64) -> TeacherPass:
    """The frozen teacher's sentence vectors and soft labels on the job's train split (in its order); computed
    once per teacher and split in this process."""
    identity = job_identity(job)
    key = json.dumps(identity, sort_keys=True)
    if key in _LAST_PASS:
        return _LAST_PASS[key]
    model, device = job.teacher_model, job.runtime.device
    model.eval()
    split = job.tokenized["train"]
    batches = eval_batches(split, batch_size)
    sentence, soft = [], []
    for batch in batches:
        inputs = {k: v.to(device) for k, v in batch.items() if k != "labels"}
        with job.runtime.autocast():
            out = model(**inputs, output_hidden_states=True)
        logits = out.logits.float()
        if job.label_order is not None:
            logits = job.label_order.align(logits)
        sentence.append(out.hidden_states[-1][:, 0].float().cpu())
        soft.append(torch.softmax(logits, dim=-1).cpu())
    result = TeacherPass(
        batches.restore_order(sentence).numpy(),
        batches.restore_order(soft).numpy(),
        np.asarray(split.labels, dtype=np.int64),
        identity,
    )
    _LAST_PASS.clear()
    _LAST_PASS[key] = result
    return result


def retrieval_settings(trial: Trial) -> RetrievalSettings | None:
    """The trial's retrieval settings, or None without ``retrieval_k``."""
    k = retrieval_k(trial)
    if k is None:
        return None
    return RetrievalSettings(
        k=k,
        beta=float(trial.option(RETRIEVAL_BETA, DEFAULT_BETA)),
        tau=float(trial.option(RETRIEVAL_TAU, DEFAULT_TAU)),
        index=str(trial.option(RETRIEVAL_INDEX, "hnsw")),
    )


def check_k_fits(trial: Trial, job: LoadedJob) -> None:
    """Refuse a ``retrieval_k`` above the knowledge base's size (the train split's), before anything trains."""
    k = retrieval_k(trial)
    size = len(job.tokenized["train"])
    if k is not None and k > size:
        raise ConfigError(
            f"option retrieval_k={k} is invalid; allowed: 1 to the knowledge base's size, {size} training "
            f"examples of {job.task.name!r}"
        )


def teacher_head_for(trial: Trial, job: LoadedJob, student_width: int) -> ProjectionHead | None:
    """The frozen head mapping the teacher's sentence vectors into ``student_width`` (None unless the trial sets
    ``reaugkd_head``), on the job's device; trained and cached on first use."""
    if not uses_head(trial):
        return None
    if job.task.is_regression:
        raise ConfigError(f"ReAugKD needs a classification task; {job.task.name!r} is a regression task")
    check_k_fits(trial, job)
    settings = HeadSettings.of(trial, student_width)
    head, _ = cached_or_trained_head(job_identity(job), settings, lambda: teacher_pass(job))
    return head.to(job.runtime.device)


def kb_identity(job: LoadedJob, head: ProjectionHead) -> KBIdentity:
    return KBIdentity(head=head.key, **job_identity(job))


def knowledge_base_for(job: LoadedJob, head: ProjectionHead) -> tuple[KnowledgeBase, bool]:
    """The knowledge base of (the job's teacher and train split, ``head``): cached, else built and cached; and
    whether it was built now."""
    identity = kb_identity(job, head)
    cached = cached_knowledge_base(identity)
    if cached is not None:
        return cached, False
    passed = teacher_pass(job)
    embeddings = head(torch.from_numpy(passed.sentence)).numpy()
    kb, _ = build_knowledge_base(embeddings, passed.soft_labels, identity)
    save_knowledge_base(kb)
    return kb, True


def student_folder(key: str) -> Path:
    return reaugkd_cache_root() / "students" / key


def save_student(model: Any, trial: Trial, identity: KBIdentity) -> Path:
    """Save a trained student under its key (replacing an older save), with the trial that trained it and the
    content hashes it was trained against."""
    key = student_trial(trial).trial_id
    final = student_folder(key)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=final.parent))
    save_deployed(model, staging)  # what a method added for training (a dual head's second head) left out
    info = {"student_key": key, "trained_by": trial.trial_id, "identity": asdict(identity)}
    (staging / STUDENT_INFO).write_text(json.dumps(info, indent=2, sort_keys=True))
    if final.exists():
        shutil.rmtree(final, ignore_errors=True)
    try:
        os.rename(staging, final)
    except OSError:  # saved by another process meanwhile: the same student
        shutil.rmtree(staging, ignore_errors=True)
    return final


def retrieval_report(model: Any, trial: Trial, job: LoadedJob, kb: KnowledgeBase) -> tuple[dict[str, Any], dict]:
    """The dev sets scored with and without retrieval (`evaluate_with_retrieval`) and the predictions with it."""
    settings = retrieval_settings(trial)
    assert settings is not None
    predicted: dict[str, np.ndarray] = {}
    report = evaluate_with_retrieval(
        model,
        job.task,
        job.dev_sets(),
        kb,
        settings,
        trial.batch_size,
        job.runtime.device,
        on_predictions=predicted.__setitem__,
    )
    report["settings"] = asdict(settings)
    report["latency_sharing"] = current_sharing()
    return report, predicted


def after_training(model: Any, trial: Trial, job: LoadedJob, head: ProjectionHead) -> dict[str, Any]:
    """A ReAugKD student's finish: knowledge base, saved student, and (with ``retrieval_k``) its evaluation with
    and without retrieval. Returns the row's ``extra`` entries."""
    started = time.perf_counter()
    kb, built = knowledge_base_for(job, head)
    kb_seconds = time.perf_counter() - started
    save_student(model, trial, kb.identity)
    record: dict[str, Any] = {
        "head_key": head.key,
        "head": head.info.get("settings"),
        "head_epoch_losses": head.info.get("epoch_losses"),
        "knowledge_base": kb.identity.key(),
        "knowledge_base_size": len(kb),
        "knowledge_base_built": built,
        "knowledge_base_seconds": round(kb_seconds, 3),
        "student_key": student_trial(trial).trial_id,
    }
    if retrieval_k(trial) is not None:
        report, _ = retrieval_report(model, trial, job, kb)
        record.update(report)
    return {EXTRA_KEY: record}


def evaluate_trained_student(
    trial: Trial, job: LoadedJob, teacher_info: TeacherInfo | None, started_at: str | None = None
) -> TrialResult:
    """An evaluation-only trial's row: the saved student of its key scored with its retrieval settings.

    Raises:
        StudentNotTrained: no trial has trained and saved that student yet (the message names its key).
        StaleKnowledgeBase: the student was trained against another teacher, head, task, train split,
            tokenizer or teacher label order than the job's.
    """
    result = TrialResult(trial=trial, status="done", device=job.runtime.description, started_at=started_at)
    started = time.perf_counter()
    key = student_trial(trial).trial_id
    folder = student_folder(key)
    if not (folder / STUDENT_INFO).is_file():
        raise StudentNotTrained(
            f"evaluation-only trial {trial.trial_id} ({EVALUATE}: true) evaluates the trained student {key}, which "
            f"is not there yet: train it first (trial {key}: these settings without "
            f"{EVALUATE} and the retrieval options), then run this trial again"
        )
    info = json.loads((folder / STUDENT_INFO).read_text())
    check_k_fits(trial, job)
    shape = student_shape(trial.student)
    head, _ = cached_or_trained_head(
        job_identity(job), HeadSettings.of(trial, shape.width), lambda: teacher_pass(job)
    )
    expected = kb_identity(job, head)
    check_identity(KBIdentity(**info["identity"]), expected, what=f"trained student {key}'s knowledge base")
    kb, built = knowledge_base_for(job, head)
    model = job.runtime.place(
        load_checkpoint(
            str(folder), job.task.num_labels, what="ReAugKD trained student", fresh_head=False
        ).model
    )
    report, predicted = retrieval_report(model, trial, job, kb)
    result.scores = result.last_scores = report["scores"]
    result.best_epoch = trial.epochs  # the saved student is the one after its last epoch
    result.student_params = sum(p.numel() for p in model.parameters())
    result.predictions = {
        name: DevSetPredictions(
            np.asarray(job.tokenized[name].labels, dtype=np.int64), values, None, job.dev_fingerprints[name]
        )
        for name, values in predicted.items()
    }
    result.extra[EXTRA_KEY] = {
        **report,
        "evaluates_student": key,
        "trained_by": info["trained_by"],
        "knowledge_base": kb.identity.key(),
        "knowledge_base_size": len(kb),
        "knowledge_base_built": built,
        "head_key": head.key,
    }
    result.extra["latency_ms"] = measure_latency_ms(model, trial.max_length)
    result.extra["latency_sharing"] = current_sharing()
    result.wall_time_s = round(time.perf_counter() - started, 3)
    if teacher_info is not None:
        result.extra.update(teacher_info())
        result.predictions = teacher_info.add_teacher(result.predictions)
    return result


__all__ = [
    "StaleKnowledgeBase",
    "StudentNotTrained",
    "after_training",
    "evaluate_trained_student",
    "teacher_head_for",
]


class ReaugkdHooks(StepHooks):
    """ReAugKD's part in a student's training: the frozen teacher head handed to the objective, the knowledge
    base, saved student and retrieval evaluation when the student is done (`after_training`), and the whole
    result of an evaluation-only trial (`evaluate_trained_student`)."""

    after_training_failure = "ReAugKD: knowledge base, saved student or retrieval"

    def __init__(self, trial: Trial) -> None:
        self.trial = trial
        self.head: ProjectionHead | None = None
        self.job: LoadedJob | None = None

    def objective_kwargs(self, run: Any, job: LoadedJob) -> dict[str, Any]:
        self.job = job
        self.head = teacher_head_for(self.trial, job, run.plan.shape.width)  # None unless the trial's is ReAugKD's
        return {} if self.head is None else {"teacher_head": self.head}

    def after_training(self, run: Any, model: Any) -> dict[str, Any]:
        if self.head is None or self.job is None:
            return {}
        return after_training(model, self.trial, self.job, self.head)

    def evaluate(self, job: LoadedJob, teacher_info: Any, started_at: str) -> TrialResult | None:
        if not evaluation_only(self.trial):
            return None
        return evaluate_trained_student(self.trial, job, teacher_info, started_at)


def step_hooks(trial: Trial) -> ReaugkdHooks:
    """The hooks of a ReAugKD trial (its head, or an evaluation-only trial)."""
    return ReaugkdHooks(trial)
