"""The paper's studies as sweep files: trial counts match the paper, and their settings are the paper's."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest

from kdgrid.core.model.shapes import student_shape
from kdgrid.grid import load_sweep, plan_jobs
from kdgrid.grid.expand import Sweep
from kdgrid.grid.stages import job_stages
from kdgrid.sweep_plan import job_split
from kdgrid.trial import Trial, data_order_seed, group_key
from tests.sweep_studies import trials_of

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"
TASKS = {"cola", "mrpc", "stsb", "rte", "qqp", "mnli", "sst2", "qnli"}
# Table 4's best cell per task (bold in the paper): (temperature, alpha)
TABLE4_BEST = {
    "mrpc": (4, 0.1), "sst2": (1, 0.1), "qqp": (2, 0.1), "qnli": (8, 0.1),
    "rte": (8, 0.1), "cola": (1, 0.2), "stsb": (1, 0.2), "mnli": (1, 0.1),
}  # fmt: skip

# file -> (unique trials, grid points)
COUNTS = {
    "table1_init.yaml": (
        88,
        96,
    ),  # 4 x 3 x 8 cells; BERT-mini and -small share their 768-wide pre-load student
    "table2_width_depth.yaml": (72, 72),
    "table3_teacher.yaml": (48, 48),
    "table4_temperature.yaml": (192, 192),
    "table5_single_match.yaml": (1200, 1200),
    "table6_double_match.yaml": (3720, 3720),
    "table7_best_practice.yaml": (252, 252),
    "table8_weighted.yaml": (1200, 1200),
    "demo.yaml": (52, 52),
    "controls.yaml": (160, 160),  # Table 5's bert-mini grid with the two control strategies
    "layer_selection.yaml": (30, 30),  # 2 inits x (4 matchings + none) x 3 seeds, offline
    "layer_selection_glue.yaml": (200, 200),  # the same x 4 GLUE tasks
    "assistants.yaml": (3, 3),  # an assistant, the direct student, the student taught by the assistant
    # ReAugKD: 6 tasks x (1 soft-label + 2 ReAugKD + 2 x 4 k x 11 beta evaluation-only)
    "reaugkd.yaml": (546, 546),
    # 3 seeds x (soft labels, relation alone, ReAugKD, 7 evaluation-only)
    "reaugkd_offline.yaml": (30, 30),
    # 22 methods, references and assistant cells + 5 paper-recipe cells, x 5 seeds, offline
    "methods.yaml": (135, 135),
    # the same less the assistant chain and the projectors (17 + 4 paper-recipe cells) x 2 tasks x 5 seeds, weight-copied students
    "methods_copied.yaml": (210, 210),
    # Flex-KD, projected hidden_mse, CKA and soft labels only x 3 seeds, offline
    "flex_kd.yaml": (12, 12),
    # MOHAWK: 3 seeds x (6 stage trials of the three chains + an SSM from scratch + a Transformer of equal size)
    "mohawk.yaml": (24, 24),
}


def test_every_sweep_file_is_counted() -> None:
    assert {p.name for p in SWEEPS.glob("*.yaml") if not p.name.startswith("_")} == set(COUNTS)


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_trial_counts(name: str) -> None:
    sweep = load_sweep(SWEEPS / name)
    assert (len(sweep.trials), sweep.grid_points) == COUNTS[name]


def _best_cell_applies(trials) -> None:
    for t in trials:
        assert (t.temperature, t.alpha) == TABLE4_BEST[t.task], t


def test_table5_single_match_grid() -> None:
    trials = [p.trial for p in load_sweep(SWEEPS / "table5_single_match.yaml").trials]
    assert {t.task for t in trials} == TASKS
    assert Counter(len(t.knowledge) for t in trials) == {1: 1200}
    assert len({t.knowledge for t in trials}) == 10 and len({t.strategy for t in trials}) == 5
    assert {t.student for t in trials} == {"bert-tiny", "bert-mini", "bert-small"}
    assert {(t.teacher, t.init, t.beta) for t in trials} == {("bert-base", "pretrain", 1.0)}
    _best_cell_applies(trials)
    # MNLI is one training task: its trials are not doubled for the two dev sets
    assert sum(t.task == "mnli" for t in trials) == 150


def test_table6_pairs_cross_regions_only() -> None:
    trials = [p.trial for p in load_sweep(SWEEPS / "table6_double_match.yaml").trials]
    region = {"attention_mse_sum": "att", "attention_ce_mean": "att", "hidden_mse": "hid", "mmd": "hid",
              "gram": "hid", "cos": "hid", "pkd": "hid", "query_relation": "qkv", "key_relation": "qkv",
              "value_relation": "qkv"}  # fmt: skip
    pairs = {t.knowledge for t in trials}
    assert len(pairs) == 31
    assert all(len(p) == 2 and region[p[0]] != region[p[1]] for p in pairs)
    _best_cell_applies(trials)


def test_table8_is_table5_with_auto_weights() -> None:
    five = [p.trial for p in load_sweep(SWEEPS / "table5_single_match.yaml").trials]
    eight = [p.trial for p in load_sweep(SWEEPS / "table8_weighted.yaml").trials]
    assert {t.beta for t in eight} == {"auto"}

    assert {dataclasses.replace(t, beta=1.0) for t in eight} == set(five)


def test_controls_are_table5_for_bert_mini_with_the_control_strategies() -> None:
    five = [p.trial for p in load_sweep(SWEEPS / "table5_single_match.yaml").trials]
    controls = load_sweep(SWEEPS / "controls.yaml")
    trials = [p.trial for p in controls.trials]
    assert Counter(t.strategy for t in trials) == {"Reverse": 80, "Random": 80}
    mini = {dataclasses.replace(t, strategy=None) for t in five if t.student == "bert-mini"}
    assert {dataclasses.replace(t, strategy=None) for t in trials} == mini
    assert {p.study for p in controls.trials} == {"main"}  # no table's name: its rows are in no paper table
    _best_cell_applies(trials)


def test_table4_is_the_temperature_grid_without_defaults() -> None:
    trials = [p.trial for p in load_sweep(SWEEPS / "table4_temperature.yaml").trials]
    assert {t.student for t in trials} == {"bert-mini"} and all(not t.knowledge for t in trials)
    cells = Counter((t.temperature, t.alpha) for t in trials)
    assert len(cells) == 24 and set(cells.values()) == {8}


def test_table1_init_schemes() -> None:
    trials = [p.trial for p in load_sweep(SWEEPS / "table1_init.yaml").trials]
    preload = {t.student for t in trials if t.init == "preload"}
    assert preload == {"w768-l2-h12-f3072", "w768-l4-h12-f3072"}
    gd = [t for t in trials if t.init == "general_distillation"]
    # general distillation starts from the `paper` recipe's checkpoint of each student (kdgrid.core.pretrained.needed)
    assert len(gd) == 24 and all(t.init_from is None and t.option("init_recipe") == "paper" for t in gd)
    _best_cell_applies(trials)


def test_table2_shapes() -> None:
    sweep = load_sweep(SWEEPS / "table2_width_depth.yaml")
    widths_layers = set()
    for planned in sweep.trials:
        width, layers = planned.trial.student.split("-")[:2]
        widths_layers.add((planned.study, width[1:], layers[1:]))
    assert widths_layers == {
        ("fixed_params", "128", "12"), ("fixed_params", "144", "8"), ("fixed_params", "160", "4"),
        ("fixed_params", "168", "3"), ("fixed_params", "176", "2"), ("fixed_flops", "132", "8"),
        ("fixed_flops", "142", "7"), ("fixed_flops", "154", "6"), ("fixed_flops", "170", "5"),
    }  # fmt: skip


def test_table3_teachers() -> None:
    trials = [p.trial for p in load_sweep(SWEEPS / "table3_teacher.yaml").trials]
    assert Counter(t.teacher for t in trials) == {"bert-base": 24, "bert-large": 24}


def test_table7_best_practice_recipe() -> None:
    trials = [p.trial for p in load_sweep(SWEEPS / "table7_best_practice.yaml").trials]
    assert {t.student for t in trials} == {"bert-mini"} and "cola" not in {t.task for t in trials}
    assert {t.strategy for t in trials} == {"First-1", "Last-1"}


def test_demo_is_one_teacher_group_of_52() -> None:
    sweep = load_sweep(SWEEPS / "demo.yaml")
    trials = [p.trial for p in sweep.trials]
    assert len(plan_jobs(trials)) == 1
    baselines = [t for t in trials if not t.knowledge]
    assert sorted((t.soft_weight, t.alpha) for t in baselines) == [(0.0, 1.0), (1.0, 0.1)]
    assert all(not t.knowledge and t.strategy is None for t in baselines)
    assert {(t.task, t.teacher, t.student, t.init) for t in trials} == {
        ("polarity", "minilm-l6", "bert-tiny", "random")
    }


SEEDS_LINE = "# seeds: 5"  # the commented line every sweep file carries; uncommented, it runs the sweep with 5 seeds
# studies of seeds: they run with several already (offline 3, to keep its run near 20 minutes on 2 cores)
SEEDED_SWEEPS = {"layer_selection.yaml": 3, "layer_selection_glue.yaml": 5}
SEEDS_CHECKED_UP_TO = 300  # trials: larger sweeps expand for seconds; the same line is checked on the others


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_every_sweep_shows_how_to_run_it_with_several_seeds(name: str, tmp_path: Path) -> None:
    text = (SWEEPS / name).read_text()
    if name in SEEDED_SWEEPS:  # the line is already uncommented: its trials come in fives
        assert text.count(f"\nseeds: {SEEDED_SWEEPS[name]}\n") == 1 and SEEDS_LINE not in text
        return
    if any(line.startswith("seeds: ") for line in text.splitlines()):
        # a sweep that runs several seeds already (reaugkd_offline) says where they are explained
        assert "docs/seeds.md" in text and SEEDS_LINE not in text
        return
    assert text.count(SEEDS_LINE + "\n") == 1 and "docs/seeds.md" in text
    trials, _ = COUNTS[name]
    if trials > SEEDS_CHECKED_UP_TO:
        return
    for extended in SWEEPS.glob("_*.yaml"):
        (tmp_path / extended.name).write_text(extended.read_text())
    uncommented = tmp_path / name
    uncommented.write_text(text.replace(SEEDS_LINE, SEEDS_LINE.removeprefix("# ")))
    plain = load_sweep(SWEEPS / name)
    seeded = load_sweep(uncommented)
    assert len(seeded.trials) == 5 * len(plain.trials)
    # five seeds per trial, and still one job per teacher pass: per teacher named in the file, and per assistant
    # (each seed of an assistant is a teacher of its own, `kdgrid.grid.stages`)
    named = [[p.trial for p in sweep.trials if not p.trial.teacher.startswith("trial:")] for sweep in (plain, seeded)]
    assert len(plan_jobs(named[1])) == len(plan_jobs(named[0]))
    chained = [p.trial for p in seeded.trials if p.trial.teacher.startswith("trial:")]
    assert len(plan_jobs(chained)) == len({t.teacher for t in chained}) == 5 * len({
        p.trial.teacher for p in plain.trials if p.trial.teacher.startswith("trial:")
    })  # fmt: skip


def test_the_assistants_sweep_chains_each_seed_to_its_own_assistant() -> None:
    sweep = load_sweep(SWEEPS / "assistants.yaml")
    assistants = {t.trial_id: t for t in trials_of(sweep, "assistant")}
    direct = trials_of(sweep, "direct")
    via = trials_of(sweep, "via_assistant")
    assert {t.student for t in assistants.values()} == {"bert-mini"} and {t.student for t in direct} == {"bert-tiny"}
    assert {t.teacher for t in [*assistants.values(), *direct]} == {"minilm-l6"}
    # each dependant: the direct trial's settings with the same seed's assistant as its teacher
    assert len(via) == len(direct) == len(assistants) == 1
    by_seed = {t.seed: t for t in direct}
    for trial in via:
        assistant = assistants[trial.teacher.removeprefix("trial:")]
        assert assistant.seed == trial.seed
        assert dataclasses.replace(trial, teacher="minilm-l6") == by_seed[trial.seed]


def test_the_mohawk_sweep_chains_each_stage_to_the_stage_before_seed_by_seed() -> None:
    sweep = load_sweep(SWEEPS / "mohawk.yaml")
    studies = {study: {t.seed: t for t in trials_of(sweep, study)} for study in sweep.studies}
    assert all(sorted(trials) == [0, 1, 2] for trials in studies.values())
    ssm = student_shape("ssm-l6-h384-a12")
    assert {t.student for trials in studies.values() for t in trials.values()} == {ssm.name, "w384-l6-h12-f1933"}
    equal = student_shape(studies["transformer"][0].student)
    assert abs(equal.param_count() / ssm.param_count() - 1) < 1e-3  # a Transformer of equal size
    chains = {"stage2_after1": "stage1", "stage3_after12": "stage2_after1", "stage3_after2": "stage2_only"}
    for study, trials in studies.items():
        for seed, trial in trials.items():
            source = chains.get(study)
            assert trial.init_from == (None if source is None else f"trial:{studies[source][seed].trial_id}")
            stage = trial.option("mohawk_stage")
            assert stage == (None if study in ("ssm_scratch", "transformer") else int(study[len("stage")]))
    # stage 3 and the baselines: one budget and one objective, so their rows compare
    finals = [studies[s][0] for s in ("stage3_after12", "stage3_after2", "stage3_only", "ssm_scratch", "transformer")]
    assert len({(t.epochs, t.max_train_samples, t.lr, t.soft_weight, t.alpha, t.knowledge) for t in finals}) == 1
    trials = [p.trial for p in sweep.trials]
    # `kdgrid plan` says why: the budgets and each chained trial's source (a field only those trials' groups have)
    split = job_split(trials, plan_jobs(trials), 1000, None)
    assert split["group_fields_differing"] == {"max_train_samples": 3, "init_source": 10}
    stages = job_stages(plan_jobs(trials))
    assert [sorted({study_of(sweep, t) for job in stage for t in job}) for stage in stages] == [
        ["ssm_scratch", "stage1", "stage2_only", "stage3_only", "transformer"],
        ["stage2_after1", "stage3_after2"],
        ["stage3_after12"],
    ]


def study_of(sweep: Sweep, trial: Trial) -> str:
    return next(p.study for p in sweep.trials if p.trial.trial_id == trial.trial_id)


def test_layer_selection_is_yu_wen_mous_design_with_seeds_offline_and_on_glue() -> None:
    """Forward (Dilatation), reverse, all-to-one, random and no matching, each with random-init and weight-copied
    (preload) students of the teacher's width, 3 seeds a cell offline and 5 on GLUE, sharing one data order; the
    offline file needs nothing from the Hub and is one job."""
    for name, tasks, teacher, student in (
        ("layer_selection.yaml", {"polarity"}, "minilm-l6", "w384-l2-h12-f1536"),
        ("layer_selection_glue.yaml", {"mnli", "qqp", "qnli", "sst2"}, "bert-base", "w768-l6-h12-f3072"),
    ):
        seeds = SEEDED_SWEEPS[name]
        trials = [p.trial for p in load_sweep(SWEEPS / name).trials]
        assert {t.task for t in trials} == tasks and {(t.teacher, t.student) for t in trials} == {(teacher, student)}
        cells = Counter((t.task, t.init, t.strategy, t.knowledge) for t in trials)
        assert set(cells.values()) == {seeds}, name  # that many seeds in every cell
        assert {(init, strategy) for _, init, strategy, _ in cells} == {
            (init, strategy)
            for init in ("random", "preload")
            for strategy in ("Dilatation", "Reverse", "All-to-one", "Random", None)
        }
        assert {k for *_, k in cells} == {("hidden_mse",), ()}
        assert {t.seed for t in trials} == set(range(seeds)) and {t.option("data_seed") for t in trials} == {0}
        assert {t.alpha for t in trials} == {1.0}
    offline = [p.trial for p in load_sweep(SWEEPS / "layer_selection.yaml").trials]
    assert len({group_key(t) for t in offline}) == 1  # one teacher pass per batch for all 30


def test_the_flex_kd_sweep_plans_one_job_of_four_paired_cells() -> None:
    sweep = load_sweep(SWEEPS / "flex_kd.yaml")
    trials = [planned.trial for planned in sweep.trials]
    assert [len(job) for job in plan_jobs(trials)] == [12]  # one teacher pass for every cell and seed
    cells: dict[tuple[str, ...], list[int]] = {}
    for trial in trials:
        assert trial.student == "bert-tiny" and trial.teacher == "minilm-l6" and trial.task == "polarity"
        cells.setdefault(tuple(trial.knowledge), []).append(trial.seed)
    assert cells == {("flex_kd",): [0, 1, 2], ("hidden_mse",): [0, 1, 2], ("cka",): [0, 1, 2], (): [0, 1, 2]}
    assert {data_order_seed(trial) for trial in trials} == {0}  # the seeds of a cell are paired
