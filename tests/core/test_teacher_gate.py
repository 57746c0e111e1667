"""The teacher gate at job start and teacher label alignment, on a tiny teacher trained for the test session.

One teacher is fine-tuned (kdgrid's own recipe, a few seconds) on a generated binary task and copied out of the
teacher cache, so it is gated like any Hub or local teacher. Its copy with the classifier rows swapped is refused
with a message naming the label order and the declaration; declared, it is accepted and its students score
exactly as with the unswapped teacher. A random teacher is refused at the majority class.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import BertForSequenceClassification

from kdgrid.core.data import get_task
from kdgrid.core.teacher import gate as teacher_gate
from kdgrid.core.teacher.gate import TeacherGateRefused, judge_classifier, judge_regression
from kdgrid.core.teacher.label_order import KNOWN_LABEL_ORDERS, LabelOrder, resolve_label_order
from kdgrid.core.teacher.options import TEACHER_GATE, TEACHER_LABEL_ORDER, teacher_option_problems
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.result import TrialResult
from kdgrid.store import read_store
from kdgrid.store.write import result_row
from kdgrid.trial import Trial, group_key
from tests.teachers import TINY_TEACHER_SHAPE, save_random_teacher

TASK = "synthetic-single-binary-n600-d200"


@pytest.fixture(scope="session")
def gate_teachers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``good``: a tiny teacher fine-tuned on `TASK` (accuracy near 1), copied out of the teacher cache;
    ``swapped``: the same with its two classifier rows swapped; ``random``: an untrained teacher;
    ``finetuned``: the original in the teacher cache ``cache`` (the ``KDGRID_CACHE`` of this module's tests)."""
    from kdgrid.core.model.teacher_cache import TeacherRecipe
    from kdgrid.core.teacher.finetune import finetune_teacher

    root = tmp_path_factory.mktemp("gate-teachers")
    patch = pytest.MonkeyPatch()
    patch.setenv("KDGRID_CACHE", str(root / "cache"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        base = save_random_teacher(root / "base", TINY_TEACHER_SHAPE)
        record = finetune_teacher(
            TASK, base=base, recipe=TeacherRecipe(lr=1e-3, epochs=3, batch_size=16, max_length=32)
        )
    finally:
        torch.set_num_threads(threads)
        patch.undo()
    good = root / "good"
    shutil.copytree(record.path, good)
    (good / "teacher.json").unlink()  # a plain directory now: not one of kdgrid's own teachers
    model = BertForSequenceClassification.from_pretrained(good)
    with torch.no_grad():
        model.classifier.weight.copy_(model.classifier.weight.flip(0))
        model.classifier.bias.copy_(model.classifier.bias.flip(0))
    swapped = root / "swapped"
    model.save_pretrained(swapped)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (good / name).is_file():
            shutil.copy(good / name, swapped / name)
    return {
        "good": str(good),
        "swapped": str(swapped),
        "random": save_random_teacher(root / "random", TINY_TEACHER_SHAPE),
        "finetuned": str(record.path),
        "cache": str(root / "cache"),
    }


@pytest.fixture(autouse=True)
def gate_cache(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests that use the teachers read and write the gate's cache in the session's own ``KDGRID_CACHE``, on one
    torch thread."""
    if "gate_teachers" not in request.fixturenames:
        yield
        return
    monkeypatch.setenv("KDGRID_CACHE", request.getfixturevalue("gate_teachers")["cache"])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def make_trial(teacher: str, **options: object) -> Trial:
    return Trial(
        task=TASK,
        teacher=teacher,
        student="w32-l1-h2-f64",
        init="random",
        batch_size=16,
        max_length=32,
        epochs=2,
        lr=3e-3,
        max_train_samples=160,
        options=options,
    )


def write_sweep(path: Path, teacher: str) -> Path:
    """A sweep of two trials (seeds 0 and 1) like `make_trial`'s, from ``teacher``."""
    fields = ("task", "student", "init", "batch_size", "max_length", "epochs", "lr", "max_train_samples")
    fixed = {name: getattr(make_trial(teacher), name) for name in fields}
    fixed["teacher"] = teacher
    path.write_text(json.dumps({"name": "gated", "fixed": fixed, "axes": {"seed": [0, 1]}}))
    return path


def run(trials: list[Trial]) -> tuple[list[TrialResult], list[str]]:
    """The job's results, and the ids of the students that finished training (``on_model``)."""
    from kdgrid.core.training.train import run_job

    trained: list[str] = []
    results = run_job(trials, device="cpu", on_model=lambda trial, _model: trained.append(trial.trial_id))
    return results, trained


def gate_of(result: TrialResult) -> dict:
    return json.loads(result_row(result, sweep="s", study="")["extra_json"])["teacher_gate"]


# ------------------------------------------------------------------------------------------- the whole job


def test_a_trained_teacher_passes_and_its_scores_are_in_every_row(gate_teachers: dict[str, str]) -> None:
    results, trained = run([make_trial(gate_teachers["good"]), make_trial(gate_teachers["good"], max_grad_norm=1.0)])
    assert [r.status for r in results] == ["done", "done"] and len(trained) == 2
    gates = [gate_of(r) for r in results]
    assert gates[0] == gates[1]
    assert gates[0]["checked"] and gates[0]["decision"] == "accepted"
    assert gates[0]["score"] > 0.9 and gates[0]["majority"] == pytest.approx(0.5, abs=0.05)
    assert gates[0]["examples"] == 200 and gates[0]["order"] == [0, 1]


def test_a_teacher_with_swapped_classes_is_refused_naming_its_label_order(
    gate_teachers: dict[str, str],
) -> None:
    trials = [make_trial(gate_teachers["swapped"]), make_trial(gate_teachers["swapped"], max_grad_norm=1.0)]
    results, trained = run(trials)
    assert trained == []  # no student trained
    assert [r.status for r in results] == ["failed", "failed"]
    assert {r.error_type for r in results} == {"TeacherGateRefused"}
    message = results[0].error_message
    assert "wrong label order" in message and gate_teachers["swapped"] in message and TASK in message
    assert f"options: {{{TEACHER_LABEL_ORDER}: [1, 0]}}" in message
    gate = gate_of(results[0])
    assert gate["decision"] == "refused" and gate["reason"] == "label_order"
    assert gate["score"] < 0.1 and gate["best_score"] > 0.9 and gate["best_order"] == [1, 0]


def test_declared_the_swapped_teacher_trains_its_students_as_the_original(
    gate_teachers: dict[str, str],
) -> None:
    (declared,), trained = run([make_trial(gate_teachers["swapped"], **{TEACHER_LABEL_ORDER: (1, 0)})])
    (original,), _ = run([make_trial(gate_teachers["good"])])
    assert declared.status == original.status == "done" and trained == [declared.trial.trial_id]
    assert declared.scores["validation"] == pytest.approx(original.scores["validation"], abs=1e-6)
    assert declared.loss_terms == pytest.approx(original.loss_terms, abs=1e-6)
    assert declared.extra["teacher_scores"]["validation"]["accuracy"] > 0.9  # scored in the task's order
    assert declared.extra["teacher_scores"]["validation"] == pytest.approx(
        original.extra["teacher_scores"]["validation"]
    )
    assert declared.extra["teacher_label_order"] == {
        "order": [1, 0],
        "basis": "declared",
        "teacher_names": ["LABEL_0", "LABEL_1"],
    }
    assert gate_of(declared)["decision"] == "accepted" and gate_of(declared)["score"] > 0.9


def test_the_verdict_is_cached_per_teacher_task_and_order(
    gate_teachers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run([make_trial(gate_teachers["good"])])  # scored here, or by an earlier test

    def no_scoring(*args: object, **kwargs: object) -> None:
        raise AssertionError("the gate scored the teacher again")

    monkeypatch.setattr(teacher_gate, "teacher_logits", no_scoring)
    (result,), _ = run([make_trial(gate_teachers["good"], max_grad_norm=5.0)])
    assert result.status == "done" and gate_of(result)["cached"] is True
    (refused,), _ = run([make_trial(gate_teachers["swapped"], max_grad_norm=5.0)])
    assert refused.error_type == "TeacherGateRefused" and gate_of(refused)["cached"] is True


def test_a_random_teacher_is_refused_at_the_majority_class(gate_teachers: dict[str, str]) -> None:
    (result,), trained = run([make_trial(gate_teachers["random"])])
    assert result.status == "failed" and trained == []
    assert result.error_type == "TeacherGateRefused"
    assert "majority class" in result.error_message and f"{TEACHER_GATE}: false" in result.error_message
    assert gate_of(result)["reason"] == "majority"


def test_teacher_gate_false_skips_the_gate_and_says_so(gate_teachers: dict[str, str]) -> None:
    (result,), trained = run([make_trial(gate_teachers["random"], **{TEACHER_GATE: False})])
    assert result.status == "done" and trained == [result.trial.trial_id]
    assert gate_of(result) == {"checked": False, "why": f"{TEACHER_GATE}: false"}


def test_kdgrid_fine_tuned_teachers_are_not_gated(gate_teachers: dict[str, str]) -> None:
    (result,), _ = run([make_trial(gate_teachers["finetuned"])])
    assert result.status == "done" and gate_of(result)["checked"] is False


def test_the_cli_exits_2_on_a_refused_teacher(
    gate_teachers: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kdgrid.cli import main

    config = tmp_path / "trial.json"
    config.write_text(json.dumps(make_trial(gate_teachers["swapped"]).to_dict()))
    with pytest.raises(SystemExit) as exit_info:
        main(["trial", str(config), "--device", "cpu"])
    assert exit_info.value.code == 2
    assert "wrong label order" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("which", "code", "last_line"),
    [
        ("swapped", 0, "declare it in the sweep file (on its trials): options: {teacher_label_order: [1, 0]}"),
        ("good", 0, "nothing to declare"),
        ("random", 1, "no order fits"),
    ],
)
def test_teacher_check_prints_the_order_that_fits_and_its_declaration(
    gate_teachers: dict[str, str], capsys: pytest.CaptureFixture[str], which: str, code: int, last_line: str
) -> None:
    """The swapped teacher's declaration is the one that makes its students train as the original's."""
    from kdgrid.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["teacher", "check", gate_teachers[which], "--task", TASK, "--max-length", "32", "--device", "cpu"])  # fmt: skip
    out = capsys.readouterr().out
    assert exit_info.value.code == code, out
    assert last_line in out.strip().splitlines()[-1]
    if which == "good":
        assert "the order that fits is [0, 1], accuracy" in out


def test_the_pre_flight_reads_the_cached_refusal_under_the_gates_own_key(gate_teachers: dict[str, str]) -> None:
    (refused,), _ = run([make_trial(gate_teachers["swapped"])])  # scored and cached here or by an earlier test
    assert teacher_gate.cached_refusal(make_trial(gate_teachers["swapped"], max_grad_norm=1.0)) == (
        refused.error_message
    )
    assert teacher_gate.cached_refusal(make_trial(gate_teachers["good"])) is None
    assert teacher_gate.cached_refusal(make_trial(gate_teachers["swapped"], **{TEACHER_LABEL_ORDER: [1, 0]})) is None
    assert teacher_gate.cached_refusal(make_trial(gate_teachers["swapped"], **{TEACHER_GATE: False})) is None
    assert teacher_gate.cached_refusal(replace(make_trial(gate_teachers["swapped"]), max_length=24)) is None


def test_run_refuses_a_teacher_refused_before_and_creates_no_store(
    gate_teachers: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kdgrid.cli import main

    run([make_trial(gate_teachers["swapped"])])  # the refusal is cached (here or by an earlier test)
    sweep = write_sweep(tmp_path / "sweep.yaml", gate_teachers["swapped"])
    store = tmp_path / "store"
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(sweep), "--store", str(store)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("error:") == 1 and "Traceback" not in err
    assert "wrong label order" in err and f"options: {{{TEACHER_LABEL_ORDER}: [1, 0]}}" in err
    assert err.count(gate_teachers["swapped"]) == 1  # one message for the two trials
    assert not store.exists()


def test_run_gates_a_teacher_never_gated_before_in_its_pre_flight_and_creates_no_store(
    gate_teachers: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kdgrid.cli import main

    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path / "cache"))  # no verdict cached: the teacher was never gated
    sweep = write_sweep(tmp_path / "sweep.yaml", gate_teachers["swapped"])
    store = tmp_path / "store"
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(sweep), "--store", str(store)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("error:") == 1 and "Traceback" not in err
    assert "wrong label order" in err and f"options: {{{TEACHER_LABEL_ORDER}: [1, 0]}}" in err
    assert err.count(gate_teachers["swapped"]) == 1  # gated once for the two trials
    assert not store.exists()
    refusal = teacher_gate.cached_refusal(make_trial(gate_teachers["swapped"]))
    assert refusal is not None and refusal in err  # cached under the jobs' own key


def test_run_scores_an_accepted_teacher_once_in_its_pre_flight_and_its_jobs_read_the_verdict(
    gate_teachers: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kdgrid.sweep_run import RunOptions, run_sweep

    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path / "cache"))
    scored: list[int] = []
    logits = teacher_gate.teacher_logits
    monkeypatch.setattr(teacher_gate, "teacher_logits", lambda *args: scored.append(1) or logits(*args))
    lines: list[str] = []
    sweep = write_sweep(tmp_path / "sweep.yaml", gate_teachers["good"])
    outcome = run_sweep(
        sweep,
        tmp_path / "store",
        RunOptions(executor_settings={"local_progress": False}),
        log=lines.append,
    )
    assert outcome.ok and outcome.done_now == 2 and scored == [1]
    assert sum("teacher gate: scoring teacher" in line for line in lines) == 1
    rows = read_store(tmp_path / "store")
    gates = [json.loads(extra)["teacher_gate"] for extra in rows["extra_json"]]
    assert all(gate["decision"] == "accepted" and gate["cached"] is True for gate in gates)


def test_on_a_gpu_the_pre_flight_scores_in_a_child_and_never_initialises_cuda_here(
    gate_teachers: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This process sees a GPU (patched) and any CUDA initialisation in it fails the test: the verdicts come from a
    spawned child (which, on this machine, finds no GPU and scores on the CPU) and are cached for the jobs."""
    from kdgrid.preflight import gate as gate_preflight

    def no_cuda_here(*args: object, **kwargs: object) -> None:
        raise AssertionError("CUDA was initialised in the launcher")

    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path / "cache"))
    # A GPU is seen only through torch's NVML check, the one that initialises nothing a forked worker inherits.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: os.environ.get(gate_preflight.NVML_CHECK) == "1")
    monkeypatch.setattr(torch.cuda, "_lazy_init", no_cuda_here)
    monkeypatch.setattr(gate_preflight, "score_teacher", no_cuda_here)  # not in this process
    trials = [make_trial(gate_teachers["swapped"]), make_trial(gate_teachers["good"])]
    lines: list[str] = []
    refusals, problems = gate_preflight.gate_teachers_here(trials, log=lines.append)
    assert len(refusals) == 1 and "wrong label order" in refusals[0] and problems == []
    assert all("a child process" in line for line in lines) and len(lines) == 2
    assert not torch.cuda.is_initialized()
    # The child cached both verdicts: a second pre-flight reads them without scoring anything.
    assert gate_preflight.gate_teachers_here(trials[:2]) == (refusals, [])


def test_on_the_cpu_the_pre_flight_scores_in_this_process(
    gate_teachers: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kdgrid.preflight import gate as gate_preflight

    def no_child(*args: object, **kwargs: object) -> None:
        raise AssertionError("a child process was started for the CPU")

    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(gate_preflight, "score_in_child", no_child)
    refusals, problems = gate_preflight.gate_teachers_here([make_trial(gate_teachers["swapped"])], device="cpu")
    assert len(refusals) == 1 and problems == []


# ------------------------------------------------------------------------------------ options and grouping


def test_teacher_options_split_groups_and_leave_other_trials_alone() -> None:
    plain = make_trial("t")
    assert group_key(plain) == tuple(getattr(plain, f) for f in ("task", "teacher", "seed", "batch_size",
                                                                  "max_length", "epochs", "max_train_samples"))  # fmt: skip
    declared = make_trial("t", **{TEACHER_LABEL_ORDER: [1, 0]})
    assert group_key(declared) != group_key(plain)
    assert group_key(make_trial("t", soft_t2=True)) == group_key(plain)  # other options share the pass


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({TEACHER_LABEL_ORDER: "entailment"}, "list of at least two"),
        ({TEACHER_LABEL_ORDER: ["a", "A"]}, "names a label twice"),
        ({TEACHER_GATE: "off"}, "allowed: true, false"),
    ],
)
def test_invalid_teacher_options_are_refused(options: dict, fragment: str) -> None:
    (problem,) = teacher_option_problems(make_trial("t", **options))
    assert fragment in problem


# ---------------------------------------------------------------------------------------- label alignment


def test_meaningful_id2label_names_give_the_order_whatever_their_spelling() -> None:
    mnli = get_task("mnli")
    order = resolve_label_order(mnli, "some/teacher", {0: "CONTRADICTION", 1: "Entailment", 2: "neutral"})
    assert order.basis == "id2label" and order.order == (2, 0, 1)
    assert order.labels_of() == ["contradiction", "entailment", "neutral"]
    rte = resolve_label_order(get_task("rte"), "x/y", {0: "entailment", 1: "Not-Entailment"})
    assert rte.basis == "id2label" and rte.is_identity


def test_generic_names_use_the_known_orders_then_identity() -> None:
    mnli = get_task("mnli")
    generic = {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}
    known = resolve_label_order(mnli, "textattack/bert-base-uncased-MNLI", generic)
    assert known.basis == "known" and known.labels_of() == ["contradiction", "entailment", "neutral"]
    assert "ishan/bert-base-uncased-mnli" not in KNOWN_LABEL_ORDERS  # public uses disagree: the gate decides
    large = resolve_label_order(mnli, "yoshitomo-matsubara/bert-large-uncased-mnli", generic)
    assert large.basis == "known" and large.labels_of() == ["entailment", "neutral", "contradiction"]  # torchdistill
    guessed = resolve_label_order(mnli, "ishan/bert-base-uncased-mnli", generic)
    assert guessed.basis == "identity" and guessed.is_identity
    other_words = resolve_label_order(mnli, "x/y", {0: "yes", 1: "maybe", 2: "no"})
    assert other_words.basis == "identity" and other_words.teacher_names == ("yes", "maybe", "no")


def test_a_declared_order_wins_and_is_checked_against_the_task() -> None:
    mnli = get_task("mnli")
    names = {0: "entailment", 1: "neutral", 2: "contradiction"}
    declared = resolve_label_order(mnli, "x/y", names, ("contradiction", "entailment", "neutral"))
    assert declared.basis == "declared" and declared.order == (2, 0, 1)
    with pytest.raises(ConfigError, match="not a label of the task"):
        resolve_label_order(mnli, "x/y", names, ("contradiction", "entailment", "nope"))
    with pytest.raises(ConfigError, match="3 labels"):
        resolve_label_order(mnli, "x/y", names, ("contradiction", "entailment"))


def test_align_puts_label_j_in_column_j() -> None:
    order = LabelOrder((2, 0, 1), "declared")  # outputs: contradiction, entailment, neutral
    logits = torch.tensor([[10.0, 20.0, 30.0]])
    assert order.align(logits).tolist() == [[20.0, 30.0, 10.0]]  # entailment, neutral, contradiction
    assert LabelOrder((0, 1), "identity").align(logits[:, :2]) is not None


# ------------------------------------------------------------------------------------------- the verdicts


def test_ties_and_small_gaps_keep_the_given_order() -> None:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 300)
    logits = rng.normal(size=(300, 3))  # chance level in every order
    report, reason = judge_classifier(logits, labels, LabelOrder((0, 1, 2), "identity"))
    assert reason == "majority" and len(report["orders"]) == 6


def test_a_permuted_three_class_teacher_gets_the_declaration_that_fixes_it() -> None:
    labels = np.arange(300) % 3
    outputs = (labels + 1) % 3  # output k means label k - 1: contradiction, entailment, neutral
    logits = np.eye(3)[outputs]
    order = LabelOrder((0, 1, 2), "identity", ("entailment", "neutral", "contradiction"))
    report, reason = judge_classifier(logits, labels, order)
    assert reason == "label_order" and report["best_score"] == 1.0 and report["score"] == 0.0
    assert (
        report["declaration"] == f"options: {{{TEACHER_LABEL_ORDER}: [contradiction, entailment, neutral]}}"
    )


def test_a_regression_teacher_must_correlate() -> None:
    labels = np.linspace(0, 5, 100)
    assert judge_regression(labels + np.sin(labels), labels)[1] is None
    assert judge_regression(-labels, labels)[1] == "constant"
    assert judge_regression(np.full(100, 2.5), labels)[1] == "constant"


STSB_ORDER = LabelOrder((0,), "identity")  # a regression head's one output


def sts_labels_and_teacher(n: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """Gold scores spread over STS-B's 0-5 and a realistic fine-tuned teacher's outputs: shrunk towards the mean
    (spread ratio 0.9), slightly biased, with noise (Pearson r about 0.9)."""
    rng = np.random.default_rng(0)
    labels = rng.uniform(0.0, 5.0, n)
    teacher = 2.5 + 0.85 * (labels - 2.5) + 0.1 + rng.normal(0.0, 0.55, n)
    return teacher, labels


def test_a_realistic_regression_teacher_passes_with_its_scale_in_the_report() -> None:
    teacher, labels = sts_labels_and_teacher()
    report, reason = judge_regression(teacher, labels)
    assert reason is None and report["problems"] == {}
    assert 0.85 < report["score"] < 0.95
    assert report["mse"] < 0.2 * report["constant_mse"]
    assert report["label_range"][0] >= 0.0 and report["label_range"][1] <= 5.0


@pytest.mark.parametrize(
    ("name", "transform", "reason", "named"),
    [
        ("on 0-1", lambda t: t / 5.0, "mse", {"mse", "offset", "spread"}),
        ("shifted by a point", lambda t: t + 1.0, "offset", {"offset", "range"}),
        ("shifted down by 0.8", lambda t: t - 0.8, "offset", {"offset", "range"}),
        ("scaled by 3 around the mean", lambda t: 2.5 + 3.0 * (t - 2.5), "mse", {"mse", "spread", "range"}),
        ("on 0-100", lambda t: t * 20.0, "mse", {"mse", "offset", "spread", "range"}),
    ],
)
def test_a_correlated_regression_teacher_on_another_scale_is_refused_naming_what_differs(
    name: str, transform, reason: str, named: set[str]
) -> None:
    teacher, labels = sts_labels_and_teacher()
    report, got = judge_regression(transform(teacher), labels)
    assert report["score"] > 0.85, name  # Pearson alone would have accepted it
    assert got == reason and set(report["problems"]) == named, (name, report["problems"])
    message = teacher_gate.refusal_message("t", "stsb", "validation", report, got, STSB_ORDER)
    assert "not on the labels' scale" in message and "no student was trained" in message
    for problem in named:
        assert report["problems"][problem] in message


@pytest.mark.parametrize("transform", [lambda t: -t, lambda t: 5.0 - t])
def test_a_negated_regression_teacher_is_refused_as_negated(transform) -> None:
    teacher, labels = sts_labels_and_teacher()
    report, reason = judge_regression(transform(teacher), labels)
    assert reason == "constant" and report["score"] < -0.85
    message = teacher_gate.refusal_message("t", "stsb", "validation", report, reason, STSB_ORDER)
    assert "negated" in message


def test_the_refusal_is_a_kdgrid_error() -> None:
    assert issubclass(TeacherGateRefused, KdgridError)
