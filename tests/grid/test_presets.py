"""`preset: paper`: each method's paper recipe set on the trials that use it, never over what a study writes."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kdgrid.cli import app
from kdgrid.core.method_registry import preset_names, presets_named
from kdgrid.errors import ConfigError
from kdgrid.grid import load_sweep
from kdgrid.trial import Trial

HEAD = """
name: presets
fixed: {task: polarity, teacher: minilm-l6, student: bert-tiny, init: random, lr: 1.0e-3, temperature: 1,
        alpha: 0.1}
"""


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(HEAD) + textwrap.dedent(body))
    return path


def by_study(path: Path) -> dict[str, Trial]:
    sweep = load_sweep(path)
    return {planned.study: planned.trial for planned in sweep.trials}


def test_top_level_preset_replaces_the_shared_recipe_not_the_studys_own(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        preset: paper
        studies:
          soft: {fixed: {knowledge: []}}
          dot: {fixed: {knowledge: [hidden_mse], strategy: Last-1, options: {optimizer: dot}}}
          dot_own_lr: {fixed: {knowledge: [hidden_mse], strategy: Last-1, lr: 0.01, options: {optimizer: dot}}}
          adakd: {fixed: {knowledge: [], options: {example_weight: adakd}}}
          masked: {fixed: {knowledge: [], options: {mask_input: teacher}}}
          masked_student: {fixed: {knowledge: [], options: {mask_input: student}}}
          ensemble: {fixed: {knowledge: [hidden_mse], strategy: Last-1, projection: ensemble}}
          linear: {fixed: {knowledge: [hidden_mse], strategy: Last-1}}
        """,
    )
    trials = by_study(path)
    # the shared lr 1e-3 is replaced by DOT's 0.05; a study's own lr is kept
    assert trials["dot"].lr == 0.05 and trials["dot"].option("dot_delta") == 0.075
    assert trials["dot_own_lr"].lr == 0.01 and trials["dot_own_lr"].option("dot_delta") == 0.075
    assert (trials["adakd"].soft_weight, trials["adakd"].alpha) == (1.0, 1.0)
    assert trials["masked"].alpha == 0.5
    assert (trials["masked"].option("mask_by"), trials["masked"].option("mask_fraction")) == ("maskedkd", 0.5)
    # the paper's criterion needs the teacher's side: student-side masking is left alone
    assert trials["masked_student"].option("mask_by") is None and trials["masked_student"].alpha == 0.1
    # the ensemble's members; the study's knowledge (hidden_mse) is its own, so cos is not set
    assert trials["ensemble"].option("projector_member") == "relu_linear"
    assert trials["ensemble"].knowledge == ("hidden_mse",)
    # a plain linear projection is no ensemble; a method-free study is untouched
    assert trials["linear"].option("projector_member") is None
    assert trials["soft"] == Trial(task="polarity", teacher="minilm-l6", student="bert-tiny", init="random",
                                   lr=1e-3, temperature=1, alpha=0.1, knowledge=())  # fmt: skip
    presets = load_sweep(path).presets
    assert presets["dot"] == {"preset": "paper", "set": {"lr": 0.05, "options.dot_delta": 0.075}}
    assert presets["dot_own_lr"]["set"] == {"options.dot_delta": 0.075}
    assert "soft" not in presets and "linear" not in presets


def test_preset_values_are_the_trials_own(tmp_path: Path) -> None:
    """The trial a preset makes is the trial written out by hand: same id."""
    preset = write(tmp_path, "preset: paper\nstudies:\n  a: {fixed: {knowledge: [], options: {dual_head: true}}}\n")
    by_hand = tmp_path / "hand.yaml"
    by_hand.write_text(
        textwrap.dedent(HEAD).replace("temperature: 1", "temperature: 2")
        + "studies:\n  a: {fixed: {knowledge: [], options: {dual_head: true}}}\n"
    )
    assert by_study(preset)["a"].temperature == 2
    assert by_study(preset)["a"].trial_id == by_study(by_hand)["a"].trial_id


def test_axes_overrides_and_include_entries_keep_their_values(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        studies:
          dot:
            preset: paper
            fixed: {knowledge: [hidden_mse], strategy: Last-1, options: {optimizer: dot}}
            axes: {seed: [0, 1]}
            overrides: [{when: {seed: 1}, set: {options: {dot_delta: 0.0}}}]
          adakd:
            preset: paper
            fixed: {knowledge: [], options: {example_weight: adakd}}
            include: [{alpha: 0.3}]
          dot_lr:
            preset: paper
            fixed: {knowledge: [hidden_mse], strategy: Last-1, options: {optimizer: dot}}
            axes: {lr: [0.01, 0.15]}
        """,
    )
    trials = [(p.study, p.trial) for p in load_sweep(path).trials]
    dot = {t.seed: t for s, t in trials if s == "dot"}
    # an override's `set` anywhere in the study protects its key for every point
    assert dot[0].lr == dot[1].lr == 0.05 and dot[0].option("dot_delta") is None
    assert dot[1].option("dot_delta") == 0.0
    (adakd,) = [t for s, t in trials if s == "adakd"]
    assert (adakd.alpha, adakd.soft_weight) == (0.3, 1.0)
    assert sorted((t.lr, t.option("dot_delta")) for s, t in trials if s == "dot_lr") == [(0.01, 0.075),
                                                                                          (0.15, 0.075)]


def test_an_unknown_preset_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path, "preset: papr\nstudies:\n  a: {fixed: {knowledge: [], options: {dual_head: true}}}\n")
    with pytest.raises(ConfigError) as raised:
        load_sweep(path)
    assert "preset: unknown preset 'papr'; allowed: paper" in str(raised.value)
    assert "did you mean 'paper'" in str(raised.value)


@pytest.mark.parametrize(
    "study",
    [
        "soft:\n    preset: paper\n    fixed: {knowledge: []}",  # no method with a preset
        # dual-head's preset is its temperature, which the study sweeps itself
        "soft:\n    preset: paper\n    fixed: {knowledge: [], options: {dual_head: true}}\n    axes: {temperature: [1, 4]}",
    ],
)
def test_a_study_preset_that_sets_nothing_is_refused(tmp_path: Path, study: str) -> None:
    path = write(tmp_path, f"studies:\n  {study}\n")
    with pytest.raises(ConfigError, match=r"studies\.soft\.preset: preset 'paper' sets nothing here"):
        load_sweep(path)


def test_a_top_level_preset_that_sets_nothing_anywhere_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "preset: paper\nfixed: {knowledge: []}\n")  # no studies: one study, `main`
    with pytest.raises(ConfigError, match=r"s\.yaml: preset: preset 'paper' sets nothing: no trial of the sweep"):
        load_sweep(path)


def test_every_preset_value_is_valid_on_a_trial_of_its_method() -> None:
    """Each declared preset names Trial fields and registered options only (a typo would silently set a
    field no trial reads)."""
    from kdgrid.core.options import OPTIONS

    assert preset_names() == ["paper"]
    covered = {spec.name for spec, _ in presets_named("paper")}
    assert {"dot", "dual_head", "adakd", "masking", "lad", "projectors", "ctkd", "layer_curriculum"} <= covered
    for spec, preset in presets_named("paper"):
        assert preset.adapted, spec.name
        assert all(field in Trial.field_names() for field, _ in preset.fields), spec.name
        assert all(option in OPTIONS for option, _ in preset.options), spec.name


def test_plan_shows_what_a_preset_set(tmp_path: Path) -> None:
    path = write(tmp_path, "preset: paper\nstudies:\n  dot: {fixed: {knowledge: [hidden_mse], strategy: Last-1, "
                           "options: {optimizer: dot}}}\n")  # fmt: skip
    result = CliRunner().invoke(app, ["plan", str(path), "--store", str(tmp_path / "store")])
    assert result.exit_code == 0, result.output
    assert "preset paper in study dot set: lr=0.05, options.dot_delta=0.075" in result.output


def test_methods_lists_each_preset() -> None:
    result = CliRunner().invoke(app, ["methods", "--json"])
    assert result.exit_code == 0, result.output
    listed = {entry["name"]: entry["presets"] for entry in json.loads(result.output)}
    assert listed["dot"] == {"paper": {"lr": 0.05, "options.dot_delta": 0.075}}
    assert listed["grad_split"] == {}  # a method without a preset
    text = CliRunner().invoke(app, ["methods"]).output
    assert "preset paper: sets soft_weight=1.0, alpha=1.0" in text
