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

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np



@dataclass(frozen=True)
class PolicyStep:
    """What a policy decided for step ``t`` and the numbers behind it.

    ``shat`` are the per-model satisfaction estimates the decision used, and
    ``argmin_m v * costs_m + q * (alpha - shat_m)`` is the rule (``Decision.scores``).
    ``blind``: the model was chosen without looking at the request (exploration, or a
    fallback that serves every request alike), so its label is an unbiased sample of that
    model's satisfaction over the stream. ``by_cluster``: chosen by the request's cluster
    only (contextual mode), so its label is unbiased for that cluster, not the stream.
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
    escalated: bool = False  # guarded mode: the guard overrode the rule's choice
    by_cluster: bool = False


@dataclass
class BlockTrace:
    """Per-step arrays for a block of requests served by a policy's batched path."""

    model: np.ndarray
    explored: np.ndarray
    feedback: np.ndarray
    shat_served: np.ndarray
    s_used: np.ndarray
    q: np.ndarray
    v: np.ndarray
    trained: np.ndarray


class Policy(Protocol):
    """One routing rule with explicit state (see the module docstring). Policies with a
    faster batched path add ``run_block(X, costs, feedback, n, t0, draws) -> BlockTrace``
    (the router falls back to the per-request rule otherwise); those with a separate
    satisfaction predictor add ``teach(x, model, feedback)`` for labels outside the rule."""

    version: int  # bumped whenever the satisfaction model changes

    def choose(self, x: np.ndarray, costs: np.ndarray, t: int, u_explore: float,
               u_choice: float) -> PolicyStep: ...

    def update(self, step: PolicyStep, x: np.ndarray, feedback: float | None) -> float: ...

    def late_update(self, t: int, feedback: float) -> None: ...

    def decision_queue(self) -> float: ...

    def predict(self, X: np.ndarray) -> np.ndarray: ...

    def lower_bound(self, t: int, z: float) -> float: ...

    def estimate(self, t: int) -> float: ...

    def state_dict(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]: ...

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None: ...


#: steps kept open for late feedback, per router (older ones are forgotten, oldest first)
LATE_WINDOW = 100_000
#: steps per page of pre-drawn random numbers
DRAW_PAGE = 4096


class StepDraws:
    """Random numbers tied to the step index: step i always gets row i of a stream drawn
    in fixed pages of ``DRAW_PAGE`` steps, whatever the chunking of the calls, so that a
    stream served whole, in chunks or one request at a time sees the same numbers."""

    def __init__(self, rng: np.random.Generator, draw: Any, shape: tuple[int, ...]):
        self.rng = rng
        self._draw = draw  # draw(rng, n_steps) -> (n_steps, *shape)
        self.start = 0
        self.pages = np.zeros((0, *shape))

    def get(self, i0: int, i1: int, now: int) -> np.ndarray:
        """Rows for 0-based steps [i0, i1); rows before step ``now`` may be dropped."""
        if i0 < self.start:
            raise RuntimeError("random draws for past steps are gone")
        while self.start + len(self.pages) < i1:
            keep_from = max(0, min(now, self.start + len(self.pages)) - self.start)
            self.start += keep_from
            self.pages = np.concatenate([self.pages[keep_from:], self._draw(self.rng, DRAW_PAGE)])
        return self.pages[i0 - self.start:i1 - self.start]


class PendingFeedback:
    """Steps served without feedback, for a verdict that arrives later: step t ->
    (model, estimate served, deviation, explored, embedding or None). The newest
    ``LATE_WINDOW`` are kept (an OrderedDict: dropping the oldest is O(1))."""

    def __init__(self) -> None:
        self.steps: OrderedDict[int, tuple] = OrderedDict()

    def __len__(self) -> int:
        return len(self.steps)

    def add(self, t: int, record: tuple) -> None:
        self.steps[int(t)] = record
        if len(self.steps) > LATE_WINDOW:
            self.steps.popitem(last=False)

    def extend(self, items) -> None:
        self.steps.update(items)
        while len(self.steps) > LATE_WINDOW:
            self.steps.popitem(last=False)

    def pop(self, t: int) -> tuple:
        rec = self.steps.pop(int(t), None)
        if rec is None:
            raise KeyError(f"no step {t} awaiting feedback (already given, or too old)")
        return rec

    def to_arrays(self, dim: int) -> dict[str, np.ndarray]:
        """As arrays in their order (oldest first); a step kept without its embedding
        stores zeros."""
        recs = list(self.steps.items())
        return {"router.late_t": np.array([t for t, _ in recs], np.int64),
                "router.late_m": np.array([r[0] for _, r in recs], np.int64),
                "router.late_shat_dev": np.array([(r[1], r[2]) for _, r in recs], np.float64).reshape(-1, 2),
                "router.late_explored": np.array([r[3] for _, r in recs], np.uint8),
                "router.late_x": (np.stack([np.zeros(dim, np.float32) if r[4] is None else
                                            np.asarray(r[4], np.float32) for _, r in recs]) if recs
                                  else np.zeros((0, dim), np.float32))}

    @classmethod
    def from_arrays(cls, tensors: dict, dim: int) -> "PendingFeedback":
        out = cls()
        if "router.late_t" not in tensors:
            return out
        t = np.asarray(tensors["router.late_t"], np.int64)
        m = np.asarray(tensors["router.late_m"], np.int64)
        sd = np.asarray(tensors["router.late_shat_dev"], np.float64).reshape(-1, 2)
        ex = np.asarray(tensors["router.late_explored"]).astype(bool)
        x = np.asarray(tensors["router.late_x"], np.float32).reshape(-1, dim)
        if not (len(t) == len(m) == len(sd) == len(ex) == len(x)):
            raise ValueError("pending late-feedback arrays disagree in length")
        out.steps = OrderedDict((int(t[i]), (int(m[i]), float(sd[i, 0]), float(sd[i, 1]), bool(ex[i]), x[i]))
                                for i in range(len(t)))
        return out


def int_state(state: dict) -> dict:
    """A bit generator's state from JSON (which round-trips its ints exactly); only nested
    dicts need copying."""
    return {k: (int_state(v) if isinstance(v, dict) else v) for k, v in state.items()}
