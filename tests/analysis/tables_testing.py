"""Helpers for the table/figure tests: small stores written with the store's own API, and hand-made tidy rows."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from kdgrid.analysis.schema import CONFIG_COLUMNS
from kdgrid.cli import main
from kdgrid.result import TrialResult
from kdgrid.store import write_result
from kdgrid.trial import Trial


def result(
    score: float | dict[str, dict[str, float]],
    *,
    task: str = "mrpc",
    student: str = "bert-tiny",
    teacher: str = "bert-base",
    last: float | None = None,
    status: str = "done",
    extra: dict[str, Any] | None = None,
    student_params: int | None = None,
    student_flops: int | None = None,
    **fields: Any,
) -> TrialResult:
    """A TrialResult whose best-epoch score is ``score`` (accuracy on ``validation``, or a nested dict)."""
    trial = Trial(task=task, teacher=teacher, student=student, **fields)
    scores = score if isinstance(score, dict) else {"validation": {"accuracy": score}}
    last_scores = scores if last is None else {"validation": {"accuracy": last}}
    return TrialResult(
        trial=trial,
        status=status,  # type: ignore[arg-type]
        scores=scores if status == "done" else {},
        last_scores=last_scores if status == "done" else {},
        best_epoch=1 if status == "done" else None,
        student_params=student_params,
        student_flops=student_flops,
        extra=extra or {},
    )


def write(store: Path, study: str, *results: TrialResult, sweep: str | None = None) -> None:
    for item in results:
        write_result(store, item, sweep=sweep or f"{study}.yaml", study=study)


def tidy_rows(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Hand-made tidy rows: every config column defaulted (labels "", numbers NaN, role student)."""
    filled = []
    for row in rows:
        base: dict[str, Any] = {c: "" for c in CONFIG_COLUMNS}
        base.update(temperature=math.nan, alpha=math.nan, soft_weight=math.nan, role="student")
        base.update(dev_set="validation", metric="accuracy")
        base.update(row)
        filled.append(base)
    return pd.DataFrame(filled)


def run_kdgrid(capsys: Any, *args: str) -> tuple[int, str, str]:
    """``kdgrid ARGS`` in this process: (exit status, stdout, stderr); 0 when it returned normally."""
    try:
        main(list(args))
        code = 0
    except SystemExit as stop:
        code = int(stop.code or 0)
    out, err = capsys.readouterr()
    return code, out, err
