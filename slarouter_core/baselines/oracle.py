"""The clairvoyant oracle: the per-request LP with every label known.

Not deployable; it bounds from below the cost of any router at its satisfaction, so a
method's distance to it is the price of not knowing the labels.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from ..data import RoutingData
from ..feedback import FeedbackConfig
from .common import FRACTION_TOL, History, MethodResult, check_alpha, common_stream, method_result


def oracle_lp(solved: np.ndarray, costs: np.ndarray, alpha: float
              ) -> tuple[np.ndarray, float, float]:
    """Per-request LP with every label known: ``(y (N, M), total cost, satisfaction)``.

    min sum y*C  s.t.  sum_m y[t, m] = 1,  (1/N) sum y*s >= alpha,  0 <= y <= 1.
    Solved exactly with HiGHS (dual simplex, so a vertex: with one coupling constraint at
    most one row is fractional). If alpha exceeds the best achievable satisfaction (the
    share of requests some model solves) the result is the cheapest routing at that
    maximum: per request the cheapest solving model, else the cheapest model.
    """
    S = np.asarray(solved, np.float64)
    C = np.asarray(costs, np.float64)
    if S.shape != C.shape or S.ndim != 2:
        raise ValueError("solved and costs must be (N, M) arrays of the same shape")
    N, M = S.shape
    max_sat = float(S.max(axis=1).mean())
    if alpha >= max_sat - FRACTION_TOL:
        masked = np.where(S > 0, C, np.inf)
        has = S.max(axis=1) > 0
        pick = np.where(has, np.argmin(masked, axis=1), np.argmin(C, axis=1))
        y = np.zeros((N, M))
        y[np.arange(N), pick] = 1.0
        return y, float((y * C).sum()), float((y * S).sum() / N)
    A_eq = sp.kron(sp.identity(N, format="csr"), np.ones((1, M)), format="csr")
    A_ub = sp.csr_matrix(-S.reshape(1, -1) / N)
    res = linprog(C.ravel(), A_ub=A_ub, b_ub=[-float(alpha)], A_eq=A_eq, b_eq=np.ones(N),
                  bounds=(0.0, 1.0), method="highs-ds")
    if res.status != 0:  # pragma: no cover - feasible by the check above
        raise RuntimeError(f"oracle LP failed: {res.message}")
    y = np.clip(res.x.reshape(N, M), 0.0, 1.0)
    return y, float(res.fun), float((y * S).sum() / N)


def round_oracle(y: np.ndarray, solved: np.ndarray) -> np.ndarray:
    """Integral routing from the LP: argmax y per request; a fractional request (at most
    one at an LP vertex) is rounded towards satisfaction (the most-satisfying model in its
    support), so the integral routing keeps satisfaction >= alpha at a cost no more than
    one request's cost above the LP bound."""
    y = np.asarray(y)
    route = np.argmax(y, axis=1)
    frac = np.flatnonzero(y.max(axis=1) < 1.0 - 1e-7)
    for t in frac:
        support = np.flatnonzero(y[t] > FRACTION_TOL)
        route[t] = support[np.argmax(solved[t, support])]
    return route.astype(np.int64)


def clairvoyant_oracle(data: RoutingData, embeddings: np.ndarray, alpha: float, seed: int,
                       feedback_rate: float, *, history: History | None = None,
                       feedback: FeedbackConfig | None = None) -> MethodResult:
    """Lower bound on cost: the per-request LP on the stream with every label known, rounded."""
    alpha = check_alpha(alpha)
    order, _, _ = common_stream(data, seed, feedback_rate, feedback)
    y, lp_cost, lp_sat = oracle_lp(data.solved, data.costs, alpha)
    route = round_oracle(y, data.solved)
    n_frac = int(np.sum(y.max(axis=1) < 1.0 - 1e-7))
    return method_result("oracle", data, alpha, order, route[order],
                         info={"lp_cost": lp_cost, "lp_satisfaction": lp_sat, "fractional_rows": n_frac})
