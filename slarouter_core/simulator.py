"""Seeded stream simulation of a router on logged data (Algorithm 1 semantics).

Each run shuffles the requests with its seed and draws, per request, whether the user
gives feedback (IID with rate ``feedback_rate`` by default; ``SimulationConfig.feedback``
selects another model from :mod:`slarouter_core.feedback`: bursty, negativity-biased,
delayed, workload drift, or labels from a simulated LLM judge). The logged label of the served model is
revealed only when feedback arrives. :class:`Simulation` advances N requests at a time
(the dashboard streams from it); stepping in any chunk sizes gives the same numbers as
one full run, because every random draw is tied to the request, not to the chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from threadpoolctl import ThreadpoolController

from .data import RoutingData
from .feedback import (NO_FEEDBACK, FeedbackConfig, FeedbackPlan, VerdictsInFlight, drift_order,
                       make_plan)
from .metrics import Summary, summarize
from .router import RouterConfig, SLARouter
from .serving import serve_stream
from .validation import Bool, Checked, Instance, Int, param

PAPER_SEEDS = (42, 1, 1234)
#: share of requests that give feedback when a run does not say (the paper's protocol)
DEFAULT_FEEDBACK_RATE = 0.2

_BLAS = ThreadpoolController()


def single_threaded_blas():
    """BLAS limited to one thread for the simulator's small matrix products.

    The products are small (mini-batches of 16, prediction chunks of 1,024 rows), so a
    second thread gains little on an idle machine, while on a busy one (several dashboard
    sessions, parallel experiment workers) OpenBLAS threads that spin-wait for each
    other made a run 3 to 13 times slower in our measurements.
    """
    return _BLAS.limit(limits=1, user_api="blas")


@dataclass(frozen=True)
class SimulationConfig(Checked):
    router: RouterConfig = param(check=Instance(RouterConfig))
    feedback_rate: float = DEFAULT_FEEDBACK_RATE  # checked by the feedback model (FeedbackConfig.check_rate)
    seed: int = param(42, Int(low=0))
    shuffle: bool = param(True, Bool())
    feedback: FeedbackConfig = param(FeedbackConfig(), Instance(FeedbackConfig))

    def __post_init__(self) -> None:
        super().__post_init__()
        self.feedback.check_rate(self.feedback_rate)

    def to_dict(self) -> dict:
        return {"router": self.router.to_dict(), "feedback_rate": self.feedback_rate,
                "seed": int(self.seed), "shuffle": self.shuffle, "feedback": self.feedback.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> "SimulationConfig":
        return cls(router=RouterConfig.from_dict(d["router"]),
                   feedback_rate=d.get("feedback_rate", DEFAULT_FEEDBACK_RATE), seed=d.get("seed", 42),
                   shuffle=d.get("shuffle", True),
                   feedback=FeedbackConfig.from_dict(d.get("feedback")))


def stream_plan(n: int, labels: np.ndarray, feedback_rate: float, seed: int,
                shuffle: bool = True, feedback: FeedbackConfig | None = None,
                groups: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Request order, would-be feedback matrix (n, M) and the router's seed for a run.

    ``feedback`` (default: IID, today's draws exactly) picks the feedback model; ``groups``
    (each row's benchmark) is needed only for workload drift. Delays of a ``delayed``
    model are in :func:`stream_plan_full`.
    """
    order, plan, router_seed = stream_plan_full(n, labels, feedback_rate, seed, shuffle, feedback, groups)
    return order, plan.feedback, router_seed


def stream_plan_full(n: int, labels: np.ndarray, feedback_rate: float, seed: int,
                     shuffle: bool = True, feedback: FeedbackConfig | None = None,
                     groups: np.ndarray | None = None):
    """Like :func:`stream_plan`, with the full :class:`~slarouter_core.feedback.FeedbackPlan`."""
    fcfg = feedback if feedback is not None else FeedbackConfig()
    order_ss, feedback_ss, router_ss = np.random.SeedSequence(int(seed)).spawn(3)
    order = np.random.Generator(np.random.PCG64(order_ss)).permutation(n) if shuffle else np.arange(n)
    if fcfg.kind == "drift":
        if groups is None:
            raise ValueError("workload drift needs each request's benchmark (groups)")
        order = drift_order(order, np.asarray(groups), fcfg.drift_mix, int(seed))
    gives = np.random.Generator(np.random.PCG64(feedback_ss)).random(n) < feedback_rate
    if fcfg.is_default:
        plan = FeedbackPlan(np.where(gives[:, None], labels[order], NO_FEEDBACK).astype(np.int8), None)
    else:
        plan = make_plan(labels[order], gives, float(feedback_rate), int(seed), fcfg)
    return order, plan, int(router_ss.generate_state(1, np.uint32)[0])


class StreamRows:
    """Rows ``base[index]`` without copying them: the stream in serving order.

    A run used to gather ``embeddings[order]`` up front, a second copy of the largest
    array (1.5 GB at 1M requests of width 384). This view gathers only the rows a step
    asks for; slicing stays lazy, and NumPy sees an array through ``__array__``.
    """

    def __init__(self, base: np.ndarray, index: np.ndarray):
        self.base = base
        self.index = np.asarray(index, np.int64)

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.index), self.base.shape[1])

    @property
    def dtype(self):
        return self.base.dtype

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return StreamRows(self.base, self.index[key])
        if isinstance(key, (int, np.integer)):
            return self.base[self.index[key]]
        return self.base[self.index[key]]

    def __array__(self, dtype=None, copy=None):
        out = self.base[self.index]
        return out if dtype is None else out.astype(dtype, copy=False)


class Simulation:
    """A resumable run: ``step(n)`` serves the next n requests of the seeded stream."""

    def __init__(self, data: RoutingData, embeddings: np.ndarray, config: SimulationConfig):
        emb = np.asarray(embeddings, dtype=np.float32)
        if emb.ndim != 2 or emb.shape[0] != data.n_requests:
            raise ValueError(f"embeddings must be (n_requests={data.n_requests}, D), got {emb.shape}")
        self.data = data
        self.config = config
        self.embeddings = emb
        self.order, plan, router_seed = stream_plan_full(
            data.n_requests, data.solved, config.feedback_rate, config.seed, config.shuffle,
            config.feedback, data.benchmarks if config.feedback.kind == "drift" else None)
        self.delay = plan.delay
        self._in_flight = VerdictsInFlight()
        self.router = SLARouter(config.router, data.n_models, emb.shape[1], seed=router_seed,
                                stream_length=data.n_requests)
        # the judge's verdicts as this router would ask for them, once for the whole stream
        self.feedback_plan = self.router.judge_codes(plan.feedback) if config.feedback.judge_fill else plan.feedback
        # the stream in serving order, as a view (no copy); each step passes the rest as lookahead
        self._stream_x = StreamRows(emb, self.order)
        self._stream_costs = np.ascontiguousarray(data.costs[self.order])
        n = data.n_requests
        self._model = np.zeros(n, np.int64)
        self._explored = np.zeros(n, bool)
        self._feedback = np.full(n, NO_FEEDBACK, np.int8)
        self._shat = np.zeros(n, np.float64)
        self._s_used = np.zeros(n, np.float64)
        self._q = np.zeros(n, np.float64)
        self._v = np.zeros(n, np.float64)
        self.t = 0

    @property
    def n_requests(self) -> int:
        return self.data.n_requests

    @property
    def done(self) -> bool:
        return self.t >= self.n_requests

    def step(self, n: int) -> int:
        """Serve up to ``n`` more requests; returns how many were served."""
        if n < 0:
            raise ValueError("n must be >= 0")
        a, b = self.t, min(self.t + int(n), self.n_requests)
        if b <= a:
            return 0
        with single_threaded_blas():
            bt = serve_stream(self.router, self._stream_x, self._stream_costs, self.feedback_plan, a, b,
                              self.delay, self._in_flight)
        self._model[a:b] = bt.model
        self._explored[a:b] = bt.explored
        self._feedback[a:b] = bt.feedback
        self._shat[a:b] = bt.shat_served
        self._s_used[a:b] = bt.s_used
        self._q[a:b] = bt.q
        self._v[a:b] = bt.v
        self.t = b
        return b - a

    def run(self) -> "Simulation":
        self.step(self.n_requests - self.t)
        return self

    # -- results ----------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        """Per-step trace arrays of the requests served so far."""
        k = self.t
        rows = self.order[:k]
        model = self._model[:k]
        return {
            "t": np.arange(1, k + 1),
            "row": rows,
            "model": model,
            "explored": self._explored[:k],
            "feedback": self._feedback[:k],
            "shat_served": self._shat[:k],
            "s_used": self._s_used[:k],
            "satisfied": self.data.solved[rows, model].astype(np.int8),
            "cost": self.data.costs[rows, model],
            "q": self._q[:k],
            "v": self._v[:k],
        }

    def trace(self) -> pd.DataFrame:
        """The trace as a table with model names, doc ids and benchmarks."""
        a = self.arrays()
        frame = self.data.frame
        out = pd.DataFrame(a)
        out.insert(2, "doc_id", frame["doc_id"].to_numpy()[a["row"]])
        out.insert(3, "benchmark", frame["benchmark"].to_numpy()[a["row"]])
        out["model"] = np.asarray(self.data.models, dtype=object)[a["model"]]
        return out

    def summary(self) -> Summary:
        a = self.arrays()
        return summarize(a["model"], a["satisfied"], a["cost"], a["q"], self.config.router.alpha,
                         self.data.models, self.data.cost_unit, a["explored"], a["feedback"], a["v"])

    def single_model_cumulative_cost(self) -> np.ndarray:
        """(t, M) cumulative cost had every request so far gone to one model."""
        return np.cumsum(self.data.costs[self.order[:self.t]], axis=0)


def simulate(data: RoutingData, embeddings: np.ndarray, config: SimulationConfig) -> Simulation:
    """Run a whole stream and return the finished simulation."""
    return Simulation(data, embeddings, config).run()
