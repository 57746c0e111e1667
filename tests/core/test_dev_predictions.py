"""Per-example dev predictions from the core: the best epoch's, the teacher's once per job in the task's label
order, the stored row reproducing its stored accuracy exactly, a cut dev set fingerprinted apart, kept by resume."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import BertForSequenceClassification

from kdgrid.core.job.loaded_job import load_job
from kdgrid.core.model.evaluate import dev_fingerprint
from kdgrid.core.teacher.options import TEACHER_LABEL_ORDER
from kdgrid.core.training.train import make_runtime, run_job
from kdgrid.predictions import teacher_agreement
from kdgrid.result import TrialResult
from kdgrid.store import read_store, write_result
from kdgrid.store.predictions import read_predictions
from kdgrid.trial import Trial
from tests.tiny_trials import tiny_trial as make_trial

pytestmark = pytest.mark.usefixtures("deterministic_torch")  # bit-for-bit comparisons (tests/conftest.py)


def run(trials: list[Trial], **kwargs: object) -> list[TrialResult]:
    return run_job(trials, device="cpu", **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def ordered_teachers(teacher: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(the `teacher` fixture with its classifier's bias set so that it predicts each class on half the dev set;
    the same teacher with its two output classes swapped: its classifier's rows exchanged)."""
    from transformers import AutoTokenizer

    from kdgrid.core.teacher.gate import teacher_logits

    model = BertForSequenceClassification.from_pretrained(teacher)
    dev = load_job(make_trial(teacher), make_runtime("cpu")).tokenized["validation"]
    logits = teacher_logits(model, dev, "cpu", contextlib.nullcontext)
    middle = float(np.median(logits[:, 0] - logits[:, 1]))
    paths = []
    with torch.no_grad():
        model.classifier.bias.add_(torch.tensor([-middle / 2, middle / 2]))
        for name in ("halved", "swapped"):
            path = tmp_path_factory.mktemp(name)
            model.save_pretrained(path)
            AutoTokenizer.from_pretrained(teacher).save_pretrained(path)
            paths.append(str(path))
            model.classifier.weight.copy_(model.classifier.weight.flip(0))
            model.classifier.bias.copy_(model.classifier.bias.flip(0))
    return paths[0], paths[1]


def test_a_stored_row_reproduces_its_accuracy_and_carries_the_teachers_predictions(
    teacher: str, tmp_path: Path
) -> None:
    (result,) = run([make_trial(teacher)])
    assert result.status == "done" and result.best_epoch is not None
    path = write_result(tmp_path, result, sweep="s", study="t")
    row = read_store(tmp_path).iloc[0]
    (stored,) = read_predictions(tmp_path, [row["row_id"]]).values()
    dev = stored["validation"]
    scores = json.loads(row["scores_json"])["validation"]
    assert float(np.mean(dev.student == dev.gold)) == scores["accuracy"]  # exactly, not approximately
    assert dev.teacher is not None and len(dev.teacher) == len(dev.gold)
    # the teacher's predictions are those its recorded scores came from (one pass, the same examples)
    teacher_scores = json.loads(row["extra_json"])["teacher_scores"]["validation"]
    assert float(np.mean(dev.teacher == dev.gold)) == teacher_scores["accuracy"]
    assert json.loads(row["teacher_agreement_json"]) == {"validation": teacher_agreement(dev)}
    job = load_job(make_trial(teacher), make_runtime("cpu"))
    assert dev.fingerprint == dev_fingerprint(job.tokenized["validation"])
    assert np.array_equal(dev.gold, job.tokenized["validation"].labels)
    assert path.exists()


def test_the_best_epochs_predictions_are_kept_and_the_teacher_is_evaluated_once(
    teacher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kdgrid.core.job.loaded_job as job_module

    calls: list[int] = []
    real = job_module.evaluate_dev_sets

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(job_module, "evaluate_dev_sets", counting)
    results = run([make_trial(teacher, epochs=3), make_trial(teacher, epochs=3, lr=5e-3)])
    assert len(calls) == 1  # one teacher pass for the job's two students
    teachers = [r.predictions["validation"].teacher for r in results]
    assert teachers[0] is not None and np.array_equal(teachers[0], teachers[1])
    for result in results:
        dev = result.predictions["validation"]
        best = result.curve[result.best_epoch - 1]["scores"]["validation"]["accuracy"]
        assert float(np.mean(dev.student == dev.gold)) == best == result.scores["validation"]["accuracy"]


def test_a_teacher_with_another_class_order_is_recorded_in_the_tasks_order(
    ordered_teachers: tuple[str, str],
) -> None:
    sharp, swapped = ordered_teachers
    (original,) = run([make_trial(sharp, epochs=1)])
    (declared,) = run([make_trial(swapped, epochs=1, options={TEACHER_LABEL_ORDER: [1, 0]})])
    (undeclared,) = run([make_trial(swapped, epochs=1)])
    mine = original.predictions["validation"].teacher
    assert mine is not None and len(set(mine.tolist())) == 2  # both classes occur: the check can fail
    assert np.array_equal(declared.predictions["validation"].teacher, mine)
    assert np.array_equal(undeclared.predictions["validation"].teacher, 1 - mine)  # as the checkpoint says


def test_a_cut_dev_set_has_other_fingerprints_than_the_full_one(teacher: str) -> None:
    (full,) = run([make_trial(teacher, epochs=1)])
    (cut,) = run([make_trial(teacher, epochs=1, options={"max_dev_samples": 7})])
    whole, head = full.predictions["validation"], cut.predictions["validation"]
    assert len(head.gold) == len(head.student) == len(head.teacher) == 7 < len(whole.gold)
    assert head.fingerprint != whole.fingerprint
    assert np.array_equal(head.gold, whole.gold[:7]) and np.array_equal(head.teacher, whole.teacher[:7])


def test_a_resumed_trial_keeps_its_best_epochs_predictions(
    teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kdgrid.core.training.student as student_module

    trial = make_trial(teacher, epochs=3)
    (straight,) = run([trial])

    class Preempted(BaseException):
        pass

    real_end = student_module.end_epoch

    def stop_after_two(run_: object, job: object, epoch: int, checkpoint_dir: Path | None = None) -> None:
        real_end(run_, job, epoch, checkpoint_dir)  # type: ignore[arg-type]
        if epoch == 1:
            raise Preempted

    import kdgrid.core.training.train as train_module

    monkeypatch.setattr(train_module, "end_epoch", stop_after_two)
    with pytest.raises(Preempted):
        run([trial], checkpoint_dir=tmp_path)
    monkeypatch.undo()
    (resumed,) = run([trial], checkpoint_dir=tmp_path)
    assert resumed.extra.get("resumed_from_epoch") == 2
    assert resumed.best_epoch == straight.best_epoch
    for name, dev in straight.predictions.items():
        again = resumed.predictions[name]
        assert np.array_equal(again.student, dev.student) and np.array_equal(again.teacher, dev.teacher)
        assert again.fingerprint == dev.fingerprint


def test_a_checkpoint_holds_the_best_epochs_predictions(tmp_path: Path) -> None:
    from kdgrid.core.training.checkpoint import load_checkpoint, save_checkpoint
    from kdgrid.core.training.student import predictions_from_checkpoint, predictions_to_checkpoint
    from kdgrid.predictions import DevSetPredictions

    predictions = {
        "validation": DevSetPredictions(np.array([0, 1, 1]), np.array([1, 1, 0]), None, "abc"),
        "scores": DevSetPredictions(
            np.array([0.5, 1.5], dtype=np.float32), np.array([1.0, 2.0], dtype=np.float32), None, "def"
        ),
    }
    save_checkpoint(
        tmp_path,
        "t",
        {
            "trial_id": "t",
            "model": {},
            "optimizer": {},
            "scheduler": {},
            "epochs_done": 1,
            "result": {"predictions": predictions_to_checkpoint(predictions)},
        },
    )
    state = load_checkpoint(tmp_path, "t")  # read with weights_only=True
    assert state is not None
    back = predictions_from_checkpoint(state["result"]["predictions"])
    for name, dev in predictions.items():
        assert back[name].fingerprint == dev.fingerprint and back[name].teacher is None
        assert back[name].student.dtype == dev.student.dtype and np.array_equal(
            back[name].student, dev.student
        )
        assert np.array_equal(back[name].gold, dev.gold)
