"""Text-blind reference points: one model for everything, and the static mixture.

The static mixture is the cheapest text-blind routing that meets alpha on average (an
LP over call fractions); a router has to beat it to show that the text helps.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from ..data import RoutingData
from ..feedback import FeedbackConfig
from .common import (FRACTION_TOL, TAG_MIXTURE, History, MethodResult, check_alpha, common_stream,
                     method_result, tagged_rng)


def _model_index(data: RoutingData, model: int | str) -> int:
    if isinstance(model, str):
        if model not in data.models:
            raise ValueError(f"unknown model {model!r}: the data has {', '.join(data.models)}")
        return data.models.index(model)
    m = int(model)
    if not 0 <= m < data.n_models:
        raise ValueError(f"model index {m} out of range for {data.n_models} models")
    return m


def single(data: RoutingData, embeddings: np.ndarray, alpha: float, seed: int, feedback_rate: float,
           *, history: History | None = None, model: int | str = 0,
           feedback: FeedbackConfig | None = None) -> MethodResult:
    """Always serve ``model`` (a name, or an index; models ascend in mean cost)."""
    m = _model_index(data, model)
    alpha = check_alpha(alpha)
    order, _, _ = common_stream(data, seed, feedback_rate, feedback)
    return method_result(f"single:{data.models[m]}", data, alpha, order, np.full(data.n_requests, m, np.int64))


def static_mixture_lp(acc: np.ndarray, cost: np.ndarray, alpha: float
                      ) -> tuple[np.ndarray, float, bool]:
    """Cheapest call fractions f (f >= 0, sum f = 1) with expected accuracy >= alpha.

    Returns ``(fractions, expected_cost, feasible)``. When alpha exceeds the best model's
    accuracy the LP is infeasible: all mass goes on the most accurate model (ties: the
    cheapest of them) and ``feasible`` is False. A vertex solution (HiGHS simplex) puts
    mass on at most two models; when two share it, their fractions are recomputed in
    closed form so that the expected accuracy equals alpha to rounding error.
    """
    acc = np.asarray(acc, np.float64)
    cost = np.asarray(cost, np.float64)
    if acc.shape != cost.shape or acc.ndim != 1 or len(acc) == 0:
        raise ValueError("acc and cost must be 1-D arrays of the same, non-zero length")
    M = len(acc)
    best = float(acc.max())
    if alpha > best + FRACTION_TOL:
        top = np.flatnonzero(acc >= best - FRACTION_TOL)
        j = int(top[np.argmin(cost[top])])
        f = np.zeros(M)
        f[j] = 1.0
        return f, float(cost[j]), False
    res = linprog(cost, A_ub=-acc[None, :], b_ub=[-float(alpha)], A_eq=np.ones((1, M)), b_eq=[1.0],
                  bounds=[(0.0, 1.0)] * M, method="highs-ds")
    if res.status != 0:  # pragma: no cover - feasible by the check above
        raise RuntimeError(f"static mixture LP failed: {res.message}")
    f = np.clip(res.x, 0.0, None)
    f[f < FRACTION_TOL] = 0.0
    support = np.flatnonzero(f)
    if len(support) == 2:
        lo, hi = sorted(support, key=lambda j: acc[j])
        if acc[hi] > acc[lo] and acc[lo] < alpha < acc[hi]:
            w = (alpha - acc[lo]) / (acc[hi] - acc[lo])
            f[:] = 0.0
            f[hi], f[lo] = w, 1.0 - w
    f /= f.sum()
    return f, float(f @ cost), True


def exact_counts(fractions: np.ndarray, n: int) -> np.ndarray:
    """Integer counts summing to ``n`` closest to ``fractions * n`` (largest remainder)."""
    raw = np.asarray(fractions, np.float64) * n
    counts = np.floor(raw).astype(np.int64)
    short = n - int(counts.sum())
    if short > 0:
        counts[np.argsort(-(raw - counts), kind="stable")[:short]] += 1
    return counts


def static_mixture(data: RoutingData, embeddings: np.ndarray, alpha: float, seed: int,
                   feedback_rate: float, *, history: History | None = None,
                   feedback: FeedbackConfig | None = None) -> MethodResult:
    """Text-blind optimum on the stream's per-model mean accuracy and cost.

    Realised with exact counts (largest remainder of ``f * N``) placed at seeded random
    stream positions, so the call ratio equals the LP fractions up to one request; the
    realised satisfaction still varies around alpha, because which requests a model gets
    is (by design) blind to the text.
    """
    alpha = check_alpha(alpha)
    order, _, _ = common_stream(data, seed, feedback_rate, feedback)
    acc = data.solved.mean(axis=0)
    mean_cost = data.costs.mean(axis=0)
    f, expected_cost, feasible = static_mixture_lp(acc, mean_cost, alpha)
    counts = exact_counts(f, data.n_requests)
    model = tagged_rng(seed, TAG_MIXTURE).permutation(np.repeat(np.arange(data.n_models), counts))
    return method_result("static_mixture", data, alpha, order, model,
                         info={"fractions": [float(x) for x in f], "expected_cost_per_request": expected_cost,
                               "expected_satisfaction": float(f @ acc), "feasible": feasible})
