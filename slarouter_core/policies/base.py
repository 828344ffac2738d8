"""The policy plug-in protocol.

A policy answers two questions, like River's ``predict_one``/``learn_one``: which model
serves this request (``choose``), and what to learn from a verdict (``update``, which
takes feedback that arrives with the request or any time later). It exposes the value
its decisions are priced with (``decision_queue``) and its whole state as JSON metadata
plus NumPy arrays (``state_dict``/``load_state``) so that the router can checkpoint it
into safetensors without pickle.

The router hands the policy the two uniforms of the step (exploration, choice). They are
drawn per step index, so serving a stream whole, in chunks or one request at a time
gives identical decisions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .schedule import exploration_probability  # noqa: F401  (re-exported: part of the protocol's API)


@dataclass(frozen=True)
class PolicyStep:
    """What a policy decided for step ``t`` and the numbers behind it.

    ``shat`` are the per-model satisfaction estimates the decision used, and
    ``argmin_m v * costs_m + q * (alpha - shat_m)`` is the rule (``Decision.scores``).
    ``blind``: the model was chosen without looking at the request (exploration, or a
    fallback that serves every request alike), so its label is an unbiased sample of that
    model's satisfaction over the stream.
    """

    t: int
    model: int
    explored: bool
    p_explore: float
    shat: np.ndarray
    q: float
    v: float
    shat_served: float
    blind: bool = False


class Policy(Protocol):
    """One routing rule with explicit state (see the module docstring)."""

    def choose(self, x: np.ndarray, costs: np.ndarray, t: int, u_explore: float,
               u_choice: float) -> PolicyStep: ...

    def update(self, step: PolicyStep, x: np.ndarray, feedback: float | None) -> float: ...

    def late_update(self, t: int, feedback: float) -> None: ...

    def decision_queue(self) -> float: ...

    def state_dict(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]: ...

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None: ...
