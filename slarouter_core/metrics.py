"""Summary metrics of a routed stream (the paper's Table 2 quantities)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

#: a queue whose peak falls in the last 5% of the stream has not converged
CONVERGENCE_TAIL = 0.05


@dataclass(frozen=True)
class Summary:
    """Whole-stream figures of one run.

    ``post_convergence_satisfaction``: satisfaction over the requests after the virtual
    queue's peak (its first maximum). Until the peak the controller is still catching up
    with the SLA; after it the queue drains or holds, so the constraint is tracked. When
    the peak falls in the last 5% of the stream the queue is still rising: the run has
    not converged and the value is NaN.
    """

    requests: int
    operating_cost: float
    cost_unit: str
    satisfaction: float
    alpha: float
    sla_met: bool
    call_ratio: tuple[float, ...]
    models: tuple[str, ...]
    post_convergence_satisfaction: float
    convergence_step: int | None
    explored: int
    feedback: int
    final_q: float
    final_v: float

    @property
    def operating_cost_display(self) -> float:
        """Cost in display units: MJ for joules, otherwise the data's unit."""
        return self.operating_cost / 1e6 if self.cost_unit == "J" else self.operating_cost

    @property
    def display_unit(self) -> str:
        return "MJ" if self.cost_unit == "J" else self.cost_unit

    def to_dict(self) -> dict:
        d = asdict(self)
        d["operating_cost_display"] = self.operating_cost_display
        d["display_unit"] = self.display_unit
        d["call_ratio"] = {m: r for m, r in zip(self.models, self.call_ratio)}
        d.pop("models")
        return d


def convergence_step(q: np.ndarray) -> int | None:
    """Index of the queue's first maximum, or None if it lies in the stream's tail."""
    if len(q) == 0:
        return None
    k = int(np.argmax(q))
    if k >= len(q) * (1 - CONVERGENCE_TAIL) and q[k] > 0:
        return None
    return k


def summarize(model: np.ndarray, satisfied: np.ndarray, cost: np.ndarray, q: np.ndarray,
              alpha: float, models: tuple[str, ...], cost_unit: str,
              explored: np.ndarray | None = None, feedback: np.ndarray | None = None,
              v: np.ndarray | None = None) -> Summary:
    n = len(model)
    sat = float(np.mean(satisfied)) if n else float("nan")
    ratio = np.bincount(model, minlength=len(models)) / max(n, 1)
    k = convergence_step(q)
    post = float(np.mean(satisfied[k + 1:])) if k is not None and k + 1 < n else float("nan")
    return Summary(
        requests=n,
        operating_cost=float(np.sum(cost)),
        cost_unit=cost_unit,
        satisfaction=sat,
        alpha=float(alpha),
        sla_met=bool(n and sat >= alpha),
        call_ratio=tuple(float(r) for r in ratio),
        models=tuple(models),
        post_convergence_satisfaction=post,
        convergence_step=k,
        explored=int(np.sum(explored)) if explored is not None else 0,
        feedback=int(np.sum(feedback >= 0)) if feedback is not None else 0,
        final_q=float(q[-1]) if n else 0.0,
        final_v=float(v[-1]) if v is not None and n else float("nan"),
    )


def running_mean(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return np.cumsum(x) / np.arange(1, len(x) + 1) if len(x) else x


def thin_indices(n: int, max_points: int = 2000) -> np.ndarray:
    """At most ``max_points`` evenly spread indices of a series, always with the last."""
    if n <= max_points:
        return np.arange(n)
    idx = np.linspace(0, n - 1, max_points).round().astype(np.int64)
    return np.unique(idx)
