"""Algorithm 1 as published: drift-plus-penalty on a virtual queue, with the predictor
trained only on the feedback of exploration steps.

The rule is written once, as two compiled step functions (:func:`paper_choice` and
:func:`queue_step`); the per-request path (``choose``/``update``) and the batched path
(``run_block``, whose kernel loops over a stretch of steps with fixed predictions) both
call them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from numba import njit

from ..feedback import NO_FEEDBACK
from ..predictor import PredictorConfig, SatisfactionPredictor
from ..validation import Instance, Range, param
from .base import DRAW_PAGE, BlockTrace, PendingFeedback, Policy, PolicyConfig, PolicyInfo, PolicyStep, int_state
from .schedule import data_driven_v, exploration_probability, v_at

_jit = njit(cache=True, nogil=True)


@_jit
def argmin_score(v, costs, q, alpha, s):
    """argmin_m V*C_m + Q*(alpha - s_m), ties to the cheaper (lower-index) model."""
    m = 0
    best = v * costs[0] + q * (alpha - s[0])
    for j in range(1, len(costs)):
        sc = v * costs[j] + q * (alpha - s[j])
        if sc < best:
            best = sc
            m = j
    return m


@_jit
def paper_choice(explore, m_explore, v, costs, q, alpha, shat):
    """Algorithm 1's choice: the drawn model when exploring, else the drift-plus-penalty argmin."""
    if explore:
        return m_explore
    return argmin_score(v, costs, q, alpha, shat)


@_jit
def queue_step(q, alpha, s):
    """Q_{t+1} = max(0, Q_t + alpha - s_t)."""
    q = q + alpha - s
    return 0.0 if q < 0.0 else q


@_jit
def _queue_kernel(q, alpha, explore, m_explore, v, costs, S, feedback,
                  out_model, out_shat, out_s, out_q):
    """The rule over a stretch of steps with fixed predictions ``S``; returns the queue."""
    n = S.shape[0]
    for i in range(n):
        m = paper_choice(explore[i], m_explore[i], v[i], costs[i], q, alpha, S[i])
        f = feedback[i, m]
        sh = S[i, m]
        s = sh if f < 0 else float(f)
        q = queue_step(q, alpha, s)
        out_model[i] = m
        out_shat[i] = sh
        out_s[i] = s
        out_q[i] = q
    return q


@dataclass(frozen=True)
class PaperConfig(PolicyConfig):
    """Algorithm 1's settings: ``c`` the exploration schedule, ``V`` the cost weight of
    the drift-plus-penalty rule (fixed when given, otherwise data-driven
    ``V = q_max * eps / DeltaC`` with DeltaC the running mean cost gap between the
    cheapest and the most expensive model, in the cost unit of the data), ``predictor``
    the satisfaction predictor's."""

    c: float = param(0.1, Range(low=0.0))
    V: float | None = param(None, Range(low=0.0, low_open=True, optional=True))
    q_max: float = param(30.0, Range(low=0.0, low_open=True))
    eps: float = param(0.001, Range(low=0.0, low_open=True))
    predictor: PredictorConfig = param(factory=PredictorConfig, check=Instance(PredictorConfig, from_dict=True))

    @property
    def data_driven_v(self) -> bool:
        return self.V is None


def predictor_streams(seed: int, n_models: int, dim: int, config: PredictorConfig
                      ) -> tuple[SatisfactionPredictor, np.random.Generator]:
    """The predictor and its replay buffer's random stream, from children 2 and 1 of the
    router's seed (child 0 is the router's step draws)."""
    predictor_ss = np.random.SeedSequence(int(seed), spawn_key=(2,))
    buffer_ss = np.random.SeedSequence(int(seed), spawn_key=(1,))
    predictor = SatisfactionPredictor(dim, n_models, config,
                                      seed=int(predictor_ss.generate_state(1, np.uint64)[0]))
    return predictor, np.random.Generator(np.random.PCG64(buffer_ss))


class PredictorPolicy(Policy):
    """What the paper and guarded policies share: a satisfaction predictor (with its
    buffer's random stream), the V schedule of the drift-plus-penalty rule, and a batched
    path."""

    BLOCK_PATH = True
    config: PaperConfig
    predictor: SatisfactionPredictor
    buffer_rng: np.random.Generator
    spread_sum: float

    @property
    def version(self) -> int:
        return self.predictor.version

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.atleast_2d(self.predictor.predict(np.asarray(X, np.float32)))

    def current_v(self, t: int) -> float:
        """V for step ``t`` from the cost gaps seen so far (or the fixed V)."""
        cfg = self.config
        return float(v_at(-1.0 if cfg.V is None else float(cfg.V), cfg.q_max, cfg.eps, self.spread_sum, t))

    def teach(self, x: np.ndarray, model: int, feedback: float) -> None:
        """One extra label for the predictor, outside the rule (the hand-feedback demo's
        "learn from every thumbs"); the queue is untouched."""
        self.predictor.add(np.asarray(x, np.float32), int(model), float(feedback))
        self.predictor.train_step(self.buffer_rng)


class PaperPolicy(PredictorPolicy):
    """State and rule of ``mode="paper"``: the queue, the cost-gap sum behind V, the
    predictor and its buffer's random stream."""

    config_cls = PaperConfig
    info = PolicyInfo(
        label="paper",
        help="Algorithm 1 as published.",
        queue_title="virtual queue Q", color="#d6402f", claims_bound=False, explored_labels_only=True)
    #: the paper's protocol: a judge verdict where the user gave none is used as a label
    JUDGE_USE = "label"

    def __init__(self, config: PaperConfig, alpha: float, n_models: int, dim: int, seed: int = 0,
                 stream_length: int | None = None):
        self.config = config
        self.alpha = float(alpha)
        self.M = int(n_models)
        self.D = int(dim)
        self.predictor, self.buffer_rng = predictor_streams(seed, self.M, self.D, config.predictor)
        self.q = 0.0
        self.spread_sum = 0.0
        self.n_feedback = 0
        self.t = 0  # the last step served (the router's counter, kept in step)
        self.pending = PendingFeedback()
        # eval-mode predictions for steps [start, start + len) under predictor version
        self._pred_cache: tuple[int, int, np.ndarray] | None = None

    # -- what the router reads ------------------------------------------------------
    learns_from_every_label = False  # the predictor learns from explored steps only

    def decision_queue(self) -> float:
        return self.q

    def lower_bound(self, t: int, z: float) -> float:
        return math.nan  # the published rule claims no bound

    def estimate(self, t: int) -> float:
        return math.nan

    # -- per request ------------------------------------------------------------------
    def choose(self, x: np.ndarray, costs: np.ndarray, t: int, u_explore: float, u_choice: float) -> PolicyStep:
        p = float(exploration_probability(t, self.config.c))
        explore = t == 1 or u_explore < p
        shat = self.predictor.predict(x)
        self.spread_sum += float(costs[-1] - costs[0])
        v = self.current_v(t)
        m = int(paper_choice(bool(explore), min(int(u_choice * self.M), self.M - 1), v, costs, self.q,
                             self.alpha, shat))
        self._pred_cache = None
        self.t = t
        return PolicyStep(t=t, model=m, explored=bool(explore), p_explore=p, shat=shat, q=self.q, v=v,
                          shat_served=float(shat[m]), blind=bool(explore))

    def update(self, step: PolicyStep, x: np.ndarray, feedback: float | None,
               judge: float | None = None) -> float:
        """The queue step with the feedback (or the prediction when there is none); the
        predictor learns from explored steps only. A judge's verdict where the user gave
        none counts as the feedback (the paper's protocol). Returns the s the queue used."""
        if feedback is None and judge is not None:
            feedback = judge
        s = float(feedback) if feedback is not None else step.shat_served
        self.q = float(queue_step(self.q, self.alpha, s))
        if feedback is not None:
            self.n_feedback += 1
            if step.explored:
                self.predictor.add(x, step.model, float(feedback))
                self.predictor.train_step(self.buffer_rng)
        else:  # only an explored step's embedding can teach the predictor later
            self.pending.add(step.t, (step.model, step.shat_served, 0.0, step.explored,
                                      np.asarray(x, np.float32) if step.explored else None))
        return s

    def late_update(self, t: int, feedback: float) -> None:
        """The published algorithm has no late feedback: the queue stays as it was; an
        explored step's label still reaches the predictor."""
        m, _, _, explored, x = self.pending.pop(t)
        self.n_feedback += 1
        if explored:
            self.predictor.add(x, m, float(feedback))
            self.predictor.train_step(self.buffer_rng)

    # -- batched ----------------------------------------------------------------------
    def run_block(self, X, costs, feedback, n: int, t0: int,
                  draws: Callable[[int, int], np.ndarray]) -> BlockTrace:
        """Serve block rows [0, n) from step ``t0``; ``draws(i0, i1)`` are the router's
        step uniforms. Predictions are computed once per stretch between two predictor
        updates (the lookahead rows beyond ``n`` reveal where a stretch ends), so any
        chunking of a stream gives the same results."""
        cfg, M = self.config, self.M
        U = draws(t0, t0 + n)
        ts = t0 + 1 + np.arange(n)
        explore = U[:, 0] < exploration_probability(ts, cfg.c)
        if t0 == 0 and n:
            explore[0] = True
        m_explore = np.minimum((U[:, 1] * M).astype(np.int64), M - 1)
        costs_n = np.asarray(costs[:n], dtype=np.float64)
        # running sums in the same order as per-request additions, so V matches choose()
        cum = np.cumsum(np.concatenate([[self.spread_sum], costs_n[:, -1] - costs_n[:, 0]]))[1:]
        v = data_driven_v(cfg.q_max, cfg.eps, cum, ts) if cfg.V is None else np.full(n, float(cfg.V))
        fb_n = np.asarray(feedback[:n])
        fb_explore = fb_n[np.arange(n), m_explore]
        train_at = np.flatnonzero(explore & (fb_explore != NO_FEEDBACK))

        model = np.empty(n, np.int64)
        shat_served = np.empty(n, np.float64)
        s_used = np.empty(n, np.float64)
        q_after = np.empty(n, np.float64)
        trained = np.zeros(n, bool)
        q = self.q
        start = 0
        for stop in [int(e) + 1 for e in train_at] + [n]:
            if stop <= start:
                continue
            S = self._segment_predictions(X, feedback, start, stop, t0, draws)
            q = _queue_kernel(q, self.alpha, explore[start:stop], m_explore[start:stop], v[start:stop],
                              costs_n[start:stop], S, fb_n[start:stop],
                              model[start:stop], shat_served[start:stop], s_used[start:stop],
                              q_after[start:stop])
            last = stop - 1
            if explore[last] and fb_explore[last] != NO_FEEDBACK:
                self.predictor.add(X[last], int(m_explore[last]), float(fb_explore[last]))
                trained[last] = self.predictor.train_step(self.buffer_rng)
            start = stop
        fb_served = fb_n[np.arange(n), model]
        self.t = t0 + n
        self.q = float(q)
        if n:
            self.spread_sum = float(cum[-1])
        self.n_feedback += int((fb_served != NO_FEEDBACK).sum())
        return BlockTrace(model=model, explored=explore, feedback=fb_served.astype(np.int8),
                          shat_served=shat_served, s_used=s_used, q=q_after, v=v, trained=trained)

    def _segment_predictions(self, X, feedback, start: int, stop: int, t0: int, draws) -> np.ndarray:
        """Predictions for block rows [start, stop), from the cache or one batch that spans
        the whole stretch until the next predictor update, so chunked callers hit the
        cache for the rest of it."""
        a = t0 + start
        version = self.predictor.version
        cache = self._pred_cache
        if cache is not None and cache[0] == version and cache[1] <= a and \
                a + (stop - start) <= cache[1] + len(cache[2]):
            off = a - cache[1]
            return cache[2][off:off + stop - start]
        end = self._next_update(feedback, stop, t0, draws)
        preds = self.predictor.predict(X[start:end])
        self._pred_cache = (version, a, preds)
        return preds[:stop - start]

    def _next_update(self, feedback, stop: int, t0: int, draws) -> int:
        """Block row after the first predictor update at or beyond ``stop - 1``."""
        total = len(feedback)
        i = stop - 1
        M = self.M
        while i < total:
            j = min(total, i + DRAW_PAGE)
            U = draws(t0 + i, t0 + j)
            ts = t0 + 1 + np.arange(i, j)
            explore = U[:, 0] < exploration_probability(ts, self.config.c)
            if t0 + i == 0:
                explore[0] = True
            m_exp = np.minimum((U[:, 1] * M).astype(np.int64), M - 1)
            fb = np.asarray(feedback[i:j])[np.arange(j - i), m_exp]
            hits = np.flatnonzero(explore & (fb != NO_FEEDBACK))
            if len(hits):
                return i + int(hits[0]) + 1
            i = j
        return total

    # -- checkpoints --------------------------------------------------------------------
    def state_dict(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta = {"q": repr(self.q), "spread_sum": repr(self.spread_sum), "t": self.t, "n_feedback": self.n_feedback,
                "buffer_rng": self.buffer_rng.bit_generator.state, "predictor": self.predictor.state_meta()}
        arrays = self.predictor.state_arrays()
        arrays.update(self.pending.to_arrays(self.D))
        return meta, arrays

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self.q = float(meta["q"])
        self.t, self.n_feedback = int(meta["t"]), int(meta["n_feedback"])
        self.spread_sum = float(meta["spread_sum"])
        self.buffer_rng.bit_generator.state = int_state(meta["buffer_rng"])
        self.predictor = SatisfactionPredictor.from_state(meta["predictor"], arrays)
        self.pending = PendingFeedback.from_arrays(arrays, self.D)
        if not (math.isfinite(self.q) and math.isfinite(self.spread_sum)):
            raise ValueError("NaN or infinite values in q or spread_sum")
