"""The projector methods' options and rules, without torch: the projection ensemble's size (``projection:
ensemble``, ``projector_members``), the spectral-norm penalty on the projections (``projector_spectral``,
`kdgrid.core.methods.projectors.spectral`) and the projector-overfitting flag of a done trial
(`kdgrid.core.methods.projectors.overfit`).

- Chen, Wang, Liu, Xu, Cao & Zhu, "Improved Feature Distillation via Projector Ensemble", NeurIPS 2022: the
  ensemble of projectors averaged (the projections themselves: `kdgrid.core.model.projection`).
- Yoshida & Miyato, "Spectral Norm Regularization for Improving the Generalizability of Deep Learning",
  arXiv:1705.10941, 2017: the penalty.
"""

from __future__ import annotations

from typing import Any

from kdgrid.core.choices import DEFAULT_ENSEMBLE_MEMBERS
from kdgrid.core.method_registry import MethodMemory, MethodSpec, Preset, TrialFacts, register_method
from kdgrid.core.options import register_option
from kdgrid.suggest import choice_problem
from kdgrid.trial import Trial

PROJECTOR_MEMBERS = "projector_members"
PROJECTOR_SPECTRAL = "projector_spectral"
MAX_ENSEMBLE_MEMBERS = 16
# An ensemble member (`kdgrid.core.model.projection`): "mlp" (kdgrid's: Linear -> GELU -> Linear, signed outputs
# for BERT's signed hidden states) or "relu_linear" (the authors': Linear -> ReLU, for post-ReLU CNN features).
PROJECTOR_MEMBER = "projector_member"
PROJECTOR_MEMBER_KINDS: tuple[str, ...] = ("mlp", "relu_linear")
DEFAULT_PROJECTOR_MEMBER = "mlp"


def members(facts: TrialFacts) -> int:
    """The projectors of each projected term: ``projector_members`` (default 3) for an ensemble, else 1."""
    trial = facts.trial
    if trial.projection != "ensemble":
        return 1
    return int(trial.option(PROJECTOR_MEMBERS) or DEFAULT_ENSEMBLE_MEMBERS)


def member_kind(trial: Trial) -> str:
    """The kind of each member of the trial's ensemble (`DEFAULT_PROJECTOR_MEMBER` unless the option says)."""
    return str(trial.option(PROJECTOR_MEMBER) or DEFAULT_PROJECTOR_MEMBER)


def projector_member_problem(value: Any) -> str | None:
    """Why ``projector_member`` = ``value`` is not allowed (None when it is)."""
    return choice_problem(PROJECTOR_MEMBER, value, PROJECTOR_MEMBER_KINDS)


def projector_rule(facts: TrialFacts) -> list[str]:
    """``projector_members`` and ``projector_member`` only with an ensemble; a spectral penalty needs
    projections to regularise."""
    trial = facts.trial
    problems: list[str] = []
    for name in (PROJECTOR_MEMBERS, PROJECTOR_MEMBER):
        if trial.option(name) is not None and trial.projection != "ensemble":
            problems.append(f"option {name} is only for projection 'ensemble', not {trial.projection!r}")
    if trial.option(PROJECTOR_SPECTRAL) is not None and (trial.projection == "none" or not trial.knowledge):
        problems.append(
            f"option {PROJECTOR_SPECTRAL} regularises projections: it needs knowledge with a projection "
            f"(projection linear, mlp or ensemble), not projection {trial.projection!r} with knowledge "
            f"{list(trial.knowledge)}"
        )
    return problems


NOTHING_PROJECTED = "no loss term of this trial is projected (same widths, or knowledge that compares the two sides in their own widths)"


def projected_terms_rule(facts: TrialFacts) -> list[str]:
    """What a projector method would change where nothing is projected: a spectral penalty with no projection to
    regularise, or a non-default projection kind (``mlp``, ``ensemble``) that no loss term uses, whose trial would
    silently train as the same trial with a linear projection (a row under the method's name measuring none)."""
    trial = facts.trial
    if facts.projected_terms != 0:
        return []
    problems: list[str] = []
    if trial.option(PROJECTOR_SPECTRAL) is not None:
        problems.append(f"option {PROJECTOR_SPECTRAL} regularises projections, but {NOTHING_PROJECTED}")
    if trial.projection in ("mlp", "ensemble"):
        problems.append(f"projection {trial.projection!r} is never used: {NOTHING_PROJECTED}; leave it unset")
    return problems


def ensemble_memory(facts: TrialFacts) -> MethodMemory:
    """An ensemble's members beyond the first (the estimate counts one projector per projected term, with the
    hidden layer of an MLP member); the authors' ``relu_linear`` members have no hidden layer."""
    count = members(facts)
    if count == 1 or facts.student is None or facts.teacher is None or not facts.projected_terms:
        return MethodMemory(parameters=(count - 1) * facts.projection_parameters)
    student, teacher = facts.student.width, facts.teacher.width
    linear = student * teacher + teacher
    member = linear if member_kind(facts.trial) == "relu_linear" else linear + teacher * teacher + teacher
    return MethodMemory(parameters=count * facts.projected_terms * member - facts.projection_parameters)


register_option(
    PROJECTOR_MEMBERS,
    "int",
    None,
    "projection ensemble: the number of projectors averaged (Chen et al., NeurIPS 2022); unset: 3",
    minimum=2,
    below=MAX_ENSEMBLE_MEMBERS + 1,
)
register_option(
    PROJECTOR_MEMBER,
    "text",
    None,
    "projection ensemble: each member, mlp (Linear-GELU-Linear, signed outputs) or relu_linear (the authors': "
    f"Linear then ReLU); unset: {DEFAULT_PROJECTOR_MEMBER}",
    check=projector_member_problem,
)
register_option(
    PROJECTOR_SPECTRAL,
    "number",
    None,
    "lambda of the spectral-norm penalty (lambda/2) sum sigma_max(W)^2 over the projections' weight matrices "
    "(Yoshida & Miyato, 2017); unset: none",
    minimum=0,
)

register_method(
    MethodSpec(
        name="projectors",
        title="projectors: an ensemble of projectors averaged (projection: ensemble), a spectral-norm penalty "
        "(projector_spectral) and the projector-overfitting flag",
        paper="Chen et al., Improved Feature Distillation via Projector Ensemble, NeurIPS 2022; Yoshida & "
        "Miyato, Spectral Norm Regularization, arXiv:1705.10941, 2017",
        options=(PROJECTOR_MEMBERS, PROJECTOR_MEMBER, PROJECTOR_SPECTRAL),
        rules=(("combination", projector_rule), ("terms", projected_terms_rule)),
        memory=ensemble_memory,
        uses=lambda trial: bool(trial.knowledge) and trial.projection != "none",
        hooks="kdgrid.core.methods.projectors.spectral:step_hooks",
        presets=(
            Preset(
                "paper",
                fields=(("knowledge", ["cos"]), ("beta", 25), ("soft_weight", 0.0), ("alpha", 1.0)),
                options=((PROJECTOR_MEMBER, "relu_linear"),),
                adapted="the authors' ensemble: relu_linear members, 25 x the cosine feature loss beside the task's "
                "cross-entropy, no soft labels (knowledge cos where the study names none); ReLU members were made "
                "for post-ReLU CNN features and clip BERT's signed hidden states",
                applies=lambda trial: trial.projection == "ensemble",
            ),
        ),
    )
)
