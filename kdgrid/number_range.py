"""One range check for numbers: `NumberRange` says whether a value is a finite number (or an integer) within its
bounds, open or closed, and how a message names the allowed values. Every trial option and every number a
command reads from its flags or environment checks its value with one of these, so ``(0, 1]`` is written, and
refused, the same way everywhere.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any


def _text(bound: float) -> str:
    return f"{bound:g}"


@dataclass(frozen=True)
class NumberRange:
    """The numbers allowed: finite, ``low`` .. ``high`` (None: unbounded on that side), each end open or closed;
    ``integer`` for integers only (bool is never a number here).

    `describe` gives ``a number in (0, 1]``, ``a number > 0``, ``an integer >= 1``, ``a finite number``.
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is allowed."""
        if isinstance(value, bool) or not isinstance(value, numbers.Integral if self.integer else numbers.Real):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (self.high is not None and (value >= self.high if self.high_open else value > self.high))

    def describe(self) -> str:
        """The allowed values in words."""
        noun = "an integer" if self.integer else "a number"
        if self.low is not None and self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"{noun} in {left}{_text(self.low)}, {_text(self.high)}{right}"
        if self.low is not None:
            return f"{noun} {'>' if self.low_open else '>='} {_text(self.low)}"
        if self.high is not None:
            return f"{noun} {'<' if self.high_open else '<='} {_text(self.high)}"
        return "an integer" if self.integer else "a finite number"

    def problem(self, name: str, value: Any, meaning: str = "", *, what: str = "option") -> str | None:
        """Why ``value`` of ``name`` is not allowed (None when it is): ``"{what} {name}={value!r} is invalid;
        allowed: {describe} ({meaning})"`` (``what`` empty for a plain setting)."""
        if self.contains(value):
            return None
        subject = f"{what} {name}" if what else name
        return f"{subject}={value!r} is invalid; allowed: {self.describe()}" + (f" ({meaning})" if meaning else "")

    def checker(self, name: str, meaning: str = "") -> Any:
        """``value -> problem or None`` for an option's declaration (`kdgrid.core.options.register_option`)."""
        return lambda value: self.problem(name, value, meaning)


POSITIVE = NumberRange(low=0, low_open=True)
FRACTION_OPEN = NumberRange(low=0, high=1, low_open=True, high_open=True)
