"""Baseline routers SLARouter is compared against (paper Table 1), on one seeded stream.

Every method has the signature::

    method(data, embeddings, alpha, seed, feedback_rate, *, history=None, feedback=None, **params)
        -> MethodResult

``data``/``embeddings`` are the **stream** the method is evaluated on; its serving order
and feedback plan come from :func:`slarouter_core.simulator.stream_plan_full` with
``seed`` and the keyword ``feedback`` (a :class:`~slarouter_core.feedback.FeedbackConfig`;
None = IID, today's draws), so every method (SLARouter included, through
:func:`slarouter_router`) sees the same stream with the same feedback. What each method
does with each feedback kind is in ``docs/EXPERIMENTS.md`` ("Feedback models"). ``history`` (a :class:`History`, from :func:`split_history`) is the
disjoint, seeded history split that only the offline methods (CARROT, Causal) learn from;
the online methods ignore it. See ``docs/EXPERIMENTS.md`` for the protocol.

Methods (``METHODS``):

* ``single`` (param ``model``: name or index) and ``random``: reference points.
* ``static_mixture``: the text-blind optimum, an LP over call fractions
  (:func:`static_mixture_lp`) on the stream's per-model means, realised with exact counts.
* ``oracle``: the per-request LP with every label known (:func:`oracle_lp`), rounded; a
  lower bound on the cost of any router at its satisfaction.
* ``messplus``: MESS+ as published: exploration queries every model, is charged the sum of
  their costs and trains on all labels; the queue moves only on feedback.
* ``carrot``: CARROT, offline with full feedback on the history split; kNN (cosine)
  quality and cost estimators, ``mu`` tuned on a validation part of the history.
* ``causal``: Causal LLM routing, RM-Softmax on doubly-robust pseudo-outcomes from a
  uniform-logging observational log of the history split; ``lambda`` tuned by cross-fitting.
* ``slarouter``: SLARouter through :func:`simulator.simulate`, every ``RouterConfig`` /
  ``SimulationConfig`` field reachable as a param (``V``, ``mode``, ``c``, ...).

Offline methods report the cost of collecting their training data as ``extra_cost``
(the paper adds it to their operating cost).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from .data import RoutingData
from .feedback import FeedbackConfig, FeedbackPlan, make_plan
from .metrics import Summary, summarize
from .predictor import PredictorConfig, SatisfactionPredictor
from .router import NO_FEEDBACK, RouterConfig, exploration_probability
from .simulator import SimulationConfig, simulate, stream_plan_full

#: tolerance used when deciding whether a fraction / LP variable is non-zero
FRACTION_TOL = 1e-9
#: CARROT's mu grid and (by default) Causal's lambda grid: 0, 0.05, ..., 1
TRADEOFF_GRID = tuple(round(0.05 * i, 2) for i in range(21))
#: candidate neighbour counts for the kNN estimators (chosen by leave-one-out CV)
K_GRID = (1, 3, 5, 10, 20, 40, 80)
#: paper's fixed V for SLARouter and MESS+ (costs in joules)
PAPER_V = 1e-5

# seed-sequence tags: every random draw of a method derives from (seed, tag)
_TAG_SPLIT, _TAG_RANDOM, _TAG_MIXTURE, _TAG_CARROT, _TAG_CAUSAL = 11, 1, 2, 3, 4
#: tags of the offline methods' feedback draws (judge labels, the Causal log's feedback)
_TAG_CARROT_JUDGE, _TAG_CAUSAL_LOG, _TAG_BUDGET = 31, 32, 33


@dataclass(frozen=True)
class History:
    """The offline methods' training split: its rows and their embeddings."""

    data: RoutingData
    embeddings: np.ndarray

    def __post_init__(self) -> None:
        emb = np.asarray(self.embeddings)
        if emb.ndim != 2 or emb.shape[0] != self.data.n_requests:
            raise ValueError(f"history embeddings must be (n={self.data.n_requests}, D), got {emb.shape}")

    @property
    def n(self) -> int:
        return self.data.n_requests


@dataclass(frozen=True)
class MethodResult:
    """One method's routing of one seeded stream.

    ``model``, ``satisfied`` and ``cost`` are per request in stream order (``order`` maps
    stream position to data row). ``cost`` is the cost *charged* at that step (for MESS+
    exploration: the sum over all models). ``extra_cost`` is the offline training-data
    cost (0 for online methods and reference points), in the data's cost unit, and is
    not included in ``summary.operating_cost``; ``total_cost`` adds it.
    """

    name: str
    model: np.ndarray
    order: np.ndarray
    satisfied: np.ndarray
    cost: np.ndarray
    extra_cost: float
    summary: Summary
    explored: np.ndarray | None = None
    q: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    @property
    def total_cost(self) -> float:
        """Operating cost plus offline training cost."""
        return self.summary.operating_cost + self.extra_cost


class Method(Protocol):
    def __call__(self, data: RoutingData, embeddings: np.ndarray, alpha: float, seed: int,
                 feedback_rate: float, *, history: History | None = None,
                 feedback: FeedbackConfig | None = None, **params: Any) -> MethodResult: ...


# -- helpers ------------------------------------------------------------------------------
def _check_alpha(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)):
        raise ValueError(f"alpha must be a number strictly between 0 and 1, got {alpha!r}")
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    return a


def _check_emb(data: RoutingData, embeddings: np.ndarray, what: str = "embeddings") -> np.ndarray:
    X = np.asarray(embeddings, np.float32)
    if X.ndim != 2 or X.shape[0] != data.n_requests:
        raise ValueError(f"{what} must be (n_requests={data.n_requests}, D), got {X.shape}")
    return X


def _feedback(feedback: FeedbackConfig | None) -> FeedbackConfig:
    if feedback is None:
        return FeedbackConfig()
    if not isinstance(feedback, FeedbackConfig):
        raise TypeError(f"feedback must be a FeedbackConfig or None, got {type(feedback).__name__}")
    return feedback


def _plan(data: RoutingData, seed: int, feedback_rate: float, feedback: FeedbackConfig | None = None
          ) -> tuple[np.ndarray, FeedbackPlan, int]:
    """The common stream: order, :class:`FeedbackPlan` (verdicts, delays) and a method seed.

    Every method calls this with the run's seed, rate and feedback model, so all of them
    serve the same order (workload drift reorders it) and see the same verdicts.
    """
    if isinstance(feedback_rate, bool) or not 0.0 <= float(feedback_rate) <= 1.0:
        raise ValueError(f"feedback_rate must be in [0, 1], got {feedback_rate!r}")
    if data.n_requests == 0:
        raise ValueError("the stream is empty: nothing to route")
    fcfg = _feedback(feedback)
    groups = data.benchmarks if fcfg.kind == "drift" else None
    return stream_plan_full(data.n_requests, data.solved, float(feedback_rate), int(seed), True, fcfg, groups)


def _sub_seed(seed: int, tag: int) -> int:
    """An integer seed for (seed, tag), for helpers that take a plain int."""
    return int(np.random.SeedSequence([int(seed), int(tag)]).generate_state(1, np.uint32)[0])


def _rng(seed: int, tag: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), int(tag)])))


def _result(name: str, data: RoutingData, alpha: float, order: np.ndarray, model: np.ndarray,
            charged: np.ndarray | None = None, extra_cost: float = 0.0,
            explored: np.ndarray | None = None, q: np.ndarray | None = None,
            feedback: np.ndarray | None = None, v: np.ndarray | None = None,
            info: dict | None = None) -> MethodResult:
    model = np.asarray(model, np.int64)
    satisfied = data.solved[order, model].astype(np.int8)
    cost = data.costs[order, model].astype(np.float64) if charged is None else np.asarray(charged, np.float64)
    q_arr = np.zeros(len(model)) if q is None else q
    summary = summarize(model, satisfied, cost, q_arr, alpha, data.models, data.cost_unit,
                        explored, feedback, v)
    return MethodResult(name=name, model=model, order=order, satisfied=satisfied, cost=cost,
                        extra_cost=float(extra_cost), summary=summary, explored=explored, q=q,
                        info=info or {})


def _require_history(history: History | None, method: str, width: int) -> History:
    """The offline method's history split, checked against the stream's embedding width."""
    if history is None:
        raise ValueError(f"{method} is an offline method: it needs a history split "
                         "(history=split_history(...)[2]); the runner passes one")
    if not isinstance(history, History):
        raise TypeError("history must be a baselines.History")
    if history.n < 2:
        raise ValueError(f"{method} needs at least 2 history requests, got {history.n}")
    if np.shape(history.embeddings)[1] != width:
        raise ValueError("history and stream embeddings differ in width")
    return history


def _budgeted_history(history: History, budget: str, n_requests: int, seed: int) -> History:
    """``history`` cut to ``n_requests`` seeded rows for the matched feedback budget."""
    if budget not in ("matched", "full"):
        raise ValueError(f"budget must be 'matched' or 'full', got {budget!r}")
    if budget == "full" or n_requests >= history.n:
        return history
    keep = np.zeros(history.n, bool)
    keep[_rng(seed, _TAG_BUDGET).permutation(history.n)[:max(2, n_requests)]] = True
    return History(history.data._subset(keep), np.asarray(history.embeddings)[keep])


def split_history(data: RoutingData, embeddings: np.ndarray, seed: int,
                  history_fraction: float = 0.2) -> tuple[RoutingData, np.ndarray, History]:
    """Seeded split of ``data`` into ``(stream, stream_embeddings, history)``.

    ``round(history_fraction * N)`` rows, drawn by a permutation seeded with
    ``(seed, 11)``, form the history; the rest, in their original order, is the stream
    (which ``stream_plan`` then shuffles with ``seed``). Fraction 0 gives an empty history.
    """
    X = _check_emb(data, embeddings)
    f = float(history_fraction)
    if not 0.0 <= f < 1.0:
        raise ValueError(f"history_fraction must be in [0, 1), got {history_fraction!r}")
    n = data.n_requests
    k = int(round(f * n))
    if n - k < 1:
        raise ValueError(f"history_fraction {f} leaves no request for the stream ({n} rows)")
    perm = _rng(seed, _TAG_SPLIT).permutation(n)
    hist = np.zeros(n, bool)
    hist[perm[:k]] = True
    stream = data._subset(~hist)
    return stream, X[~hist], History(data._subset(hist), X[hist])


# -- reference points ---------------------------------------------------------------------
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
    alpha = _check_alpha(alpha)
    order, _, _ = _plan(data, seed, feedback_rate, feedback)
    return _result(f"single:{data.models[m]}", data, alpha, order, np.full(data.n_requests, m, np.int64))


def single_model(m: int | str) -> Method:
    """A method that always serves model ``m`` (kept for callers of the old API)."""

    def run(data, embeddings, alpha, seed, feedback_rate, *, history=None, feedback=None):
        return single(data, embeddings, alpha, seed, feedback_rate, model=m, feedback=feedback)

    run.__name__ = f"single_model_{m}"
    return run


def random_router(data: RoutingData, embeddings: np.ndarray, alpha: float, seed: int,
                  feedback_rate: float, *, history: History | None = None,
                  feedback: FeedbackConfig | None = None) -> MethodResult:
    """Uniform over models, seeded with ``(seed, 1)``."""
    alpha = _check_alpha(alpha)
    order, _, _ = _plan(data, seed, feedback_rate, feedback)
    model = _rng(seed, _TAG_RANDOM).integers(0, data.n_models, data.n_requests)
    return _result("random", data, alpha, order, model)


# -- static mixture -----------------------------------------------------------------------
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
    alpha = _check_alpha(alpha)
    order, _, _ = _plan(data, seed, feedback_rate, feedback)
    acc = data.solved.mean(axis=0)
    mean_cost = data.costs.mean(axis=0)
    f, expected_cost, feasible = static_mixture_lp(acc, mean_cost, alpha)
    counts = exact_counts(f, data.n_requests)
    model = _rng(seed, _TAG_MIXTURE).permutation(np.repeat(np.arange(data.n_models), counts))
    return _result("static_mixture", data, alpha, order, model,
                   info={"fractions": [float(x) for x in f], "expected_cost_per_request": expected_cost,
                         "expected_satisfaction": float(f @ acc), "feasible": feasible})


# -- clairvoyant oracle -------------------------------------------------------------------
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
    alpha = _check_alpha(alpha)
    order, _, _ = _plan(data, seed, feedback_rate, feedback)
    y, lp_cost, lp_sat = oracle_lp(data.solved, data.costs, alpha)
    route = round_oracle(y, data.solved)
    n_frac = int(np.sum(y.max(axis=1) < 1.0 - 1e-7))
    return _result("oracle", data, alpha, order, route[order],
                   info={"lp_cost": lp_cost, "lp_satisfaction": lp_sat, "fractional_rows": n_frac})


# -- MESS+ --------------------------------------------------------------------------------
def messplus(data: RoutingData, embeddings: np.ndarray, alpha: float, seed: int,
             feedback_rate: float, *, history: History | None = None, c: float = 0.1,
             V: float | None = PAPER_V, q_max: float = 30.0, eps: float = 0.001,
             predictor: PredictorConfig | dict | None = None,
             feedback: FeedbackConfig | None = None) -> MethodResult:
    """MESS+ on the common stream (the paper uses SLARouter's V and c for it).

    * Explore with probability ``min(1, c / t^(1/4))`` (step 1 always explores, so every
      running cost estimate starts from a real observation). Exploration queries every
      model, serves the last (most capable) one and is charged the SUM of all models'
      costs. When the user gives feedback (plan of ``stream_plan``, rate phi) the
      predictor gets the full label vector (one observation per model) and one step.
    * Exploitation: argmin_m V * Cbar_m + Q * (alpha - shat_m(x)); Cbar_m is the running
      mean of model m's observed cost (all models on exploration, the served one otherwise).
    * Queue: Q <- max(0, Q + alpha - s) only when feedback exists (s the served model's
      label); without feedback Q is left unchanged (no imputation).
    * V: fixed (default 1e-5, as SLARouter in the paper) or, with ``V=None``, data-driven
      as SLARouter's: q_max * eps / DeltaC with DeltaC the running mean cost gap.

    Feedback models (``feedback``, the same plan every method of a run gets): a verdict on
    the served model moves the queue; on an exploration step the predictor learns every
    model's verdict the plan gives (all of them under IID-like presence; under
    negativity bias each answer's verdict is present or not by its own label, as a
    user rating all M answers would give it; a judge's labels are the judge's). Delayed
    feedback is honoured: a verdict on request i (queue step and, for exploration, the
    predictor update) takes effect after request ``i + delay - 1`` was served (delay 0
    or 1: at once), exactly when the simulator hands SLARouter the same verdict.

    The policy draws come from the router seed of ``stream_plan`` (as SLARouter's).
    Predictions are batched over each stretch between two predictor updates.
    """
    alpha = _check_alpha(alpha)
    X = _check_emb(data, embeddings)
    pcfg = PredictorConfig(**predictor) if isinstance(predictor, dict) else (predictor or PredictorConfig())
    if V is not None and not (np.isfinite(V) and V > 0):
        raise ValueError(f"V must be > 0 (or None for data-driven V), got {V!r}")
    N, M = data.n_requests, data.n_models
    order, plan, mseed = _plan(data, seed, feedback_rate, feedback)
    fb = plan.feedback
    policy_ss, buffer_ss, pred_ss = np.random.SeedSequence(int(mseed)).spawn(3)
    policy_rng = np.random.Generator(np.random.PCG64(policy_ss))
    buffer_rng = np.random.Generator(np.random.PCG64(buffer_ss))
    pred = SatisfactionPredictor(X.shape[1], M, pcfg, seed=int(pred_ss.generate_state(1, np.uint64)[0]))
    Xs = X[order]
    Cs = np.asarray(data.costs, np.float64)[order]
    ts = np.arange(1, N + 1)
    explore = policy_rng.random(N) < exploration_probability(ts, c)
    explore[0] = True
    has = fb != NO_FEEDBACK  # (N, M): which verdicts the plan gives
    learn = explore & has.any(axis=1)  # exploration steps whose labels reach the predictor
    steps = np.arange(N)
    # end of which step each request's verdict arrives (the simulator's delayed semantics)
    due = steps if plan.delay is None else steps + np.maximum(np.asarray(plan.delay, np.int64) - 1, 0)
    spreads = np.cumsum(Cs[:, -1] - Cs[:, 0])
    if V is not None:
        v_trace = np.full(N, float(V))
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            v_trace = np.where(spreads > 0, q_max * eps / (spreads / ts), q_max * eps)
    charged = np.where(explore, Cs.sum(axis=1), 0.0)

    model = np.full(N, M - 1, np.int64)
    q_trace = np.zeros(N)
    fb_served = np.full(N, NO_FEEDBACK, np.int8)
    cost_sum = np.zeros(M)
    cost_cnt = np.zeros(M)
    q = 0.0
    arrivals: dict[int, list[int]] = {}
    # the predictor changes only at the end of steps where exploration labels arrive
    train_at = np.unique(due[learn & (due < N)])
    start = 0
    for stop in list(train_at + 1) + [N]:
        if stop <= start:
            continue
        seg = np.arange(start, stop)
        exploit = seg[~explore[seg]]
        shat = pred.predict(Xs[exploit]) if len(exploit) else None
        k = 0
        for i in seg:
            if explore[i]:
                m = M - 1
                cost_sum += Cs[i]
                cost_cnt += 1
            else:
                cbar = cost_sum / np.maximum(cost_cnt, 1)
                m = int(np.argmin(v_trace[i] * cbar + q * (alpha - shat[k])))
                k += 1
                charged[i] = Cs[i, m]
                cost_sum[m] += Cs[i, m]
                cost_cnt[m] += 1
            model[i] = m
            fb_served[i] = fb[i, m]
            if has[i, m] or learn[i]:
                arrivals.setdefault(int(due[i]), []).append(int(i))
            for j in arrivals.pop(int(i), ()):
                mj = model[j]
                if has[j, mj]:
                    q = max(0.0, q + alpha - float(fb[j, mj]))
                if learn[j]:
                    for jm in np.flatnonzero(has[j]):
                        pred.add(Xs[j], int(jm), float(fb[j, jm]))
                    pred.train_step(buffer_rng)
            q_trace[i] = q
        start = stop
    return _result("messplus", data, alpha, order, model, charged=charged, explored=explore,
                   q=q_trace, feedback=fb_served, v=v_trace,
                   info={"c": c, "V": V, "explore_cost": float(charged[explore].sum())})


# -- kNN estimators (CARROT's quality/cost estimators, Causal's outcome regressions) --------
def _unit_rows(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, np.float32)
    norm = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.maximum(norm, 1e-12)


def knn_neighbours(Q: np.ndarray, X: np.ndarray, k: int, exclude: np.ndarray | None = None,
                   chunk: int = 2048) -> np.ndarray:
    """Indices (len(Q), k) of the k most cosine-similar rows of X, most similar first.

    ``exclude[i]`` (an index into X, or -1) is left out for query i: leave-one-out when
    the queries are X itself. Ties go to the lower index (stable order).
    """
    Qn, Xn = _unit_rows(Q), _unit_rows(X)
    n = len(Xn)
    k = int(min(k, n - (0 if exclude is None else 1)))
    if k < 1:
        raise ValueError("kNN needs at least one reference row")
    out = np.empty((len(Qn), k), np.int64)
    for s in range(0, len(Qn), chunk):
        sims = Qn[s:s + chunk] @ Xn.T
        if exclude is not None:
            ex = np.asarray(exclude[s:s + chunk])
            rows = np.flatnonzero(ex >= 0)
            sims[rows, ex[rows]] = -np.inf
        # stable top-k: sort by (-sim, index)
        part = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        out[s:s + chunk] = part
    return out


def select_k(X: np.ndarray, Y: np.ndarray, k_grid: tuple[int, ...] = K_GRID) -> tuple[int, dict]:
    """k minimising the leave-one-out squared error of the kNN mean of ``Y`` (n, M).

    Leave-one-out is n-fold cross-validation, computed at once for every k from the
    cumulative sums of the sorted neighbours' targets. Ties go to the smaller k.
    """
    Y = np.asarray(Y, np.float64)
    if Y.ndim == 1:
        Y = Y[:, None]
    n = len(Y)
    if n < 2:
        return 1, {}
    grid = sorted({int(k) for k in k_grid if 1 <= int(k) <= n - 1}) or [n - 1]
    idx = knn_neighbours(X, X, max(grid), exclude=np.arange(n))
    cum = np.cumsum(Y[idx], axis=1)  # (n, kmax, M)
    errors = {k: float(np.mean((cum[:, k - 1] / k - Y) ** 2)) for k in grid}
    best = min(grid, key=lambda k: (errors[k], k))
    return best, errors


class KNNEstimator:
    """Per-model means over the k nearest (cosine) reference rows.

    ``targets`` is a dict name -> (n, M) array (e.g. ``solved`` and normalised ``cost``);
    :meth:`predict` returns the same names with (len(Q), M) means.
    """

    def __init__(self, X: np.ndarray, targets: dict[str, np.ndarray], k: int):
        self.X = np.asarray(X, np.float32)
        self.targets = {name: np.asarray(v, np.float64) for name, v in targets.items()}
        self.k = int(k)

    def predict(self, Q: np.ndarray, exclude: np.ndarray | None = None) -> dict[str, np.ndarray]:
        idx = knn_neighbours(Q, self.X, self.k, exclude)
        return {name: v[idx].mean(axis=1) for name, v in self.targets.items()}


# -- CARROT -------------------------------------------------------------------------------
def carrot_route(quality: np.ndarray, cost: np.ndarray, mu: float) -> np.ndarray:
    """argmax_m (1 - mu) * quality_m - mu * cost_m (cost normalised); ties: cheaper model."""
    if not 0.0 <= float(mu) <= 1.0:
        raise ValueError(f"mu must be in [0, 1], got {mu!r}")
    return np.argmax((1.0 - mu) * np.asarray(quality) - mu * np.asarray(cost), axis=1).astype(np.int64)


def _closest(values: np.ndarray, alpha: float, costs: np.ndarray) -> int:
    """Index of the value closest to alpha; ties to the lower cost, then the first."""
    gap = np.round(np.abs(np.asarray(values) - alpha), 12)
    cands = np.flatnonzero(gap == gap.min())
    return int(cands[np.argmin(np.asarray(costs)[cands])])


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
      judge labelled the history. Drift changes only the stream order it serves.
    """
    if tuning not in ("holdout", "loo"):
        raise ValueError(f"tuning must be 'holdout' or 'loo', got {tuning!r}")
    alpha = _check_alpha(alpha)
    X = _check_emb(data, embeddings)
    hist = _budgeted_history(_require_history(history, "CARROT", X.shape[1]), budget,
                             math.ceil(float(feedback_rate) * data.n_requests / data.n_models), seed)
    order, _, _ = _plan(data, seed, feedback_rate, feedback)
    Xh = np.asarray(hist.embeddings, np.float32)
    Sh = hist.data.solved.astype(np.float64)
    fcfg = _feedback(feedback)
    if fcfg.judge is not None:
        Sh = fcfg.judge.corrupt(hist.data.solved, _rng(seed, _TAG_CARROT_JUDGE)).astype(np.float64)
    Ch = np.asarray(hist.data.costs, np.float64)
    kappa = float(Ch.mean(axis=0).max()) or 1.0
    Cn = Ch / kappa
    n = hist.n
    rng = _rng(seed, _TAG_CARROT)
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
        mu = float(mu_grid[_closest(np.array(val_sat), alpha, np.array(val_cost))])
    mu = float(mu)
    final = KNNEstimator(Xh, {"s": Sh, "c": Cn}, k).predict(X[order])
    model = carrot_route(final["s"], final["c"], mu)
    return _result("carrot", data, alpha, order, model, extra_cost=float(Ch.sum()),
                   info={"mu": mu, "k": int(k), "kappa": kappa, "n_history": n, "n_val": int(n_val),
                         "val_satisfaction": val_sat, "k_cv_error": k_errors,
                         "quality": final["s"], "cost_norm": final["c"]})


# -- Causal LLM routing -------------------------------------------------------------------
def rm_softmax_fit(X: np.ndarray, Y: np.ndarray, *, tau: float = 1.0, l2: float = 1e-3,
                   steps: int = 300, lr: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """RM-Softmax: linear scores g(x) = x W + b, policy softmax(g / tau), minimising the
    expected regret (1/n) sum_i sum_t pi(t|x_i) (max_s Y_is - Y_it) + l2 |W|^2 with Adam.

    ``Y`` is (L, n, M): L independent problems (e.g. one per lambda) trained at once.
    Starts from W = 0 (the uniform policy); deterministic. Returns W (L, D, M), b (L, M).
    """
    X = np.asarray(X, np.float64)
    Y = np.asarray(Y, np.float64)
    if Y.ndim == 2:
        Y = Y[None]
    L, n, M = Y.shape
    D = X.shape[1]
    R = np.ascontiguousarray((Y.max(axis=2, keepdims=True) - Y).transpose(1, 0, 2))  # (n, L, M)
    W = np.zeros((D, L * M))  # all problems side by side: one BLAS product per step
    b = np.zeros((L, M))
    mW, vW, mb, vb = np.zeros_like(W), np.zeros_like(W), np.zeros_like(b), np.zeros_like(b)
    b1, b2, e = 0.9, 0.999, 1e-8
    XT = np.ascontiguousarray(X.T)
    for s in range(1, steps + 1):
        G = (X @ W).reshape(n, L, M) + b
        G = (G - G.max(axis=2, keepdims=True)) / tau
        P = np.exp(G)
        P /= P.sum(axis=2, keepdims=True)
        dG = P * (R - (P * R).sum(axis=2, keepdims=True)) / (tau * n)
        gW = XT @ dG.reshape(n, L * M) + 2.0 * l2 * W
        gb = dG.sum(axis=0)
        for p, g, m1, m2 in ((W, gW, mW, vW), (b, gb, mb, vb)):
            m1 *= b1
            m1 += (1 - b1) * g
            m2 *= b2
            m2 += (1 - b2) * g * g
            p -= lr * (m1 / (1 - b1 ** s)) / (np.sqrt(m2 / (1 - b2 ** s)) + e)
    W = np.ascontiguousarray(W.reshape(D, L, M).transpose(1, 0, 2))
    return W, b


def _knn_per_model(X: np.ndarray, rows_by_model: list[np.ndarray], target: np.ndarray,
                   query: np.ndarray, k_grid: tuple[int, ...]) -> tuple[np.ndarray, list[int]]:
    """(len(query), M) kNN regression of ``target`` fitted, per model t, on the rows
    logged with t; a query row that is itself one of them is left out (cross-fitting)."""
    M = len(rows_by_model)
    out = np.empty((len(query), M))
    ks = []
    fallback = float(np.mean(target[np.concatenate(rows_by_model)])) if sum(map(len, rows_by_model)) else 0.5
    for t, rows in enumerate(rows_by_model):
        if len(rows) == 0:
            out[:, t] = fallback
            ks.append(0)
            continue
        if len(rows) == 1:
            out[:, t] = target[rows[0]]
            ks.append(1)
            continue
        k, _ = select_k(X[rows], target[rows], k_grid)
        pos = {int(r): j for j, r in enumerate(rows)}
        exclude = np.array([pos.get(int(q), -1) for q in query])
        idx = knn_neighbours(X[query], X[rows], k, exclude)
        out[:, t] = target[rows][idx].mean(axis=1)
        ks.append(int(k))
    return out, ks


def causal(data: RoutingData, embeddings: np.ndarray, alpha: float, seed: int, feedback_rate: float,
           *, history: History | None = None, lam: float | None = None,
           lam_grid: tuple[float, ...] = TRADEOFF_GRID, folds: int = 5, k_grid: tuple[int, ...] = K_GRID,
           tau: float = 1.0, l2: float = 1e-3, steps: int = 300, lr: float = 0.05,
           propensity_clip: float = 0.05, feedback: FeedbackConfig | None = None,
           budget: str = "matched") -> MethodResult:
    """Causal LLM routing (Tsiourvas et al. 2025), the per-lambda RM-Softmax variant.

    * ``budget``: ``"matched"`` (default): the log's feedback rate is raised to
      ``min(1, feedback_rate * stream length / history length)``, so that the log holds
      as many feedback events as an online router expects on the stream (the paper's
      "same amount of feedback"; a feedback model that cannot realise that rate keeps the
      run's rate); ``"full"``: the log's rate is the run's rate.

    * Log: every history request is served once by a model drawn uniformly (propensity
      1/M, known); the user gives feedback with ``feedback_rate`` (seeded with
      ``(seed, 4)``). The training cost is the cost of serving the history that way.
      Only the rows with feedback have an outcome; their cost is always observed.
    * Utility y(t) = a(t) - lambda * c(t) / kappa, kappa = the largest per-model mean
      logged cost (costs normalised as CARROT's; lambda on the same [0, 1] grid).
    * Doubly robust pseudo-outcomes on the feedback rows:
      Yhat_i(t) = muhat_t(x_i) + 1{t_i = t} (y_i - muhat_t(x_i)) / max(e, clip),
      muhat_t a per-model cosine kNN regression (k by leave-one-out CV) of the outcome
      (on model t's feedback rows) and of the cost (on all rows logged with t); a row's
      own observation is left out of its muhat (cross-fitting).
    * RM-Softmax (:func:`rm_softmax_fit`) per lambda; routes argmax_t g(x)_t.
    * Feedback models: the log's feedback follows the run's ``feedback`` model
      (:func:`feedback.make_plan` over the log in history order, seeded with
      ``(seed, 32)``): bursty on/off periods, negativity bias (a logged failure is likelier
      to be labelled, which the DR estimate, built for labels missing at random, does
      not correct), a judge's verdicts as outcomes. Delays do not matter offline (the
      log is complete before training); drift changes only the stream order it serves.
    * lambda, unless given: ``folds``-fold cross-fitting over the feedback rows; each
      held-out fold's satisfaction under the policy is estimated doubly robustly (the
      log has no other labels); the lambda closest to alpha wins (ties: the cheaper by
      the same DR estimate of cost). The final policy is trained on all feedback rows.
    """
    alpha = _check_alpha(alpha)
    X = _check_emb(data, embeddings)
    hist = _require_history(history, "Causal routing", X.shape[1])
    order, _, _ = _plan(data, seed, feedback_rate, feedback)
    Xh = np.asarray(hist.embeddings, np.float32)
    n, M = hist.n, data.n_models
    Sh = hist.data.solved.astype(np.float64)
    Ch = np.asarray(hist.data.costs, np.float64)
    if budget not in ("matched", "full"):
        raise ValueError(f"budget must be 'matched' or 'full', got {budget!r}")
    fcfg = _feedback(feedback)
    log_rate = float(feedback_rate)
    if budget == "matched":
        log_rate = min(1.0, float(feedback_rate) * data.n_requests / max(n, 1))
        try:
            fcfg.check_rate(log_rate)
        except ValueError:
            log_rate = float(feedback_rate)
    rng = _rng(seed, _TAG_CAUSAL)
    t_log = rng.integers(0, M, n)
    gives = rng.random(n) < log_rate
    c_log = Ch[np.arange(n), t_log]
    a_log = Sh[np.arange(n), t_log]
    fcfg = _feedback(feedback)
    if not fcfg.is_default:  # the log's feedback follows the run's feedback model
        log_plan = make_plan(a_log.astype(np.int8)[:, None], gives, log_rate,
                             _sub_seed(seed, _TAG_CAUSAL_LOG), fcfg)
        seen = log_plan.feedback[:, 0]
        gives = seen != NO_FEEDBACK
        a_log = np.where(gives, seen, a_log).astype(np.float64)
    means = [c_log[t_log == t].mean() for t in range(M) if np.any(t_log == t)]
    kappa = float(max(means)) if means else 1.0
    cn_log = c_log / kappa
    fb_rows = np.flatnonzero(gives)
    if len(fb_rows) < 2:
        raise ValueError(f"Causal routing needs logged feedback: the history of {n} requests at "
                         f"feedback rate {feedback_rate} gave {len(fb_rows)} labelled rows (need >= 2)")
    e = max(1.0 / M, float(propensity_clip))
    # outcome regressions, evaluated on the feedback rows (the DR sample)
    mu_a, k_a = _knn_per_model(Xh, [fb_rows[t_log[fb_rows] == t] for t in range(M)], a_log, fb_rows, k_grid)
    mu_c, k_c = _knn_per_model(Xh, [np.flatnonzero(t_log == t) for t in range(M)], cn_log, fb_rows, k_grid)
    Xf, tf = Xh[fb_rows], t_log[fb_rows]
    hit = np.zeros((len(fb_rows), M))
    hit[np.arange(len(fb_rows)), tf] = 1.0 / e
    A_dr = mu_a + hit * (a_log[fb_rows, None] - mu_a)
    C_dr = mu_c + hit * (cn_log[fb_rows, None] - mu_c)
    fit = dict(tau=tau, l2=l2, steps=steps, lr=lr)

    est_sat: list[float] = []
    if lam is None:
        grid = np.asarray(lam_grid, np.float64)
        Y = A_dr[None] - grid[:, None, None] * C_dr[None]
        nf = len(fb_rows)
        fold_of = np.empty(nf, np.int64)
        fold_of[rng.permutation(nf)] = np.arange(nf) % max(2, min(int(folds), nf))
        sat_sum = np.zeros(len(grid))
        cost_sum = np.zeros(len(grid))
        for f in np.unique(fold_of):
            tr, te = fold_of != f, fold_of == f
            W, b = rm_softmax_fit(Xf[tr], Y[:, tr], **fit)
            route = np.argmax(np.einsum("nd,ldm->lnm", Xf[te], W) + b[:, None, :], axis=2)  # (L, n_te)
            rows = np.arange(int(te.sum()))
            for j in range(len(grid)):
                sat_sum[j] += A_dr[te][rows, route[j]].sum()
                cost_sum[j] += C_dr[te][rows, route[j]].sum()
        est_sat = list(sat_sum / nf)
        lam = float(grid[_closest(sat_sum / nf, alpha, cost_sum)])
    lam = float(lam)
    W, b = rm_softmax_fit(Xf, (A_dr - lam * C_dr)[None], **fit)
    model = np.argmax(X[order] @ W[0] + b[0], axis=1)
    return _result("causal", data, alpha, order, model, extra_cost=float(c_log.sum()),
                   info={"lambda": lam, "kappa": kappa, "n_history": n, "n_feedback": int(len(fb_rows)),
                         "k_outcome": k_a, "k_cost": k_c, "dr_satisfaction": est_sat,
                         "variant": "rm-softmax, one router per lambda on a grid"})


# -- SLARouter as a method ----------------------------------------------------------------
_SIM_KEYS = {f.name for f in dataclasses.fields(SimulationConfig)} - {"router", "feedback_rate", "seed", "shuffle",
                                                                      "feedback"}
#: message for ``feedback`` given as a method param (it is a property of the run)
FEEDBACK_PARAM_ERROR = ("feedback is set per run for every method alike (GridConfig.feedback, "
                        "--feedback on the CLI, or the feedback= argument of a method), not as a method param")


def _coerce_field(cls: type, name: str, value: Any) -> Any:
    """A JSON dict given for a dataclass-valued field of ``cls`` becomes that dataclass
    (via its ``from_dict`` when it has one), so nested configs work as method params."""
    if not isinstance(value, dict):
        return value
    for f in dataclasses.fields(cls):
        if f.name != name:
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
        if default is not None and dataclasses.is_dataclass(default):
            kind = type(default)
            return kind.from_dict(value) if hasattr(kind, "from_dict") else kind(**value)
    return value


def slarouter_configs(alpha: float, feedback_rate: float, seed: int, params: dict[str, Any],
                      feedback: FeedbackConfig | None = None) -> SimulationConfig:
    """The ``SimulationConfig`` (with its ``RouterConfig``) that ``params`` describe.

    ``params`` keys are ``RouterConfig`` fields or extra ``SimulationConfig`` fields
    (dicts for nested dataclass fields such as ``predictor``); unknown keys or bad values
    raise ValueError naming the problem.
    """
    params = dict(params)
    if "alpha" in params or "shuffle" in params:
        raise ValueError("alpha and shuffle are set by the run, not by method params")
    if "feedback" in params:
        raise ValueError(FEEDBACK_PARAM_ERROR)
    fcfg = _feedback(feedback)
    sim_kw = {k: _coerce_field(SimulationConfig, k, params.pop(k)) for k in list(params) if k in _SIM_KEYS}
    try:
        router_kw = {k: _coerce_field(RouterConfig, k, v) for k, v in params.items()}
        cfg = RouterConfig(alpha=alpha, **router_kw)
        return SimulationConfig(cfg, feedback_rate=float(feedback_rate), seed=int(seed), feedback=fcfg, **sim_kw)
    except TypeError as exc:
        raise ValueError(f"bad SLARouter parameter: {exc}") from None


def slarouter_router(data: RoutingData, embeddings: np.ndarray, alpha: float, seed: int,
                     feedback_rate: float, *, history: History | None = None,
                     feedback: FeedbackConfig | None = None, **params: Any) -> MethodResult:
    """SLARouter through :func:`simulator.simulate` on the common stream.

    ``params`` are ``RouterConfig`` fields (``V``, ``c``, ``q_max``, ``eps``, ``mode``,
    ``predictor`` as a dict, and any field added later) or extra ``SimulationConfig``
    fields (see :func:`slarouter_configs`); ``alpha``, ``feedback_rate`` and ``seed`` come
    from the run. ``V`` absent or None means data-driven V. ``feedback`` (the run's
    feedback model) goes to ``SimulationConfig.feedback``: the simulator builds the same
    plan as :func:`_plan` and handles every kind (delays included) in both modes.
    """
    alpha = _check_alpha(alpha)
    X = _check_emb(data, embeddings)
    sim_cfg = slarouter_configs(alpha, feedback_rate, seed, params, feedback)
    _plan(data, seed, feedback_rate, feedback)  # same checks as the other methods
    sim = simulate(data, X, sim_cfg)
    a = sim.arrays()
    return MethodResult(name="slarouter", model=a["model"], order=a["row"], satisfied=a["satisfied"],
                        cost=np.asarray(a["cost"], np.float64), extra_cost=0.0, summary=sim.summary(),
                        explored=a["explored"], q=a["q"],
                        info={"config": sim_cfg.router.to_dict(), "final_v": float(a["v"][-1]),
                              "lcb": sim.router.certified_lower_bound()})


def check_params(method: str, params: dict[str, Any]) -> None:
    """Fail fast (ValueError) on params a method does not take, before any run starts."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: choose from {', '.join(METHODS)}")
    if "feedback" in params:
        raise ValueError(FEEDBACK_PARAM_ERROR)
    if method == "slarouter":
        slarouter_configs(0.5, 0.2, 0, params)
        return
    import inspect

    sig = inspect.signature(METHODS[method])
    named = {n for n, p in sig.parameters.items() if p.kind == p.KEYWORD_ONLY} - {"history", "feedback"}
    unknown = sorted(set(params) - named)
    if unknown:
        raise ValueError(f"bad parameters for {method}: {', '.join(unknown)} (it takes {', '.join(sorted(named)) or 'none'})")


#: every method with the common signature, by name
METHODS: dict[str, Method] = {
    "single": single,
    "random": random_router,
    "static_mixture": static_mixture,
    "oracle": clairvoyant_oracle,
    "messplus": messplus,
    "carrot": carrot,
    "causal": causal,
    "slarouter": slarouter_router,
}
#: methods that learn from the history split (their training cost is added)
OFFLINE_METHODS = frozenset({"carrot", "causal"})
#: clairvoyant references (they use stream labels or stream means; not deployable)
REFERENCE_METHODS = frozenset({"oracle", "static_mixture"})


def single_model_methods(data: RoutingData) -> dict[str, Callable[..., MethodResult]]:
    """One ``single:{model}`` method per model of ``data``."""
    return {f"single:{name}": single_model(j) for j, name in enumerate(data.models)}


def info_json(info: dict) -> str:
    """The scalar / short-list part of a result's ``info`` as JSON (arrays left out)."""
    keep = {}
    for k, v in info.items():
        if isinstance(v, np.ndarray):
            continue
        if isinstance(v, (list, tuple)) and len(v) > 32:
            continue
        keep[k] = v
    return json.dumps(keep, default=lambda o: o.item() if hasattr(o, "item") else str(o), sort_keys=True)
