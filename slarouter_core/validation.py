"""One way to validate parameters, with one message style.

``check_number("h", 0.0, low=0.0, low_open=True)`` raises
``ValueError("h must be a finite number > 0, got 0.0")``. Booleans are not numbers here
(``True`` is not a valid ``c``), and NaN or infinity never pass.

A frozen config does not call these by hand: it declares each field's rule beside its
default (``h: float = param(0.05, Range(low=0.0, low_open=True))``) and inherits
:class:`Checked`, whose one ``__post_init__`` applies them (as scikit-learn declares
``_parameter_constraints`` once instead of checking in each estimator). The rules are
:class:`Range`, :class:`Int`, :class:`Bool`, :class:`Choice`, :class:`Alpha` (the one
alpha check, :func:`check_alpha`), :class:`Levels` and :class:`Instance`.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable

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


# -- declared constraints -----------------------------------------------------------------
# A frozen config declares each field's rule next to its default,
#     c: float = param(0.1, Range(low=0.0))
# and inherits :class:`Checked`, whose one ``__post_init__`` checks every declared field
# (in declaration order, base classes first) with the functions above, so each rule is
# written once and reads the same message everywhere. A rule that ties several fields
# together stays in the class's own ``__post_init__`` after ``super().__post_init__()``.

CHECK = "slarouter.check"


@dataclass(frozen=True)
class Range:
    """A finite real number within the bounds (None: no bound); ``optional``: or None;
    ``to_float``: stored as a float (an integer given in a file reads back as a float)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    optional: bool = False
    to_float: bool = False

    def __call__(self, name: str, value: Any) -> Any:
        if value is None and self.optional:
            return None
        x = check_number(name, value, low=self.low, high=self.high, low_open=self.low_open, high_open=self.high_open)
        return x if self.to_float and type(value) is not float else value


@dataclass(frozen=True)
class Int:
    """An integer (not a bool) within the bounds; a NumPy integer is stored as an int."""

    low: int | None = None
    high: int | None = None

    def __call__(self, name: str, value: Any) -> Any:
        if isinstance(value, np.integer):
            value = int(value)
        check_int(name, value, low=self.low)
        if self.high is not None and value > self.high:
            raise ValueError(f"{name} must be an integer in [{self.low}, {self.high}], got {value!r}")
        return value


@dataclass(frozen=True)
class Bool:
    """True or False (not 0 or 1)."""

    def __call__(self, name: str, value: Any) -> Any:
        return check_bool(name, value)


@dataclass(frozen=True)
class Choice:
    """One of ``choices``: a tuple of strings, or a function returning it (a registry
    that may grow at run time, e.g. the policies)."""

    choices: tuple[str, ...] | Callable[[], tuple[str, ...]]

    def __call__(self, name: str, value: Any) -> Any:
        choices = self.choices() if callable(self.choices) else self.choices
        return check_choice(name, value, tuple(choices))


@dataclass(frozen=True)
class Alpha:
    """The SLA level (:func:`check_alpha`); ``optional``: or None."""

    optional: bool = False

    def __call__(self, name: str, value: Any) -> Any:
        if value is None and self.optional:
            return None
        check_alpha(value)
        return value


@dataclass(frozen=True)
class Instance:
    """An instance of ``kind``; ``optional``: or None; ``from_dict``: a dict is turned
    into one (``kind.from_dict`` where it has one, else ``kind(**d)``)."""

    kind: type
    optional: bool = False
    from_dict: bool = False

    def __call__(self, name: str, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if self.from_dict and isinstance(value, dict):
            value = self.kind.from_dict(value) if hasattr(self.kind, "from_dict") else self.kind(**value)
        if not isinstance(value, self.kind):
            raise TypeError(f"{name} must be a {self.kind.__name__}{' or None' if self.optional else ''}, "
                            f"got {type(value).__name__}")
        return value


@dataclass(frozen=True)
class Levels:
    """A sequence of finite numbers in [0, 1] (one per model; empty: none given), stored
    as a tuple of floats; ``open``: in (0, 1), neither end allowed."""

    open: bool = False

    def __call__(self, name: str, value: Any) -> Any:
        span = "(0, 1)" if self.open else "[0, 1]"
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
            raise ValueError(f"{name} must be a list of numbers in {span}, got {value!r}")
        return tuple(check_number(f"{name}[{i}]", v, low=0.0, high=1.0, low_open=self.open, high_open=self.open)
                     for i, v in enumerate(value))


Rule = Callable[[str, Any], Any]


def param(default: Any = MISSING, check: Rule | None = None, *, factory: Callable[[], Any] | Any = MISSING,
          label: str | None = None, **kwargs: Any) -> Any:
    """A dataclass field with its rule (``check``) and the name its errors use
    (``label``, default the field's name); other keyword arguments go to ``field``."""
    meta = {CHECK: (check, label)} if check is not None else {}
    return field(default=default, default_factory=factory, metadata=meta, **kwargs)


_RULES: dict[type, tuple[tuple[str, str, Rule], ...]] = {}


def declared_rules(cls: type) -> tuple[tuple[str, str, Rule], ...]:
    """``(field, label, rule)`` of every declared field of a dataclass, base classes first."""
    rules = _RULES.get(cls)
    if rules is None:
        rules = tuple((f.name, f.metadata[CHECK][1] or f.name, f.metadata[CHECK][0])
                      for f in fields(cls) if CHECK in f.metadata)
        _RULES[cls] = rules
    return rules


def check_declared(obj: Any) -> None:
    """Check every declared field of the dataclass ``obj``; a rule that normalises a value
    (a NumPy integer, a dict for a nested config) stores the result."""
    for name, label, rule in declared_rules(type(obj)):
        value = getattr(obj, name)
        out = rule(label, value)
        if out is not value:
            object.__setattr__(obj, name, out)


class Checked:
    """Mixin of the frozen configs: the one ``__post_init__`` that checks the fields
    declared with :func:`param` (a subclass with a rule across fields calls
    ``super().__post_init__()`` first)."""

    def __post_init__(self) -> None:
        check_declared(self)
