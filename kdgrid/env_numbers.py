"""A positive number read from an environment variable (a heartbeat in seconds, a machine's FLOP/s): one rule and
one message for every such setting, so a typo is refused the same way wherever it is read.
"""

from __future__ import annotations

import math
import os

from kdgrid.errors import ConfigError
from kdgrid.number_range import POSITIVE


def positive_from_env(name: str, default: float, *, expected: str = "a number of seconds > 0") -> float:
    """The value of the variable ``name`` as a finite number > 0, ``default`` when unset or blank.

    Raises:
        ConfigError: a value that is not a finite number > 0, naming the variable and ``expected``.
    """
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not POSITIVE.contains(value):
        raise ConfigError(f"{name}: expected {expected}, got {text!r}")
    return value
