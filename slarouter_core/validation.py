"""One way to validate parameters, with one message style.

``check_number("h", 0.0, low=0.0, low_open=True)`` raises
``ValueError("h must be a finite number > 0, got 0.0")``. Booleans are not numbers here
(``True`` is not a valid ``c``), and NaN or infinity never pass.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def _bounds(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high:g}")
    return " and ".join(parts)


def check_number(name: str, value: Any, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False) -> float:
    """A finite real number within the bounds; returns it as a float."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        rule = _bounds(low, high, low_open, high_open)
        raise ValueError(f"{name} must be a finite number{' ' + rule if rule else ''}, got {value!r}")
    return float(value)


def check_int(name: str, value: Any, *, low: int | None = None) -> int:
    """An integer (not a bool) >= ``low``; returns it."""
    ok = not isinstance(value, bool) and isinstance(value, int)
    if ok and low is not None:
        ok = value >= low
    if not ok:
        raise ValueError(f"{name} must be an integer{f' >= {low}' if low is not None else ''}, got {value!r}")
    return int(value)


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def check_alpha(value: Any) -> float:
    """The SLA level: a number strictly between 0 and 1 (one check and one message
    everywhere: the router, the baselines, the experiments; a NumPy scalar is a number)."""
    if isinstance(value, (np.floating, np.integer)):
        value = value.item()
    return check_number("alpha", value, low=0.0, high=1.0, low_open=True, high_open=True)


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (strings)."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def check_optional_number(name: str, value: Any, **bounds: Any) -> float | None:
    """None, or a number as :func:`check_number` accepts it."""
    return None if value is None else check_number(name, value, **bounds)
