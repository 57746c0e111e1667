"""What an SSM student combines with, checked without torch (part of `kdgrid.core.trial_rules`, so ``kdgrid
plan`` refuses what ``kdgrid run`` would).

- ``init``: ``random`` only (kdgrid's own initialiser, seeded by the trial's seed; no pretrained SSM checkpoint
  exists for it), optionally with ``init_from: trial:<id>``: the student starts from another trial's trained SSM
  student (MOHAWK's stages). Any other ``init_from`` is refused.
- knowledge: nothing that reads Q, K or V (an SSM has no queries, keys or values of attention's kind); knowledge on
  attention scores reads the student's mixing matrices (docs/ssm.md).
- options that hook or name a BERT's modules are refused through `bert_only`, each by the rule of what owns it, so
  that these rules name no method and import nothing above the model room: ``init_recipe`` by the trial rules
  (`kdgrid.core.trial_rules`: pre-training builds BERTs), ``dual_head`` by its method (its second head hooks a
  ``BertForSequenceClassification``'s classifier), ``layer_curriculum`` by its own (it finds a parameter's layer
  by BERT's module names).
"""

from __future__ import annotations

from kdgrid.core.knowledge import get_knowledge
from kdgrid.core.model.shapes import is_ssm_name
from kdgrid.trial import Trial, init_source_id

QKV_FEATURES = frozenset({"query", "key", "value"})


def ssm_problems(trial: Trial) -> list[str]:
    """What an SSM student's trial cannot do (empty for a trial of another student, or one that fits)."""
    if not is_ssm_name(trial.student):
        return []
    problems: list[str] = []
    if trial.init != "random":
        problems.append(
            f"an SSM student starts from init 'random' (optionally init_from: trial:<id>, another trial's trained "
            f"SSM student), not init {trial.init!r}"
        )
    if trial.init_from is not None and init_source_id(trial.init_from) is None:
        problems.append(
            f"an SSM student's init_from names a trial (trial:<id>, or study:<name> in a sweep), not "
            f"{trial.init_from!r}"
        )
    qkv = [name for name in trial.knowledge if get_knowledge(name).needs & QKV_FEATURES]
    if qkv:
        problems.append(f"knowledge {', '.join(qkv)} reads Q, K or V, which an SSM student has none of")
    return problems


def bert_only(trial: Trial, option: str) -> list[str]:
    """The refusal of an option that only a BERT student can take, where the trial sets it on an SSM student (the
    rule of what owns the option calls it: it knows it hooks or names BERT's modules)."""
    if is_ssm_name(trial.student) and trial.option(option):
        return [f"option {option} is for BERT students, not the SSM student {trial.student}"]
    return []
