"""An SSM student at the start of its trial: fresh from kdgrid's initialiser (seeded by the trial's seed), or the
trained student of the trial its ``init_from`` names (``trial:<id>``: MOHAWK's stage before, kept in the store and
checked against the hash its done row recorded, `kdgrid.core.model.trained_teacher.trained_source`)."""

from __future__ import annotations

from typing import Any

from kdgrid.core.model import trained_teacher
from kdgrid.core.model.shapes import VOCAB_SIZE, SSMShape
from kdgrid.core.model.ssm.model import SSMForSequenceClassification, build_ssm, load_ssm
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.trial import Trial, init_source_id


def build_ssm_student(
    trial: Trial, shape: SSMShape, num_labels: int, vocab_size: int | None = None
) -> tuple[SSMForSequenceClassification, dict[str, Any]]:
    """The trial's SSM student in train mode and the facts a row records (``init_source``).

    Raises:
        KdgridError: ``init_from`` names a trial whose kept student this process was not told of (its job checks
            the store first), or whose weights are not the recorded ones.
        ConfigError: the kept student is of another shape, label count or vocabulary.
    """
    source = init_source_id(trial.init_from)
    if source is None:
        model = build_ssm(shape, num_labels, seed=trial.seed, vocab_size=vocab_size or VOCAB_SIZE)
        model.train()
        return model, {"init_source": None}
    directory = trained_teacher.trained_source(source)
    if directory is None:
        raise KdgridError(
            f"init_from trial:{source}: no kept student of trial {source} was found (it must be a trial of the same "
            "sweep, run before this one)"
        )
    model = load_ssm(directory)
    found = (model.config.shape, model.config.num_labels, model.config.vocab_size)
    wanted = (shape, num_labels, vocab_size or model.config.vocab_size)
    if found != wanted:
        raise ConfigError(
            f"init_from trial:{source}: its student (shape {found[0].name}, {found[1]} labels, vocabulary "
            f"{found[2]}) is not this trial's ({wanted[0].name}, {wanted[1]}, {wanted[2]})"
        )
    model.train()
    return model, {"init_source": f"trial:{source}"}
