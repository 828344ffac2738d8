"""What every baseline shares: the history split, the result type, input checks, the
common stream and the seed tags.

One place for the stream plan and the seed tags, so that every method serves the same
order with the same verdicts and no two methods draw from the same random stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import simulator
from ..data import RoutingData
from ..feedback import FeedbackConfig, FeedbackPlan
from ..metrics import Summary, summarize
from ..validation import Choice, check_alpha  # noqa: F401 - the baselines check alpha as the router does

#: tolerance used when deciding whether a fraction / LP variable is non-zero
FRACTION_TOL = 1e-9
#: CARROT's mu grid and (by default) Causal's lambda grid: 0, 0.05, ..., 1
TRADEOFF_GRID = tuple(round(0.05 * i, 2) for i in range(21))

#: the offline methods' ``budget`` param: their training labels matched to the stream's
#: feedback budget, or the whole history
BUDGETS = Choice(("matched", "full"))

# seed-sequence tags: every random draw of a method derives from (seed, tag); kept
# together so that a new tag cannot collide with another method's
TAG_SPLIT, TAG_RANDOM, TAG_MIXTURE, TAG_CARROT, TAG_CAUSAL = 11, 1, 2, 3, 4
#: tags of the offline methods' feedback draws (judge labels, the Causal log's feedback)
TAG_CARROT_JUDGE, TAG_CAUSAL_LOG, TAG_BUDGET = 31, 32, 33


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


def check_embeddings(data: RoutingData, embeddings: np.ndarray, what: str = "embeddings") -> np.ndarray:
    X = np.asarray(embeddings, np.float32)
    if X.ndim != 2 or X.shape[0] != data.n_requests:
        raise ValueError(f"{what} must be (n_requests={data.n_requests}, D), got {X.shape}")
    return X


def feedback_or_default(feedback: FeedbackConfig | None) -> FeedbackConfig:
    """The run's feedback model; None means IID (today's draws)."""
    if feedback is None:
        return FeedbackConfig()
    if not isinstance(feedback, FeedbackConfig):
        raise TypeError(f"feedback must be a FeedbackConfig or None, got {type(feedback).__name__}")
    return feedback


def common_stream(data: RoutingData, seed: int, feedback_rate: float, feedback: FeedbackConfig | None = None
                  ) -> tuple[np.ndarray, FeedbackPlan, int]:
    """The common stream: order, :class:`FeedbackPlan` (verdicts, delays) and a method seed.

    Every method calls this with the run's seed, rate and feedback model, so all of them
    serve the same order (workload drift reorders it) and see the same verdicts. The plan
    comes from the simulator's own builder (looked up at call time), the one SLARouter's
    simulation uses.
    """
    fcfg = feedback_or_default(feedback)
    rate = fcfg.check_rate(float(feedback_rate) if isinstance(feedback_rate, np.floating) else feedback_rate)
    if data.n_requests == 0:
        raise ValueError("the stream is empty: nothing to route")
    groups = data.benchmarks if fcfg.kind == "drift" else None
    return simulator.stream_plan_full(data.n_requests, data.solved, rate, int(seed), True,
                                      fcfg, groups)


def tagged_rng(seed: int, tag: int) -> np.random.Generator:
    """The generator for (seed, tag): one independent stream per method and purpose."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), int(tag)])))


def method_result(name: str, data: RoutingData, alpha: float, order: np.ndarray, model: np.ndarray,
                  charged: np.ndarray | None = None, extra_cost: float = 0.0,
                  explored: np.ndarray | None = None, q: np.ndarray | None = None,
                  feedback: np.ndarray | None = None, v: np.ndarray | None = None,
                  info: dict | None = None) -> MethodResult:
    """A :class:`MethodResult` with its summary; ``charged`` defaults to the served model's cost."""
    model = np.asarray(model, np.int64)
    satisfied = data.solved[order, model].astype(np.int8)
    cost = data.costs[order, model].astype(np.float64) if charged is None else np.asarray(charged, np.float64)
    q_arr = np.zeros(len(model)) if q is None else q
    summary = summarize(model, satisfied, cost, q_arr, alpha, data.models, data.cost_unit,
                        explored, feedback, v)
    return MethodResult(name=name, model=model, order=order, satisfied=satisfied, cost=cost,
                        extra_cost=float(extra_cost), summary=summary, explored=explored, q=q,
                        info=info or {})


def require_history(history: History | None, method: str, width: int) -> History:
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


def closest_to_alpha(values: np.ndarray, alpha: float, costs: np.ndarray) -> int:
    """Index of the value closest to alpha; ties to the lower cost, then the first.

    How the offline methods pick their trade-off (CARROT's mu, Causal's lambda)."""
    gap = np.round(np.abs(np.asarray(values) - alpha), 12)
    cands = np.flatnonzero(gap == gap.min())
    return int(cands[np.argmin(np.asarray(costs)[cands])])


def split_history(data: RoutingData, embeddings: np.ndarray, seed: int,
                  history_fraction: float = 0.2) -> tuple[RoutingData, np.ndarray, History]:
    """Seeded split of ``data`` into ``(stream, stream_embeddings, history)``.

    ``round(history_fraction * N)`` rows, drawn by a permutation seeded with
    ``(seed, 11)``, form the history; the rest, in their original order, is the stream
    (which ``stream_plan`` then shuffles with ``seed``). Fraction 0 gives an empty history.
    """
    X = check_embeddings(data, embeddings)
    f = float(history_fraction)
    if not 0.0 <= f < 1.0:
        raise ValueError(f"history_fraction must be in [0, 1), got {history_fraction!r}")
    n = data.n_requests
    k = int(round(f * n))
    if n - k < 1:
        raise ValueError(f"history_fraction {f} leaves no request for the stream ({n} rows)")
    perm = tagged_rng(seed, TAG_SPLIT).permutation(n)
    hist = np.zeros(n, bool)
    hist[perm[:k]] = True
    stream = data._subset(~hist)
    return stream, X[~hist], History(data._subset(hist), X[hist])
