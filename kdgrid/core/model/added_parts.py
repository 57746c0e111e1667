"""Parts a method adds to a student for training only (a dual head's second classifier), which the deployed
student leaves out: a method names each such submodule with `mark_added`; `save_deployed` saves the student
without them (so the folder loads as a plain ``BertForSequenceClassification`` whose classifier is the task head)
and `deployed_parameter_count` counts the parameters without them (what the deployed student has). Nothing here
knows which method added what.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

# The attribute of a student that lists the names of the submodules methods added to it.
ADDED_ATTRIBUTE = "_kdgrid_added_modules"


def mark_added(model: nn.Module, name: str) -> None:
    """Record that the submodule ``name`` of ``model`` was added by a method and is left out when deployed."""
    added = set(getattr(model, ADDED_ATTRIBUTE, ()))
    added.add(name)
    setattr(model, ADDED_ATTRIBUTE, frozenset(added))


def added_prefixes(model: nn.Module) -> tuple[str, ...]:
    """The state-dict prefixes of the submodules methods added (``name.``), sorted."""
    return tuple(sorted(f"{name}." for name in getattr(model, ADDED_ATTRIBUTE, ())))


def deployed_parameter_count(model: nn.Module) -> int:
    """The student's parameters without what methods added."""
    prefixes = added_prefixes(model)
    return sum(p.numel() for name, p in model.named_parameters() if not name.startswith(prefixes or ("\0",)))


def save_deployed(model: Any, directory: Path, **kwargs: Any) -> None:
    """``model.save_pretrained(directory, **kwargs)`` without the submodules methods added (kdgrid's loader
    refuses keys it has no place for); a model without any is saved as it is."""
    prefixes = added_prefixes(model)
    if not prefixes:
        model.save_pretrained(directory, **kwargs)
        return
    state = {name: value for name, value in model.state_dict().items() if not name.startswith(prefixes)}
    model.save_pretrained(directory, state_dict=state, **kwargs)
