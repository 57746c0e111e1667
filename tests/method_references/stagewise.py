"""Stage-wise distillation (Kulkarni, Panchi, Raparthy & Chiddarwar, "Data Efficient Stagewise Knowledge
Distillation", arXiv:1911.06786, 2019), the stages as the authors' code runs them (IvLabs/stagewise-knowledge-
distillation: ``image_classification/experiments/stagewise_kd.py``, ``utils/utils.py``'s ``freeze_student``).

The student's blocks are trained one after another, each for the same number of epochs with a fresh Adam
(lr 1e-4), starting from the best weights of the stage before; in feature stage j only block j learns (the stem in
the first), by the MSE between its output and the teacher's matching block; every other parameter, the classifier
included, is frozen. A last stage then trains **the classifier alone**, on the gold labels alone (cross-entropy),
the whole feature extractor frozen.

For a BERT student whose knowledge terms sit on layers ``s_1 < ... < s_K``: K feature stages (layers
``s_{j-1}+1 .. s_j``, the embeddings in the first: kdgrid's layer 0), then the classifier stage, over S steps cut
into K + 1 equal stages.
"""

from __future__ import annotations

from dataclasses import dataclass

CLASSIFIER = "classifier"  # the classifier stage's trainable part (the pooler and the classification head)


@dataclass(frozen=True)
class Stage:
    first_step: int
    trainable: frozenset[int | str]  # student layers (0 = embeddings), or the classifier
    terms: frozenset[str]  # the loss terms it minimises


def stages(layers: list[int], terms_by_layer: dict[int, set[str]], total_steps: int) -> list[Stage]:
    """The K + 1 stages of a student whose knowledge terms sit on ``layers`` (shallow to deep)."""
    count = len(layers) + 1
    firsts = [j * total_steps // count for j in range(count)]
    plan = []
    for j, layer in enumerate(layers):
        low = 0 if j == 0 else layers[j - 1] + 1
        plan.append(Stage(firsts[j], frozenset(range(low, layer + 1)), frozenset(terms_by_layer[layer])))
    plan.append(Stage(firsts[-1], frozenset({CLASSIFIER}), frozenset({"hard"})))
    return plan
