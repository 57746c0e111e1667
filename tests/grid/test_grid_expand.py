"""The grid language: expansion, canonical trials, rules, studies, identity, and every error at once."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest

from kdgrid.errors import ConfigError
from kdgrid.grid import load_sweep
from kdgrid.trial import Trial
from tests.sweep_studies import trials_of


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_axes_cross_and_canonical_values(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "s.yaml",
        """
        fixed: {teacher: bert-base, init: pretrain}
        axes:
          task: [mrpc, SST2]
          student: [bert-tiny, w144-l8]
          knowledge: [cos, [mmd, gram], null]
          strategy: [last-1, First]
        """,
    )
    sweep = load_sweep(path)
    # 2 x 2 x 3 x 2 = 24 points; the knowledge-free baseline has no strategy, so its 2 strategies merge: 20
    assert sweep.grid_points == 24 and sweep.repeated == 4 and len(sweep.trials) == 20
    trials = [p.trial for p in sweep.trials]
    assert {t.task for t in trials} == {"mrpc", "sst2"}
    assert {t.student for t in trials} == {"bert-tiny", "w144-l8-h4-f576"}
    assert {t.strategy for t in trials} == {"Last-1", "First", None}
    assert {t.knowledge for t in trials} == {("cos",), ("gram", "mmd"), ()}
    assert all(t.strategy is None for t in trials if not t.knowledge)
    assert all(p.study == "main" for p in sweep.trials)
    assert len({t.trial_id for t in trials}) == 20


def test_overrides_exclude_include_and_templates(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "s.yaml",
        """
        fixed: {teacher: bert-base, student: bert-mini, init: general_distillation,
                init_from: "gd/{student}-{task}"}
        axes:
          task: [mrpc, rte, sst2]
          knowledge: [cos, pkd]
          strategy: [First, Last-1]
        overrides:
          - when: {task: [mrpc, rte]}
            set: {temperature: 4}
          - when: {task: rte, knowledge: pkd}
            set: {alpha: 0.5}
        exclude:
          - {task: sst2, strategy: First}
          - {knowledge: [[cos]], task: mrpc}
        include:
          - {task: sst2, knowledge: [], soft_weight: 0.0, alpha: 1.0}
        """,
    )
    trials = [p.trial for p in load_sweep(path).trials]
    # 12 points - 2 (sst2/First) - 2 (mrpc/cos) + 1 include = 9
    assert len(trials) == 9
    assert not any(t.task == "sst2" and t.strategy == "First" for t in trials)
    assert not any(t.task == "mrpc" and t.knowledge == ("cos",) for t in trials)
    for t in trials:
        assert t.temperature == (4.0 if t.task in ("mrpc", "rte") else 1.0)
        assert t.alpha == (
            0.5 if (t.task, t.knowledge) == ("rte", ("pkd",)) else (1.0 if t.soft_weight == 0 else 0.1)
        )
        assert t.init_from == f"gd/bert-mini-{t.task}"
    baseline = [t for t in trials if not t.knowledge]
    assert len(baseline) == 1 and baseline[0].soft_weight == 0.0 and baseline[0].strategy is None


def test_overrides_and_includes_merge_options_option_by_option(tmp_path: Path) -> None:
    """Two overrides that set different options both hold (the second does not silently drop the first's);
    a later value of the same option wins; an include keeps `fixed`'s options beside its own."""
    path = write(
        tmp_path,
        "s.yaml",
        """
        fixed: {teacher: bert-base, student: bert-mini, knowledge: [], options: {max_grad_norm: 2.0}}
        axes:
          task: [mrpc, rte]
        overrides:
          - when: {task: rte}
            set: {options: {data_seed: 7, max_grad_norm: 3.0}}
          - when: {task: rte}
            set: {options: {auto_batches: 4}}
        include:
          - {task: sst2, options: {data_seed: 1}}
        """,
    )
    options = {p.trial.task: dict(p.trial.options) for p in load_sweep(path).trials}
    assert options == {
        "mrpc": {"max_grad_norm": 2.0},
        "rte": {"data_seed": 7, "max_grad_norm": 3.0, "auto_batches": 4},
        "sst2": {"max_grad_norm": 2.0, "data_seed": 1},
    }


def test_options_fixed_at_every_level_merge_into_each_trial(tmp_path: Path) -> None:
    """Options fixed in an `extends` file, at the top level, in a study and on a study's axis all reach the
    study's trials, merged option by option (a study that sets one option must not silently drop the others);
    the more specific level wins on the same option."""
    write(tmp_path, "base.yaml", "fixed: {options: {max_grad_norm: 2.0, auto_batches: 3}}\n")
    path = write(
        tmp_path,
        "s.yaml",
        """
        extends: base.yaml
        fixed: {task: mrpc, teacher: bert-base, student: bert-mini, knowledge: [], options: {auto_batches: 4}}
        studies:
          plain: {}
          dot:
            fixed: {options: {optimizer: dot}}
          swept:
            axes:
              options: [{grad_cosine_batches: 2}, {grad_cosine_batches: 4, max_grad_norm: 5.0}]
        """,
    )
    options = sorted((p.study, sorted(dict(p.trial.options).items())) for p in load_sweep(path).trials)
    assert options == [
        ("dot", [("auto_batches", 4), ("max_grad_norm", 2.0), ("optimizer", "dot")]),
        ("plain", [("auto_batches", 4), ("max_grad_norm", 2.0)]),
        ("swept", [("auto_batches", 4), ("grad_cosine_batches", 2), ("max_grad_norm", 2.0)]),
        ("swept", [("auto_batches", 4), ("grad_cosine_batches", 4), ("max_grad_norm", 5.0)]),
    ]


def test_studies_inherit_and_override_the_top_level(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "s.yaml",
        """
        fixed: {teacher: bert-base, init: pretrain, student: bert-tiny}
        axes:
          task: [mrpc, rte]
        studies:
          sizes:
            axes: {student: [bert-tiny, bert-mini]}
          temps:
            fixed: {task: mrpc}
            axes: {temperature: [2, 4]}
          one:
            include:
              - {task: rte, temperature: 8}
        """,
    )
    sweep = load_sweep(path)
    assert sweep.studies == ["sizes", "temps", "one"]
    sizes = trials_of(sweep, "sizes")
    temps = trials_of(sweep, "temps")
    assert len(sizes) == 4 and {t.student for t in sizes} == {"bert-tiny", "bert-mini"}
    assert (
        len(temps) == 2
        and {t.task for t in temps} == {"mrpc"}
        and {t.temperature for t in temps} == {2.0, 4.0}
    )
    assert [(t.task, t.temperature) for t in trials_of(sweep, "one")] == [("rte", 8.0)]


def test_a_trial_two_studies_produce_is_kept_once_under_the_first(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "s.yaml",
        """
        fixed: {teacher: bert-base, student: bert-tiny, task: mrpc}
        studies:
          a: {axes: {temperature: [1, 2]}}
          b: {axes: {temperature: [2, 4]}}
        """,
    )
    sweep = load_sweep(path)
    assert [(p.study, p.trial.temperature) for p in sweep.trials] == [("a", 1.0), ("a", 2.0), ("b", 4.0)]
    assert sweep.grid_points == 4 and sweep.repeated == 1


def test_extends_gives_defaults_that_the_file_may_sweep(tmp_path: Path) -> None:
    write(
        tmp_path,
        "_base.yaml",
        """
        fixed: {teacher: bert-base, init: pretrain, temperature: 3}
        overrides:
          - {when: {task: rte}, set: {alpha: 0.7}}
        """,
    )
    path = write(
        tmp_path,
        "s.yaml",
        """
        extends: _base.yaml
        fixed: {student: bert-tiny}
        axes:
          task: [mrpc, rte]
          init: [random, pretrain]
        """,
    )
    trials = [p.trial for p in load_sweep(path).trials]
    assert len(trials) == 4
    assert {t.init for t in trials} == {"random", "pretrain"}
    assert all(t.temperature == 3.0 and t.teacher == "bert-base" for t in trials)
    assert {t.task: t.alpha for t in trials} == {"mrpc": 0.1, "rte": 0.7}


def test_the_same_trial_in_two_sweeps_has_the_same_id(tmp_path: Path) -> None:
    one = write(
        tmp_path,
        "one.yaml",
        """
        name: first
        fixed: {teacher: bert-base, init: pretrain, task: mrpc, student: bert-mini}
        axes: {knowledge: [[gram, attention_ce_mean]], strategy: [last-1]}
        """,
    )
    two = write(
        tmp_path,
        "two.yaml",
        """
        name: second
        studies:
          other:
            fixed: {task: MRPC, teacher: bert-base, student: BERT-Mini, strategy: Last-1, lr: 1.0e-4}
            axes: {knowledge: [[attention ce, gram], [cos]]}
        """,
    )
    a = load_sweep(one).trials[0].trial
    b = load_sweep(two).trials[0].trial
    assert a == b and a.trial_id == b.trial_id
    assert (
        a.trial_id
        == Trial(
            task="mrpc",
            teacher="bert-base",
            student="bert-mini",
            knowledge=("attention_ce_mean", "gram"),
            strategy="Last-1",
        ).trial_id
    )


def test_every_problem_is_reported_at_once_naming_file_key_and_allowed_values(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bad.yaml",
        """
        fixd: {}
        fixed: {teacher: bert-base, temprature: 2}
        axes:
          task: [mrpc, sst3]
          student: [bert-tiy, bert-tiny]
          knowledge: [attn_foo, cos]
          strategy: []
          seed: [1, 1]
        studies:
          s1:
            axes: {strategy: [Lst-1]}
          s1:
            axes: {strategy: [First]}
        """,
    )
    with pytest.raises(ConfigError) as raised:
        load_sweep(path, store_dir=tmp_path / "a-file" / "store")
    message = str(raised.value)
    expected = [
        "key 's1' is written twice",
        "unknown top-level key 'fixd'; allowed: name, description",
        "fixed.temprature: unknown trial field 'temprature'; allowed: task, teacher",
        "axes.task[1]: unknown task 'sst3'; known tasks: cola",
        "axes.student[0]: unknown student 'bert-tiy'; use one of bert-tiny",
        "axes.knowledge[0]: unknown knowledge 'attn_foo'; valid names: attention_mse_sum",
        "axes.strategy: empty axis",
        "axes.seed: value 1 is listed twice",
    ]
    for fragment in expected:
        assert fragment in message, fragment
    assert message.count(str(path)) >= len(expected)


def test_impossible_combinations_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bad.yaml",
        """
        studies:
          preload:
            fixed: {task: mrpc, teacher: bert-base, student: bert-tiny, init: preload}
          deep:
            fixed: {task: mrpc, teacher: bert-base, student: w128-l24, knowledge: cos, strategy: First}
          no_teacher:
            fixed: {task: polarity, teacher: bert-base, student: bert-tiny}
          no_strategy:
            fixed: {task: rte, teacher: bert-base, student: bert-tiny, knowledge: cos}
          nothing:
            fixed: {task: rte, teacher: bert-base, student: bert-tiny, soft_weight: 0.0, alpha: 0.0}
          heads:
            fixed: {task: rte, teacher: bert-base, student: bert-tiny, relation_heads: 5}
        """,
    )
    with pytest.raises(ConfigError) as raised:
        load_sweep(path)
    message = str(raised.value)
    assert "6 problem(s)" in message
    assert "init 'preload' copies teacher layers" in message and "w768-l2-h12-f3072" in message
    assert "strategy 'First'" in message and "student depth 24, teacher depth 12" in message
    assert "no bert-base teacher for task 'polarity'" in message
    assert "needs a `strategy`" in message
    assert "nothing to learn from" in message
    assert "relation_heads=5 must divide" in message
    assert "studies.deep: trial {task=mrpc" in message


def test_an_unwritable_store_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", "fixed: {task: mrpc, teacher: bert-base, student: bert-tiny}\n")
    blocker = tmp_path / "plain-file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError, match=r"store .* is not a directory"):
        load_sweep(path, store_dir=blocker / "store")
    assert load_sweep(
        path, store_dir=tmp_path / "new-store"
    ).trials  # creatable: fine, and not created by a check
    assert not (tmp_path / "new-store").exists()


def test_a_yaml_syntax_error_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", "fixed: {task: [mrpc\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_sweep(path)


def kdgrid_cli(*args: object) -> tuple[int | str | None, str, str]:
    """Run ``kdgrid ARGS`` in this process: (exit status, stdout, stderr)."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from kdgrid.cli import main

    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as exit_:
            code = exit_.code
    return code, out.getvalue(), err.getvalue()


SEEDS_SWEEP = """
    fixed: {task: rte, teacher: bert-base, student: bert-tiny, seed: %s}
    axes:
      knowledge: [cos, pkd]
      strategy: [First, Last]
    """


def test_seeds_n_makes_n_student_seeds_per_trial_sharing_the_first_seed_s_data_order(tmp_path: Path) -> None:
    from kdgrid.grid.plan import plan_jobs
    from kdgrid.trial import data_order_seed

    plain = load_sweep(write(tmp_path, "plain.yaml", SEEDS_SWEEP % 10))
    seeded = load_sweep(write(tmp_path, "seeded.yaml", "seeds: 3\n" + textwrap.dedent(SEEDS_SWEEP % 10)))
    assert plain.seeds is None and seeded.seeds == 3
    assert len(plain.trials) == 4 and len(seeded.trials) == 12 and seeded.grid_points == 12
    trials = [p.trial for p in seeded.trials]
    for cell in plain.trials:
        same_cell = [
            t for t in trials if (t.knowledge, t.strategy) == (cell.trial.knowledge, cell.trial.strategy)
        ]
        assert sorted(t.seed for t in same_cell) == [10, 11, 12]
        assert {data_order_seed(t) for t in same_cell} == {10}
        assert all(t.option("data_seed") == 10 for t in same_cell)
        # the seeds of a cell differ only in seed (their data_seed is written out, the same for all)
        assert len({dataclasses.replace(t, seed=0) for t in same_cell}) == 1
    # one teacher pass for all 12 (as for the 4 trials without seeds)
    assert len(plan_jobs(trials)) == len(plan_jobs([p.trial for p in plain.trials])) == 1
    # without `seeds` nothing changes: the seed is the data order's too, no data_seed is written
    assert all(p.trial.option("data_seed") is None and p.trial.seed == 10 for p in plain.trials)


def test_seeds_defaults_to_the_trial_seed_default_as_base(tmp_path: Path) -> None:
    text = "seeds: 2\nfixed: {task: rte, teacher: bert-base, student: bert-tiny}\n"
    trials = [p.trial for p in load_sweep(write(tmp_path, "s.yaml", text)).trials]
    assert [(t.seed, t.option("data_seed")) for t in trials] == [(0, 0), (1, 0)]


def test_plan_shows_the_seeds_of_a_cell_as_one_job(tmp_path: Path) -> None:
    store = tmp_path / "store"
    plain_text = textwrap.dedent(SEEDS_SWEEP % 0).replace("axes:", "axes:\n  seed: [0, 1, 2, 3, 4]")
    plain = write(tmp_path, "plain.yaml", plain_text.replace(", seed: 0", ""))
    seeded = write(tmp_path, "seeded.yaml", "seeds: 5\n" + textwrap.dedent(SEEDS_SWEEP % 0))
    summaries = {}
    for path in (plain, seeded):
        code, out, err = kdgrid_cli("plan", path, "--store", store, "--json")
        assert code == 0, err
        summaries[path.stem] = json.loads(out)
    assert summaries["plain"]["trials"] == summaries["seeded"]["trials"] == 20
    assert summaries["plain"]["jobs"] == 5 and summaries["seeded"]["jobs"] == 1
    assert summaries["seeded"]["seeds"] == 5 and summaries["plain"]["seeds"] is None
    code, out, err = kdgrid_cli("plan", seeded, "--store", store)
    assert code == 0, err
    assert "student seeds per cell" in out


@pytest.mark.parametrize(
    ("head", "facts"),
    [
        ("seeds: 0\n", ["seeds: must be an integer >= 1", "got 0"]),
        ("seeds: -2\n", ["seeds: must be an integer >= 1", "got -2"]),
        ("seeds: 2.5\n", ["seeds: must be an integer >= 1", "got 2.5"]),
        ("seeds: three\n", ["seeds: must be an integer >= 1", "got 'three'"]),
        ("seeds: true\n", ["seeds: must be an integer >= 1", "got True"]),
        ("seeds: 3\naxes: {seed: [0, 1]}\n", ["seeds: cannot be combined with a list of seeds (axes.seed)"]),
        (
            "seeds: 3\nstudies: {a: {axes: {seed: [0, 1]}}}\n",
            ["seeds: cannot be combined", "studies.a.axes.seed"],
        ),
        ("seeds: 3\naxes: {options: [{data_seed: 4}]}\n", ["seeds: sets each trial's options.data_seed"]),
    ],
)
def test_bad_seeds_are_refused_by_plan_with_exit_status_2(
    tmp_path: Path, head: str, facts: list[str]
) -> None:
    path = write(tmp_path, "s.yaml", head + "fixed: {task: rte, teacher: bert-base, student: bert-tiny}\n")
    with pytest.raises(ConfigError) as caught:
        load_sweep(path)
    assert all(fact in str(caught.value) for fact in facts), str(caught.value)
    store = tmp_path / "store"
    code, _, err = kdgrid_cli("plan", path, "--store", store)
    assert code == 2 and "Traceback" not in err
    assert all(fact in err for fact in facts), err
    assert not store.exists()


# A sweep file and a trial file reach a Trial through one path (`kdgrid.grid.expand.build_trial`): the same settings
# give the same trial, and the same problem the same message, only its hint naming where the file sets a field.
@pytest.mark.parametrize(
    ("kind", "text", "where", "hint"),
    [
        ("sweep", "fixed: {teacher: bert-base}\naxes: {task: [mrpc]}\n", "axes", "set it in fixed or axes"),
        ("trial", "- {teacher: bert-base, task: mrpc}\n", "trial 0", "set it in the trial"),
    ],
)
def test_a_missing_required_field_has_one_message_with_the_files_hint(
    tmp_path: Path, kind: str, text: str, where: str, hint: str
) -> None:
    from kdgrid.commands.core import read_trials

    path = write(tmp_path, f"{kind}.yaml", text)
    with pytest.raises(ConfigError) as raised:
        load_sweep(path) if kind == "sweep" else read_trials(path)
    assert str(raised.value) == (
        f"{path}: 1 problem(s):\n  {path}: {where}: no value for required field 'student' ({hint})"
    )


def test_a_sweep_reports_a_missing_field_once_per_study_however_many_points_lack_it(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", "fixed: {teacher: bert-base}\naxes: {task: [mrpc, rte, sst2]}\n")
    with pytest.raises(ConfigError) as raised:
        load_sweep(path)
    assert str(raised.value).count("no value for required field 'student'") == 1


def test_a_trial_file_and_a_sweep_give_the_same_trial_and_the_same_combination_problem(
    tmp_path: Path,
) -> None:
    from kdgrid.commands.core import read_trials

    settings = (
        "{task: MRPC, teacher: bert-base, student: bert-tiny, knowledge: [vr], strategy: last-1, lr: 1e-4}"
    )
    sweep = load_sweep(write(tmp_path, "s.yaml", f"fixed: {settings}\n"))
    assert [p.trial for p in sweep.trials] == read_trials(write(tmp_path, "t.yaml", f"- {settings}\n"))

    impossible = (
        "{task: rte, teacher: bert-base, student: bert-tiny, knowledge: cos}"  # knowledge, no strategy
    )
    with pytest.raises(ConfigError) as from_sweep:
        load_sweep(write(tmp_path, "bad.yaml", f"fixed: {impossible}\n"))
    with pytest.raises(ConfigError) as from_trial:
        read_trials(write(tmp_path, "bad-trial.yaml", f"- {impossible}\n"))
    # a sweep without axes: its one grid point is what `fixed` wrote, so the problem is located there
    assert "bad.yaml: fixed: trial {task=rte" in str(from_sweep.value)
    with pytest.raises(ConfigError) as with_axes:
        load_sweep(write(tmp_path, "axes.yaml", f"fixed: {impossible}\naxes: {{lr: [1.0e-4, 2.0e-4]}}\n"))
    assert "axes.yaml: axes: knowledge ['cos'] needs a `strategy`" in str(with_axes.value)
    sweep_line = str(from_sweep.value).splitlines()[1].split(": trial {", 1)[1]
    trial_line = str(from_trial.value).splitlines()[1].split(": trial {", 1)[1]
    assert "needs a `strategy`" in sweep_line and sweep_line == trial_line


def test_a_refused_strategy_is_reported_once_not_again_as_a_missing_strategy(tmp_path: Path) -> None:
    # Both files: the misspelt strategy is reported where it is written; "needs a `strategy`", which only
    # follows from it, is not; the trial's other problems are still found.
    from kdgrid.commands.core import read_trials

    settings = "{task: polarity, teacher: bert-base, student: bert-tiny, knowledge: cos, strategy: Lst-1}"
    for kind, path in (
        ("sweep", write(tmp_path, "s.yaml", f"fixed: {settings}\n")),
        ("trial", write(tmp_path, "t.yaml", f"- {settings}\n")),
    ):
        with pytest.raises(ConfigError) as raised:
            load_sweep(path) if kind == "sweep" else read_trials(path)
        message = str(raised.value)
        assert "2 problem(s)" in message, (kind, message)
        assert "'Lst-1'" in message and "no bert-base teacher for task 'polarity'" in message, kind
        assert "needs a `strategy`" not in message, kind
