"""CARROT (Somerstep et al. 2025): offline kNN estimators of quality and cost, trained
with full feedback on the history split, and one trade-off mu tuned towards alpha.
"""

from __future__ import annotations

import math

import numpy as np

from ..data import RoutingData
from ..feedback import FeedbackConfig
from ..validation import Choice
from .common import (BUDGETS, TAG_BUDGET, TAG_CARROT, TAG_CARROT_JUDGE, TRADEOFF_GRID, History, MethodResult,
                     check_alpha, check_embeddings, closest_to_alpha, common_stream, feedback_or_default,
                     method_result, require_history, tagged_rng)
from .knn import K_GRID, KNNEstimator, select_k


def _budgeted_history(history: History, budget: str, n_requests: int, seed: int) -> History:
    """``history`` cut to ``n_requests`` seeded rows for the matched feedback budget."""
    BUDGETS("budget", budget)
    if budget == "full" or n_requests >= history.n:
        return history
    keep = np.zeros(history.n, bool)
    keep[tagged_rng(seed, TAG_BUDGET).permutation(history.n)[:max(2, n_requests)]] = True
    return History(history.data._subset(keep), np.asarray(history.embeddings)[keep])


def carrot_route(quality: np.ndarray, cost: np.ndarray, mu: float) -> np.ndarray:
    """argmax_m (1 - mu) * quality_m - mu * cost_m (cost normalised); ties: cheaper model."""
    if not 0.0 <= float(mu) <= 1.0:
        raise ValueError(f"mu must be in [0, 1], got {mu!r}")
    return np.argmax((1.0 - mu) * np.asarray(quality) - mu * np.asarray(cost), axis=1).astype(np.int64)


def carrot(data: RoutingData, embeddings: np.ndarray, alpha: float, seed: int, feedback_rate: float,
           *, history: History | None = None, mu: float | None = None,
           mu_grid: tuple[float, ...] = TRADEOFF_GRID, k: int | None = None,
           k_grid: tuple[int, ...] = K_GRID, val_fraction: float = 0.25,
           tuning: str = "loo", feedback: FeedbackConfig | None = None,
           budget: str = "matched") -> MethodResult:
    """CARROT (Somerstep et al. 2025), offline with full feedback on the history split.

    * ``budget``: ``"matched"`` (default) gives it the online routers' feedback budget, as
      the paper's comparison intends: a seeded subset of the history with
      ``ceil(feedback_rate * stream length / M)`` requests, whose M labels each add up to
      the feedback events an online router expects on the stream. ``"full"``: the whole
      history (about 3.75 times as many label events at rate 0.2 on 3 models).

    * Every history request is served by every model (full feedback); the cost of that is
      the training cost (``extra_cost`` = sum of all models' costs on the history).
    * Quality estimator fhat_m(x): mean of model m's labels over the k most cosine-similar
      history requests; cost estimator chat_m(x): mean of model m's cost over the same
      neighbours, divided by kappa = the largest per-model mean cost on the history (so
      the cheapest-to-dearest scale is [0, ~1]). k by leave-one-out CV on ``K_GRID``.
    * Decision argmax_m (1 - mu) fhat_m - mu chat_m. mu, unless given, is the value of
      ``mu_grid`` whose validation satisfaction comes closest to alpha (ties: the
      cheaper on validation). Validation (``tuning``): ``"loo"`` (default) uses every
      history request as validation with leave-one-out kNN predictions (the estimator
      fitted on all other history requests; k by LOO CV on the whole history);
      ``"holdout"`` holds out a seeded ``val_fraction`` of the history and fits on the
      rest. The final estimators use the whole history.
    * Feedback models: CARROT's history is fully labelled by assumption, so the rate and
      the presence kinds (bursty, negative) and delays (offline: every label is in before
      training) do not change its training data; a ``judge`` does: its history labels
      are the judge's verdicts (seeded with ``(seed, 31)``), as they would be if the
      judge labelled the history. Judge fill-in (``judge_fill``) changes nothing: its
      history has no unlabelled request to fill. Drift changes only the stream order it serves.
    """
    Choice(("holdout", "loo"))("tuning", tuning)
    alpha = check_alpha(alpha)
    X = check_embeddings(data, embeddings)
    hist = _budgeted_history(require_history(history, "CARROT", X.shape[1]), budget,
                             math.ceil(float(feedback_rate) * data.n_requests / data.n_models), seed)
    order, _, _ = common_stream(data, seed, feedback_rate, feedback)
    Xh = np.asarray(hist.embeddings, np.float32)
    Sh = hist.data.solved.astype(np.float64)
    fcfg = feedback_or_default(feedback)
    if fcfg.judge is not None:
        Sh = fcfg.judge.corrupt(hist.data.solved, tagged_rng(seed, TAG_CARROT_JUDGE)).astype(np.float64)
    Ch = np.asarray(hist.data.costs, np.float64)
    kappa = float(Ch.mean(axis=0).max()) or 1.0
    Cn = Ch / kappa
    n = hist.n
    rng = tagged_rng(seed, TAG_CARROT)
    perm = rng.permutation(n)
    n_val = min(n - 1, max(1, int(round(val_fraction * n))))
    val, train = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    if tuning == "loo":
        val = train = np.arange(n)
        n_val = n
    k_errors: dict = {}
    if k is None:
        k, k_errors = select_k(Xh[train], Sh[train], k_grid)
    val_sat: list[float] = []
    if mu is None:
        if tuning == "loo":
            est = KNNEstimator(Xh, {"s": Sh, "c": Cn}, k).predict(Xh, exclude=np.arange(n))
        else:
            est = KNNEstimator(Xh[train], {"s": Sh[train], "c": Cn[train]}, k).predict(Xh[val])
        val_cost = []
        for m_ in mu_grid:
            r = carrot_route(est["s"], est["c"], m_)
            val_sat.append(float(Sh[val, r].mean()))
            val_cost.append(float(Ch[val, r].mean()))
        mu = float(mu_grid[closest_to_alpha(np.array(val_sat), alpha, np.array(val_cost))])
    mu = float(mu)
    final = KNNEstimator(Xh, {"s": Sh, "c": Cn}, k).predict(X[order])
    model = carrot_route(final["s"], final["c"], mu)
    return method_result("carrot", data, alpha, order, model, extra_cost=float(Ch.sum()),
                         info={"mu": mu, "k": int(k), "kappa": kappa, "n_history": n, "n_val": int(n_val),
                               "val_satisfaction": val_sat, "k_cv_error": k_errors,
                               "quality": final["s"], "cost_norm": final["c"]})
