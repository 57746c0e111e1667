"""Options refused before anything runs where they would do nothing or go wrong (the static tier that ``kdgrid
plan`` applies, `kdgrid.core.trial_rules.trial_problems`): a layer curriculum counted on the student layers the
objective's terms sit on, the soft and hard labels counted as no knowledge term, the AdaKD function without its
weight, a schedule end without a schedule, an example weight without a soft term, and ReAugKD's head without its
knowledge or beside another sentence knowledge. Each refusal is one message naming the option and what it
needs; the bundled sweeps stay accepted (tests/grid/test_bundled_trial_ids.py keeps their ids)."""

from __future__ import annotations

import pytest

from kdgrid.core.knowledge import KNOWLEDGE, placed_terms
from kdgrid.core.methods.layer_curriculum.spec import Curriculum, curriculum_layers
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.training.objective import knowledge_terms
from kdgrid.core.trial_rules import learns_beside_the_student, trial_problems
from kdgrid.trial import Trial

# bert-mini (4 layers) from the paper's BERT-base teacher (12 layers): shapes kdgrid declares, read offline.
BASE = dict(task="mnli", teacher="bert-base", student="bert-mini")


def problems_of(**fields: object) -> list[str]:
    return trial_problems(Trial(**{**BASE, **fields}))  # type: ignore[arg-type]


def refused(problems: list[str], *words: str) -> bool:
    return any(all(word in problem for word in words) for problem in problems)


# --- layer_curriculum: the layers the objective's terms sit on --------------------------------------------------


@pytest.mark.parametrize(
    ("knowledge", "strategy", "boundaries", "layers"),
    [
        (("contrastive",), "Last-1", [0.5], []),  # a sentence knowledge has no layer
        (("reaug_relation",), "Last-1", [0.5], []),
        (("embedding_mse",), "Last-1", [0.5], []),  # layer 0 only: the embeddings learn in the first stage anyway
        (("soft_label",), "Last-1", [0.5], []),  # the objective's own soft term, not a knowledge term
        (("hidden_mse", "contrastive"), "PKD-skip", [0.5], [1, 2, 3]),
    ],
)
def test_a_curriculum_counts_the_layers_of_the_knowledge_terms(
    knowledge: tuple[str, ...], strategy: str, boundaries: list[float], layers: list[int]
) -> None:
    problems = problems_of(knowledge=knowledge, strategy=strategy, options={"layer_curriculum": boundaries})
    if knowledge == ("soft_label",):
        assert refused(problems, "layer_curriculum", "needs a strategy and knowledge other than soft_label")
    else:
        assert refused(
            problems, "layer_curriculum", f"has {len(boundaries)} boundaries", f"matches {len(layers)} student layers"
        ), problems


def test_a_curriculum_on_the_layered_terms_alone_passes() -> None:
    # contrastive places no term on a layer: PKD-skip's 3 student layers are hidden_mse's
    assert problems_of(
        knowledge=("hidden_mse", "contrastive"), strategy="PKD-skip", options={"layer_curriculum": [0.2, 0.4, 0.6]}
    ) == []


SHAPE_S = StudentShape(layers=4, width=256, heads=4, ffn=1024)
SHAPE_T = StudentShape(layers=12, width=768, heads=12, ffn=3072)


@pytest.mark.parametrize("pairs", [[(4, 12)], [(0, 0), (1, 0), (2, 3), (3, 12)], [(1, 0), (0, 5)]])
@pytest.mark.parametrize("name", sorted(KNOWLEDGE))
def test_the_static_placement_is_the_objectives(name: str, pairs: list[tuple[int, int]]) -> None:
    """`placed_terms` (torch-free, what plan counts) gives the very (knowledge, pair) list of the objective's
    `knowledge_terms` (what the run's `Curriculum.of` counts), for every registered knowledge, pairs on layer 0
    included; and the curriculum's layers agree."""
    trial = Trial(**BASE, knowledge=(name,), strategy="Last-1")  # type: ignore[arg-type]
    terms = knowledge_terms(trial, pairs, SHAPE_S, SHAPE_T)
    assert placed_terms([name], pairs) == [(t.knowledge, t.pair) for t in terms]
    layers = curriculum_layers([name], pairs)
    bounds = [0.1 * (i + 1) for i in range(len(layers))]
    assert Curriculum.of(bounds, [(t.name, t.pair) for t in terms]).layers == layers


def test_attention_terms_on_layer_0_are_not_counted() -> None:
    # attention_mse_sum on (1, 0) has no term (the embeddings have no attention); hidden_mse on (1, 0) has one
    assert curriculum_layers(["attention_mse_sum"], [(1, 0), (2, 5)]) == (2,)
    assert curriculum_layers(["hidden_mse"], [(1, 0), (2, 5)]) == (1, 2)
    assert curriculum_layers(["attention_mse_sum", "soft_label", "contrastive"], [(3, 7)]) == (3,)


# --- LKD: the soft and hard labels are no knowledge term -------------------------------------------------------


def test_lkd_does_not_count_the_soft_label_written_as_knowledge() -> None:
    problems = problems_of(soft_weight=1.0, alpha=0.0, knowledge=("soft_label",), options={"lkd_holdout": 0.1})
    assert refused(problems, "lkd_holdout", "it needs at least two", "knowledge other than soft_label and hard_label")
    problems = problems_of(soft_weight=0.0, alpha=1.0, knowledge=("hard_label", "soft_label"), options={"lkd_holdout": 0.1})
    assert refused(problems, "lkd_holdout", "it needs at least two")
    # a real knowledge term beside the soft term is two
    assert problems_of(
        soft_weight=1.0, alpha=0.0, knowledge=("soft_label", "hidden_mse"), strategy="Last-1",
        options={"lkd_holdout": 0.1},
    ) == []  # fmt: skip


def test_learns_beside_the_student_counts_lkd() -> None:
    trial = Trial(**BASE, alpha=0.5, options={"lkd_holdout": 0.1})  # type: ignore[arg-type]
    assert learns_beside_the_student(trial)
    assert not learns_beside_the_student(Trial(**BASE))  # type: ignore[arg-type]


# --- options that would do nothing -----------------------------------------------------------------------------


def test_adakd_function_needs_the_adakd_weight() -> None:
    for options in ({"adakd_function": "sqrt"}, {"adakd_function": "sqrt", "example_weight": "teacher_loss"}):
        problems = problems_of(options=options)
        assert refused(problems, "option adakd_function", "example_weight adakd or adakd_batchnorm"), problems
    assert problems_of(options={"adakd_function": "sqrt", "example_weight": "adakd_batchnorm"}) == []
    # AdaKD's trade-off needs alpha_i in [0, 1]: only its own function gives that
    problems = problems_of(options={"adakd_function": "sqrt", "example_weight": "adakd"})
    assert refused(problems, "example_weight: adakd trades", "adakd_function: exp_inv_sqrt"), problems
    assert problems_of(options={"adakd_function": "exp_inv_sqrt", "example_weight": "adakd"}) == []


@pytest.mark.parametrize("target", ["temperature", "soft_weight", "alpha", "knowledge_weight"])
def test_a_schedule_end_needs_a_schedule(target: str) -> None:
    problems = problems_of(options={f"{target}_end": 2.0})
    assert refused(problems, f"option {target}_end", f"needs a {target}_schedule other than 'constant'"), problems
    problems = problems_of(options={f"{target}_end": 2.0, f"{target}_schedule": "constant"})
    assert refused(problems, f"option {target}_end", f"needs a {target}_schedule"), problems
    assert not refused(problems_of(options={f"{target}_end": 2.0, f"{target}_schedule": "linear"}), f"{target}_end")


def test_a_schedule_without_its_end_stays_allowed() -> None:
    # the documented default end is the start (kdgrid.core.schedules): not refused
    assert problems_of(options={"temperature_schedule": "cosine"}) == []


def test_a_knowledge_weight_schedule_needs_a_knowledge_term() -> None:
    schedule = {"knowledge_weight_schedule": "linear", "knowledge_weight_end": 0.0}
    for knowledge in ((), ("soft_label",)):
        problems = problems_of(knowledge=knowledge, options=schedule)
        assert refused(problems, "option knowledge_weight_schedule", "needs knowledge other than soft_label"), problems
    assert problems_of(knowledge=("hidden_mse",), strategy="Last", options=schedule) == []


def test_an_example_weight_needs_a_soft_term() -> None:
    problems = problems_of(soft_weight=0.0, alpha=1.0, options={"example_weight": "adakd"})
    assert refused(problems, "option example_weight='adakd'", "needs soft_weight > 0"), problems
    assert refused(
        problems_of(soft_weight=0.0, alpha=1.0, options={"example_weight": "teacher_loss"}), "example_weight"
    )
    # uniform is no weighting; a soft weight scheduled up from 0 is a soft term
    assert problems_of(soft_weight=0.0, alpha=1.0, options={"example_weight": "uniform"}) == []
    scheduled_up = {"example_weight": "adakd", "soft_weight_schedule": "linear", "soft_weight_end": 1.0}
    assert problems_of(soft_weight=0.0, alpha=1.0, options=scheduled_up) == []
    scheduled_to_0 = {**scheduled_up, "soft_weight_end": 0.0}
    assert refused(problems_of(soft_weight=0.0, alpha=1.0, options=scheduled_to_0), "example_weight")


# --- ReAugKD's head: its knowledge, and no other sentence knowledge ------------------------------------------


def test_the_reaugkd_head_needs_reaug_relation() -> None:
    problems = problems_of(knowledge=("hidden_mse",), strategy="Last-1", options={"reaugkd_head": True})
    assert refused(problems, "option reaugkd_head", "needs knowledge 'reaug_relation'"), problems
    assert refused(problems_of(options={"reaugkd_head": True}), "reaugkd_head", "needs knowledge 'reaug_relation'")


def test_the_reaugkd_head_refuses_another_sentence_knowledge() -> None:
    problems = problems_of(
        knowledge=("reaug_relation", "contrastive"), strategy="Last-1", options={"reaugkd_head": True}
    )
    assert refused(problems, "option reaugkd_head", "cannot go with knowledge contrastive"), problems
    assert not refused(problems, "needs knowledge 'reaug_relation'")
    # contrastive alone with the head: both refusals
    alone = problems_of(knowledge=("contrastive",), strategy="Last-1", options={"reaugkd_head": True})
    assert refused(alone, "needs knowledge 'reaug_relation'") and refused(alone, "cannot go with knowledge contrastive")
    # the head with reaug_relation and a layered knowledge is fine
    assert problems_of(
        knowledge=("reaug_relation", "hidden_mse"), strategy="Last-1", options={"reaugkd_head": True}
    ) == []
