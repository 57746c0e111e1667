"""A sweep's problems in one pass, each where it is written, once, with the closest names: a misspelt trial
field or option gets a did-you-mean, an unknown option is located at the options mapping that holds it (not at
the axes of every trial), and a problem shared by many trials is stated once with their count."""

from __future__ import annotations

from pathlib import Path

import pytest

from kdgrid.errors import ConfigError
from kdgrid.grid import load_sweep

HEAD = "name: s\nfixed:\n  task: polarity\n  teacher: minilm-l6\n  student: bert-tiny\n"


def problems_of(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        load_sweep(path)
    return [line.strip() for line in str(refused.value).splitlines()[1:]]


def test_every_problem_once_where_written_with_suggestions(tmp_path: Path) -> None:
    lines = problems_of(tmp_path, HEAD + (
        "  temprature: 2\n  options:\n    grad_cosine_batch: 4\n"
        "axes:\n  knowledge: [hidden_mse, value_relation]\n  strategy: [Last-1, Last]\n  seed: [0, 1, 2]\n"
        "studies:\n  main:\n    axes:\n      lrr: [1.0e-3]\n"
    ))  # fmt: skip
    assert len(lines) == 3  # all of them in one pass
    field, option, study = lines
    assert "fixed.temprature: unknown trial field 'temprature'" in field
    assert field.endswith("did you mean 'temperature'?")
    assert "fixed.options.grad_cosine_batch: unknown option 'grad_cosine_batch'" in option
    assert option.endswith("did you mean 'grad_cosine_batches'?")
    assert "studies.main.axes.lrr" in study and "did you mean 'lr'?" in study


def test_a_problem_of_many_trials_is_stated_once_with_their_count(tmp_path: Path) -> None:
    lines = problems_of(tmp_path, HEAD + (
        "  options:\n    pkd.scale: mean\naxes:\n  knowledge: [hidden_mse]\n  strategy: [Last-1, Last]\n"
        "  seed: [0, 1, 2]\n"
    ))  # fmt: skip
    assert len(lines) == 1
    (line,) = lines
    assert "option 'pkd.scale' sets a variant of 'pkd', which the trial does not use" in line
    assert "(6 trials, e.g. trial {task=polarity" in line


def test_an_unknown_option_on_an_axis_is_located_at_its_entry(tmp_path: Path) -> None:
    lines = problems_of(tmp_path, HEAD + "axes:\n  options:\n    - {max_grad_norm: 1.0}\n    - {max_grad_nrom: 2.0}\n")
    assert len(lines) == 1 and "axes.options[1].max_grad_nrom: unknown option" in lines[0]
    assert lines[0].endswith("did you mean 'max_grad_norm'?")


def test_plan_lists_an_options_axis_one_entry_per_value_and_none_as_the_tables_do() -> None:
    from kdgrid.sweep_plan import sweep_axes
    from kdgrid.trial import Trial

    base = dict(task="polarity", teacher="minilm-l6", student="bert-tiny")
    trials = [
        Trial(**base, options={"data_seed": 0, "max_grad_norm": 1.0}, relation_heads=None),
        Trial(**base, options={"data_seed": 0}, relation_heads=4),
    ]
    axes = sweep_axes(trials)
    assert axes["options"] == ["{data_seed=0, max_grad_norm=1.0}", "{data_seed=0}"]
    assert axes["relation_heads"] == ["(none)", "4"]


def test_a_misspelt_study_key_and_executor_setting_get_a_suggestion(tmp_path: Path) -> None:
    lines = problems_of(tmp_path, HEAD + "studies:\n  main:\n    axis:\n      lr: [1.0e-3]\n")
    assert any("studies.main.axis: unknown study key 'axis'" in line and "did you mean 'axes'?" in line
               for line in lines), lines  # fmt: skip
    from kdgrid.launch.local import LocalSettings

    with pytest.raises(ConfigError, match=r"did you mean 'local_workers'"):
        LocalSettings.from_flags({"local_worker": 2})
