"""SLARouter (Algorithm 1): Lyapunov drift-plus-penalty routing from sparse feedback.

Online API, two calls per request::

    decision = router.decide(embedding, costs)     # which model serves it
    router.observe(decision, feedback)              # 1, 0 or None (no feedback)

``run_block`` processes many requests with the exact same semantics (and the same random
numbers) when their feedback is known in advance, as in simulation: predictions are
computed in one batch per stretch of steps during which the predictor cannot change.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np

from .policies.contextual import ContextualConfig, ContextualPolicy
from .predictor import PredictorConfig, SatisfactionPredictor

NO_FEEDBACK = -1
POLICY_PAGE = 4096
MODES = ("paper", "guarded", "contextual")
LATE_WINDOW = 100_000
#: Thompson policy: Marsaglia-Tsang proposals per gamma variate (pre-drawn per step)
TS_TRIES = 4
POLICIES = ("argmin", "mixture", "thompson")


@dataclass(frozen=True)
class RouterConfig:
    """SLARouter settings.

    ``V`` fixed when given; otherwise data-driven ``V = q_max * eps / DeltaC`` with DeltaC
    the running mean cost gap between the cheapest and the most expensive model (in the
    cost unit of the data, e.g. joules).

    ``mode="paper"`` is Algorithm 1 as published (the fields below it are ignored).
    ``mode="guarded"`` is our improved router (docs/IMPROVED.md); each change is a switch:

    * ``queue_update``: ``"dr"`` doubly-robust queue step ``shat + (s - shat) / phi_hat``
      on feedback steps (``phi_hat`` the running feedback rate), ``shat`` otherwise;
      ``"paper"``: the paper's substitution (``s`` if feedback else ``shat``).
    * ``bank_surplus``: the queue is the cumulative deficit sum(alpha - s_used), not
      truncated at 0 (a surplus earned early is kept), so the SLA is targeted on the whole
      stream's count; the decision uses ``max(0, deficit + margin)``.
    * ``margin_z``: target a lower confidence bound: margin = z * sqrt(estimated variance of
      the queue's estimate of the cumulative satisfaction).
    * ``learn_from_all``: the predictor learns from every feedback, not only exploration's.
    * ``levels``: per-model Beta posteriors of accuracy (from all feedback, corrected by the
      predictor's deviation) set the level; the predictor contributes only its centred
      per-request deviation, weighted ``text_weight``.
    * ``optimism``: upper-confidence bonus ``optimism * posterior sd`` on each model's
      estimate, so untried models get tried (0 = posterior mean).
    * ``guard_q``: escalate to the most expensive model while the decision queue exceeds
      this (None = off).
    * ``v_scale``: multiplies V (data-driven or fixed).
    * ``train_every``: a training step after every this many new labels.
    * ``prior_strength``: Beta(a, a) prior pseudo-count for each model's level.
    * ``policy``: ``"argmin"`` the drift-plus-penalty rule (with the switches above);
      ``"mixture"``: each step, the cheapest randomised mix of models (by running mean
      cost) whose pessimistic levels (mean - ``pessimism`` * sd) reach the target rate
      ``alpha + (deficit + margin) / horizon``; the most expensive model when none does;
      ``"thompson"``: posterior sampling: each step draws every model's satisfaction from
      its Beta posterior over the feedback counts (plus the predictor's centred
      deviation when ``levels``), then the argmin of ``V*C + Q*(alpha - sample)`` (with
      ``guard_q``; ``optimism`` is not used, the sampling explores). Draws come from a
      dedicated seeded stream tied to the step index (reproducible, batched == per-request).
    * ``label_fpr`` / ``label_fnr``: known error rates of the feedback source (e.g. an LLM
      judge); the queue and the levels then use the debiased label
      ``(s - fpr) / (1 - fpr - fnr)``, unbiased for the true satisfaction. 0 = trusted.
    """

    alpha: float
    c: float = 0.1
    V: float | None = None
    q_max: float = 30.0
    eps: float = 0.001
    mode: Literal["paper", "guarded", "contextual"] = "paper"
    predictor: PredictorConfig = field(default_factory=PredictorConfig)
    queue_update: Literal["dr", "paper"] = "dr"
    bank_surplus: bool = True
    margin_z: float = 3.0
    learn_from_all: bool = True
    levels: bool = True
    text_weight: float = 1.0
    optimism: float = 2.0
    guard_q: float | None = 2.0
    v_scale: float = 10.0
    train_every: int = 8
    prior_strength: float = 1.0
    policy: Literal["argmin", "mixture", "thompson"] = "argmin"
    horizon: float = 200.0
    pessimism: float = 1.0
    label_fpr: float = 0.0
    label_fnr: float = 0.0
    contextual: ContextualConfig = field(default_factory=ContextualConfig)

    def __post_init__(self) -> None:
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or \
                not (0.0 < float(self.alpha) < 1.0):
            raise ValueError(f"alpha must be a number strictly between 0 and 1, got {self.alpha!r}")
        if not (isinstance(self.c, (int, float)) and math.isfinite(self.c) and self.c >= 0):
            raise ValueError(f"c must be a finite number >= 0, got {self.c!r}")
        if self.V is not None and not (math.isfinite(self.V) and self.V > 0):
            raise ValueError(f"V must be a finite number > 0 (or None for data-driven V), got {self.V!r}")
        if self.V is None:
            for name in ("q_max", "eps"):
                v = getattr(self, name)
                if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                    raise ValueError(f"{name} must be > 0 for data-driven V, got {v!r}")
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r} (choose from {', '.join(MODES)})")
        if not isinstance(self.predictor, PredictorConfig):
            raise TypeError("predictor must be a PredictorConfig")
        if isinstance(self.contextual, dict):
            object.__setattr__(self, "contextual", ContextualConfig.from_dict(self.contextual))
        if not isinstance(self.contextual, ContextualConfig):
            raise TypeError("contextual must be a ContextualConfig")
        if self.mode != "contextual" and self.contextual != ContextualConfig():
            raise ValueError("contextual settings apply only to mode='contextual'")
        if self.queue_update not in ("dr", "paper"):
            raise ValueError(f"queue_update must be 'dr' or 'paper', got {self.queue_update!r}")
        for name in ("margin_z", "text_weight", "optimism", "pessimism"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        for name in ("label_fpr", "label_fnr"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v < 0.5:
                raise ValueError(f"{name} must be in [0, 0.5), got {v!r}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        for name in ("v_scale", "prior_strength", "horizon"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if self.guard_q is not None and (isinstance(self.guard_q, bool) or
                                         not isinstance(self.guard_q, (int, float)) or
                                         not math.isfinite(self.guard_q) or self.guard_q < 0):
            raise ValueError(f"guard_q must be a number >= 0 or None, got {self.guard_q!r}")
        if isinstance(self.train_every, bool) or int(self.train_every) != self.train_every or self.train_every < 1:
            raise ValueError(f"train_every must be a positive integer, got {self.train_every!r}")
        for name in ("bank_surplus", "learn_from_all", "levels"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False")

    @property
    def data_driven_v(self) -> bool:
        return self.V is None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["predictor"] = self.predictor.to_dict()
        d["contextual"] = self.contextual.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RouterConfig":
        d = dict(d)
        d["predictor"] = PredictorConfig(**d.get("predictor", {}))
        d["contextual"] = ContextualConfig.from_dict(d.get("contextual"))
        return cls(**d)


#: the improved mode with every switch off is not the paper; these are its ablations
GUARDED_SWITCHES: dict[str, dict] = {
    "queue_update": {"queue_update": "paper"},
    "bank_surplus": {"bank_surplus": False},
    "margin_z": {"margin_z": 0.0},
    "learn_from_all": {"learn_from_all": False},
    "levels": {"levels": False},
    "optimism": {"optimism": 0.0},
    "guard_q": {"guard_q": None},
    "v_scale": {"v_scale": 1.0},
}


@dataclass(frozen=True)
class Decision:
    """What the router chose for request ``t`` and why."""

    t: int
    model: int
    explored: bool
    p_explore: float
    shat: np.ndarray
    costs: np.ndarray
    q: float
    v: float
    alpha: float
    escalated: bool = False

    @property
    def scores(self) -> np.ndarray:
        """Per-model objective ``V*C_m + Q*(alpha - shat_m)``; exploitation takes the argmin."""
        return self.v * self.costs + self.q * (self.alpha - self.shat)

    @property
    def cost_terms(self) -> np.ndarray:
        return self.v * self.costs

    @property
    def queue_terms(self) -> np.ndarray:
        return self.q * (self.alpha - self.shat)


@dataclass
class BlockTrace:
    """Per-step arrays for a block of requests (see :func:`simulator.Trace`)."""

    model: np.ndarray
    explored: np.ndarray
    feedback: np.ndarray
    shat_served: np.ndarray
    s_used: np.ndarray
    q: np.ndarray
    v: np.ndarray
    trained: np.ndarray


@dataclass
class GuardedState:
    """Guarded mode's running statistics (all O(M) numbers)."""

    deficit: float
    var_sum: float
    r2sum: float
    r2n: int
    pending: int
    lpos: np.ndarray
    lcnt: np.ndarray
    psum: np.ndarray
    last_dev: np.ndarray
    last_shat: np.ndarray
    csum: np.ndarray

    @classmethod
    def empty(cls, M: int) -> "GuardedState":
        return cls(0.0, 0.0, 0.0, 0, 0, np.zeros(M), np.zeros(M), np.zeros(M), np.zeros(M), np.zeros(M),
                   np.zeros(M))

    def to_meta(self) -> dict:
        return {"deficit": repr(self.deficit), "var_sum": repr(self.var_sum), "r2sum": repr(self.r2sum),
                "r2n": self.r2n, "pending": self.pending,
                **{k: [repr(float(v)) for v in getattr(self, k)]
                   for k in ("lpos", "lcnt", "psum", "last_dev", "last_shat", "csum")}}

    @classmethod
    def from_meta(cls, d: dict) -> "GuardedState":
        arr = {k: np.array([float(v) for v in d[k]])
               for k in ("lpos", "lcnt", "psum", "last_dev", "last_shat", "csum")}
        return cls(float(d["deficit"]), float(d["var_sum"]), float(d["r2sum"]), int(d["r2n"]),
                   int(d["pending"]), **arr)


def exploration_probability(t: np.ndarray | int, c: float) -> np.ndarray | float:
    """p_t = min(1, c / t^(1/4))."""
    return np.minimum(1.0, c / np.power(np.asarray(t, dtype=np.float64), 0.25))


class SLARouter:
    """Stateful router. Seeded; the same seed and inputs give the same decisions."""

    def __init__(self, config: RouterConfig, n_models: int, dim: int, seed: int = 0):
        if n_models < 2:
            raise ValueError("routing needs at least two models")
        self.config = config
        self.n_models = int(n_models)
        self.dim = int(dim)
        self.seed = int(seed)
        ss = np.random.SeedSequence(self.seed)
        policy_ss, buffer_ss, predictor_ss = ss.spawn(3)
        self.policy_rng = np.random.Generator(np.random.PCG64(policy_ss))
        self.buffer_rng = np.random.Generator(np.random.PCG64(buffer_ss))
        self.predictor = SatisfactionPredictor(dim, n_models, config.predictor,
                                               seed=int(predictor_ss.generate_state(1, np.uint64)[0]))
        self.t = 0
        self.q = 0.0
        self.spread_sum = 0.0
        self.n_feedback = 0
        self._pending: tuple[Decision, np.ndarray] | None = None
        # policy uniforms (explore, choice) for steps [_draws_start, _draws_start + len)
        self._draws_start = 0
        self._draws = np.zeros((0, 2))
        # eval-mode predictions for steps [start, start + len) under predictor version
        self._pred_cache: tuple[int, int, np.ndarray] | None = None
        self.g = GuardedState.empty(self.n_models) if config.mode == "guarded" else None
        # contextual mode: a policy plug-in (slarouter_core/policies) owns the rule and state
        self.policy = (ContextualPolicy(config.contextual, config.alpha, self.n_models, self.dim,
                                        seed=int(np.random.SeedSequence(self.seed, spawn_key=(4,)).generate_state(1)[0]))
                       if config.mode == "contextual" else None)
        self._policy_step = None
        # Thompson policy: a dedicated stream (the 4th child of the seed; the other three
        # streams are unchanged), pre-drawn per step like the policy uniforms
        self.ts_rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(self.seed, spawn_key=(3,))))
        self._ts_start = 0
        self._ts = np.zeros((0, 2 * self.n_models, 2 * TS_TRIES + 1))
        # guarded mode: steps served without feedback, for feedback that arrives late
        # (an OrderedDict: dropping the oldest entry is O(1); a dict rescans deleted slots)
        self._late: OrderedDict[int, tuple] = OrderedDict()

    # -- helpers ----------------------------------------------------------------------
    def current_v(self) -> float:
        """V for the latest decision (data-driven: from the cost gaps seen so far)."""
        return self._v_for(self.spread_sum, self.t)

    def _v_for(self, spread_sum: float, t: int) -> float:
        cfg = self.config
        if cfg.V is not None:
            return float(cfg.V)
        if t == 0 or spread_sum <= 0:
            return float(cfg.q_max * cfg.eps)
        return float(cfg.q_max * cfg.eps / (spread_sum / t))

    def _policy_draws(self, i0: int, i1: int) -> np.ndarray:
        """Uniform pairs for 0-based steps [i0, i1), drawn in fixed pages of POLICY_PAGE.

        Draws are tied to the step index, so any chunking of the stream (and the
        per-request API) sees the same numbers.
        """
        if i0 < self._draws_start:
            raise RuntimeError("policy draws for past steps are gone")
        while self._draws_start + len(self._draws) < i1:
            keep_from = max(0, min(self.t, self._draws_start + len(self._draws)) - self._draws_start)
            self._draws_start += keep_from
            self._draws = np.concatenate([self._draws[keep_from:], self.policy_rng.random((POLICY_PAGE, 2))])
        return self._draws[i0 - self._draws_start:i1 - self._draws_start]

    def _ts_draws(self, i0: int, i1: int) -> np.ndarray:
        """Thompson policy: per 0-based step in [i0, i1), for each model's two gamma
        variates (A then B), TS_TRIES standard normals then TS_TRIES + 1 uniforms; drawn
        in fixed pages tied to the step index, like :meth:`_policy_draws`."""
        if i0 < self._ts_start:
            raise RuntimeError("Thompson draws for past steps are gone")
        K, M2 = TS_TRIES, 2 * self.n_models
        while self._ts_start + len(self._ts) < i1:
            keep_from = max(0, min(self.t, self._ts_start + len(self._ts)) - self._ts_start)
            self._ts_start += keep_from
            z = self.ts_rng.standard_normal((POLICY_PAGE, M2, K))
            u = self.ts_rng.random((POLICY_PAGE, M2, K + 1))
            self._ts = np.concatenate([self._ts[keep_from:], np.concatenate([z, u], axis=2)])
        return self._ts[i0 - self._ts_start:i1 - self._ts_start]

    def _check_costs(self, costs: np.ndarray) -> np.ndarray:
        c = np.asarray(costs, dtype=np.float64)
        if c.shape != (self.n_models,):
            raise ValueError(f"costs must have one value per model ({self.n_models}), got shape {c.shape}")
        if not np.all(np.isfinite(c)) or np.any(c < 0):
            raise ValueError("costs must be finite and >= 0")
        return c

    def certified_lower_bound(self, z: float = 1.2816) -> float:
        """The router's own one-sided (default 90%) lower confidence bound on the satisfied
        share of the requests served so far, from its doubly-robust estimate; NaN in paper
        mode, which claims no bound. The contextual policy uses its configured ``z``."""
        if self.t == 0:
            return math.nan
        if self.policy is not None:
            return self.policy.lower_bound()
        if self.g is not None and self.config.queue_update == "dr":
            served = self.config.alpha * self.t - self.g.deficit
            return (served - z * math.sqrt(self.g.var_sum)) / self.t
        return math.nan

    def predict_satisfaction(self, x: np.ndarray) -> np.ndarray:
        """Per-model satisfaction the current mode's model predicts for one request."""
        if self.policy is not None:
            return self.policy.predict(x)[0]
        return self.predictor.predict(np.asarray(x, np.float32))

    @property
    def model_version(self) -> int:
        """Bumped whenever the satisfaction model changes (a training step or a refit)."""
        return self.policy.version if self.policy is not None else self.predictor.version

    # -- online API -------------------------------------------------------------------
    def decide(self, embedding: np.ndarray, costs: np.ndarray) -> Decision:
        """Choose a model for the next request (Algorithm 1, lines 3-17)."""
        if self._pending is not None:
            raise RuntimeError("observe() the previous decision (feedback or None) before deciding again")
        x = np.asarray(embedding, dtype=np.float32)
        if x.shape != (self.dim,):
            raise ValueError(f"embedding must have shape ({self.dim},), got {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"embedding has {int(np.sum(~np.isfinite(x)))} NaN or infinite value(s): "
                             "refusing it (one would poison the satisfaction predictor)")
        c = self._check_costs(costs)
        t = self.t + 1
        u_explore, u_choice = self._policy_draws(t - 1, t)[0]
        self._pred_cache = None
        if self.policy is not None:
            step = self.policy.choose(x, c, t, float(u_explore), float(u_choice))
            decision = Decision(t=t, model=step.model, explored=step.explored, p_explore=step.p_explore,
                                shat=step.shat, costs=c, q=step.q, v=step.v, alpha=self.config.alpha)
            self._policy_step = step
            self._pending = (decision, x)
            return decision
        if self.g is not None:
            decision = self._g_decide(t, c, self.predictor.predict(x), u_explore, u_choice)
            self._pending = (decision, x)
            return decision
        p = float(exploration_probability(t, self.config.c))
        explore = t == 1 or u_explore < p
        shat = self.predictor.predict(x)
        self.spread_sum += float(c[-1] - c[0])
        v = self._v_for(self.spread_sum, t)
        if explore:
            m = min(int(u_choice * self.n_models), self.n_models - 1)
        else:
            m = int(np.argmin(v * c + self.q * (self.config.alpha - shat)))
        decision = Decision(t=t, model=m, explored=bool(explore), p_explore=p, shat=shat,
                            costs=c, q=self.q, v=v, alpha=self.config.alpha)
        self._pending = (decision, x)
        return decision

    def observe(self, decision: Decision, feedback: int | float | None) -> None:
        """Feed back the user's verdict on the served response (None: no feedback)."""
        if self._pending is None or self._pending[0] is not decision:
            raise RuntimeError("observe() must be called once, for the latest decision")
        if feedback is not None and feedback not in (0, 1, True, False):
            raise ValueError(f"feedback must be 1, 0 or None, got {feedback!r}")
        _, x = self._pending
        m = decision.model
        if self.policy is not None:
            self.last_s_used = self.policy.update(self._policy_step, x, None if feedback is None else float(feedback))
            if feedback is not None:
                self.n_feedback += 1
            self.policy.trim_pending(LATE_WINDOW)
            self.t = decision.t
            self._pending = None
            return
        if self.g is not None:
            self._g_observe(decision.t, m, decision.explored, float(decision.shat[m]),
                            float(self.g.last_dev[m]), x, None if feedback is None else float(feedback))
            self.t = decision.t
            self._pending = None
            return
        s = float(feedback) if feedback is not None else float(decision.shat[m])
        self.q = max(0.0, self.q + self.config.alpha - s)
        if feedback is not None:
            self.n_feedback += 1
            if decision.explored:
                self.predictor.add(x, m, float(feedback))
                self.predictor.train_step(self.buffer_rng)
        self.t = decision.t
        self._pending = None

    # -- fast path for simulation -----------------------------------------------------
    def run_block(self, X: np.ndarray, costs: np.ndarray, feedback: np.ndarray,
                  n: int | None = None) -> BlockTrace:
        """Serve the first ``n`` (default all) of the given upcoming requests.

        ``feedback[i, m]`` is what the user of request i says if model m serves it: 1, 0,
        or ``NO_FEEDBACK`` (-1), known in advance as in simulation. Rows beyond ``n`` are
        lookahead: predictions are computed once per stretch between two predictor
        updates, so serving a stream in chunks gives bit-identical results to serving it
        at once when the caller passes the rest of the stream each time. Same results as
        ``decide``/``observe`` per request (up to float rounding of batched predictions).
        """
        if self._pending is not None:
            raise RuntimeError("observe() the pending decision first")
        total = len(X)
        n = total if n is None else int(n)
        M = self.n_models
        if not 0 <= n <= total:
            raise ValueError(f"n must be in [0, {total}]")
        x_shape = tuple(X.shape) if hasattr(X, "shape") else np.shape(X)  # a lazy row view keeps its rows
        if x_shape != (total, self.dim) or np.shape(costs) != (total, M) or np.shape(feedback) != (total, M):
            raise ValueError("X, costs and feedback must have shapes (n, D), (n, M), (n, M)")
        if self.policy is not None:
            return self._policy_run_block(X, costs, feedback, n)
        if self.g is not None:
            return self._g_run_block(X, costs, feedback, n)
        cfg = self.config
        t0 = self.t
        U = self._policy_draws(t0, t0 + n)
        ts = t0 + 1 + np.arange(n)
        explore = U[:, 0] < exploration_probability(ts, cfg.c)
        if t0 == 0 and n:
            explore[0] = True
        m_explore = np.minimum((U[:, 1] * M).astype(np.int64), M - 1)
        costs_n = np.asarray(costs[:n], dtype=np.float64)
        spreads = costs_n[:, -1] - costs_n[:, 0]
        # running sums in the same order as per-request additions, so V matches decide()
        cum = np.cumsum(np.concatenate([[self.spread_sum], spreads]))[1:]
        if cfg.V is None:
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.where(cum > 0, cfg.q_max * cfg.eps / (cum / ts), cfg.q_max * cfg.eps)
        else:
            v = np.full(n, float(cfg.V))
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
        stops = [int(e) + 1 for e in train_at] + [n]
        for stop in stops:
            if stop <= start:
                continue
            S = self._segment_predictions(X, costs, feedback, start, stop)
            q = _queue_kernel(q, cfg.alpha, explore[start:stop], m_explore[start:stop], v[start:stop],
                              costs_n[start:stop], S, fb_n[start:stop],
                              model[start:stop], shat_served[start:stop], s_used[start:stop],
                              q_after[start:stop])
            last = stop - 1
            if explore[last] and fb_explore[last] != NO_FEEDBACK:
                self.predictor.add(X[last], int(m_explore[last]), float(fb_explore[last]))
                trained[last] = self.predictor.train_step(self.buffer_rng)
            start = stop
        fb_served = fb_n[np.arange(n), model]
        self.q = q
        self.t = t0 + n
        if n:
            self.spread_sum = float(cum[-1])
        self.n_feedback += int((fb_served != NO_FEEDBACK).sum())
        return BlockTrace(model=model, explored=explore, feedback=fb_served.astype(np.int8),
                          shat_served=shat_served, s_used=s_used, q=q_after, v=v, trained=trained)

    def _policy_run_block(self, X, costs, feedback, n: int) -> BlockTrace:
        """A policy plug-in's batched path: the per-request rule itself, so whole, chunked
        and per-request runs are identical by construction. The trace's ``q`` is the
        policy's ``decision_queue()`` (contextual: its certified shortfall), while each
        ``Decision.q`` is the price its scores use."""
        fb = np.asarray(feedback[:n])
        out = {k: np.zeros(n, dt) for k, dt in (("model", np.int64), ("explored", bool), ("feedback", np.int8),
                                                 ("shat_served", np.float64), ("s_used", np.float64),
                                                 ("q", np.float64), ("v", np.float64), ("trained", bool))}
        for i in range(n):
            version = self.policy.version
            d = self.decide(X[i], costs[i])
            f = int(fb[i, d.model])
            self.observe(d, None if f == NO_FEEDBACK else f)
            out["model"][i] = d.model
            out["explored"][i] = d.explored
            out["feedback"][i] = f
            out["shat_served"][i] = d.shat[d.model]
            out["s_used"][i] = self.last_s_used
            out["q"][i] = self.policy.decision_queue()
            out["v"][i] = d.v
            out["trained"][i] = self.policy.version != version
        return BlockTrace(**out)

    def _segment_predictions(self, X, costs, feedback, start: int, stop: int) -> np.ndarray:
        """Predictions for block rows [start, stop), from the cache or one batch.

        A fresh batch spans the whole stretch until the next predictor update that the
        lookahead rows reveal, so chunked callers hit the cache for the rest of it.
        """
        a = self.t + start
        version = self.predictor.version
        cache = self._pred_cache
        if cache is not None and cache[0] == version and cache[1] <= a and \
                a + (stop - start) <= cache[1] + len(cache[2]):
            off = a - cache[1]
            return cache[2][off:off + stop - start]
        end = self._next_update(X, feedback, stop)
        preds = self.predictor.predict(X[start:end])
        self._pred_cache = (version, a, preds)
        return preds[:stop - start]

    def _next_update(self, X, feedback, stop: int) -> int:
        """Block row after the first predictor update at or beyond ``stop - 1``."""
        total = len(X)
        i = stop - 1
        M = self.n_models
        while i < total:
            j = min(total, i + POLICY_PAGE)
            U = self._policy_draws(self.t + i, self.t + j)
            ts = self.t + 1 + np.arange(i, j)
            explore = U[:, 0] < exploration_probability(ts, self.config.c)
            if self.t + i == 0:
                explore[0] = True
            m_exp = np.minimum((U[:, 1] * M).astype(np.int64), M - 1)
            fb = np.asarray(feedback[i:j])[np.arange(j - i), m_exp]
            hits = np.flatnonzero(explore & (fb != NO_FEEDBACK))
            if len(hits):
                return i + int(hits[0]) + 1
            i = j
        return total


    # -- guarded mode (docs/IMPROVED.md) ----------------------------------------------
    def decision_queue(self) -> float:
        """The queue the next decision uses: guarded mode's max(0, base + margin), the
        contextual policy's certified shortfall, or paper mode's Q."""
        if self.policy is not None:
            return self.policy.decision_queue()
        if self.g is None:
            return self.q
        g, cfg = self.g, self.config
        base = g.deficit if cfg.bank_surplus else self.q
        return max(0.0, base + cfg.margin_z * math.sqrt(g.var_sum))

    def _g_decide(self, t: int, c: np.ndarray, P: np.ndarray, u_explore: float, u_choice: float) -> Decision:
        cfg, g, M = self.config, self.g, self.n_models
        p = float(exploration_probability(t, cfg.c))
        explore = t == 1 or u_explore < p
        self.spread_sum += float(c[-1] - c[0])
        v = self._v_for(self.spread_sum, t) * cfg.v_scale
        P = np.asarray(P, np.float64)
        g.psum += P
        a0 = cfg.prior_strength
        if cfg.levels:
            dev = P - g.psum / t
            A = a0 + g.lpos
            B = a0 + g.lcnt - g.lpos
            theta = A / (A + B)
            shat = np.clip(theta + cfg.text_weight * dev, 1e-3, 1 - 1e-3)
            sd = np.sqrt(theta * (1 - theta) / (A + B + 1))
        else:
            dev = np.zeros(M)
            shat = P
            sd = np.sqrt(P * (1 - P) / (g.lcnt + 2 * a0 + 1))
        est = np.minimum(1.0, shat + cfg.optimism * sd)
        qd = self.decision_queue()
        escalated = False
        g.csum += c
        if explore:
            m = min(int(u_choice * M), M - 1)
        elif cfg.policy == "mixture":
            A = a0 + g.lpos
            B = a0 + g.lcnt - g.lpos
            th = A / (A + B)
            lcb = th - cfg.pessimism * np.sqrt(th * (1 - th) / (A + B + 1))
            base = g.deficit if cfg.bank_surplus else self.q
            target = cfg.alpha + (base + cfg.margin_z * math.sqrt(g.var_sum)) / cfg.horizon
            m, escalated = _mixture_choice(g.csum / t, lcb, target, float(u_choice))
            est = lcb
        else:
            if cfg.policy == "thompson":  # posterior samples replace the optimistic levels
                D = np.ascontiguousarray(self._ts_draws(t - 1, t)[0])
                est = np.empty(M)
                _thompson_levels(g.lpos, g.lcnt, P, dev, a0, cfg.text_weight, cfg.levels, D, est)
            m = int(np.argmin(v * c + qd * (cfg.alpha - est)))
            if cfg.guard_q is not None and qd > cfg.guard_q and m != M - 1:
                m, escalated = M - 1, True
        g.last_dev = dev
        g.last_shat = shat
        return Decision(t=t, model=m, explored=bool(explore), p_explore=p, shat=est, costs=c,
                        q=qd, v=v, alpha=cfg.alpha, escalated=escalated)

    def _g_observe(self, t: int, m: int, explored: bool, est_m: float, dev_m: float,
                   x: np.ndarray, f: float | None) -> float:
        """Queue and learning update for step t; returns the s used in the queue."""
        cfg, g = self.config, self.g
        shat_m = float(g.last_shat[m])
        phi = (self.n_feedback + 1.0) / (t + 1.0)
        f_raw = f
        if f is not None:
            f = self._debias(f)
        if cfg.queue_update == "dr":
            s = shat_m + ((f - shat_m) / phi if f is not None else 0.0)
        else:
            s = f if f is not None else shat_m
        g.deficit += cfg.alpha - s
        self.q = max(0.0, self.q + cfg.alpha - s)
        r2 = (g.r2sum + 0.25) / (g.r2n + 1.0)
        g.var_sum += r2 * (1.0 - phi) / (phi if cfg.queue_update == "dr" else 1.0)
        if f is None:
            self._late[t] = (m, shat_m, dev_m, bool(explored), x)
            if len(self._late) > LATE_WINDOW:
                self._late.popitem(last=False)
        else:
            self._g_absorb(m, shat_m, dev_m, bool(explored), x, f_raw)
        return s

    def _debias(self, f: float) -> float:
        cfg = self.config
        if cfg.label_fpr == 0.0 and cfg.label_fnr == 0.0:
            return f
        return (f - cfg.label_fpr) / (1.0 - cfg.label_fpr - cfg.label_fnr)

    def _g_absorb(self, m: int, shat_m: float, dev_m: float, explored: bool, x: np.ndarray, f: float) -> bool:
        cfg, g = self.config, self.g
        self.n_feedback += 1
        fd = self._debias(f)
        g.r2sum += (fd - shat_m) ** 2
        g.r2n += 1
        g.lcnt[m] += 1
        g.lpos[m] += min(1.0, max(0.0, fd - cfg.text_weight * dev_m))
        if cfg.learn_from_all or explored:
            self.predictor.add(x, m, f)
            g.pending += 1
            if g.pending >= cfg.train_every:
                g.pending = 0
                return self.predictor.train_step(self.buffer_rng)
        return False

    def late_feedback(self, t: int, feedback: int | float) -> None:
        """Feedback that arrives after step ``t`` was observed without any.

        Guarded mode applies the queue's correction now and learns from it; paper mode (the
        published algorithm has no notion of late feedback) adds it to the predictor's data
        if step t explored, and leaves the queue as it was.
        """
        if feedback not in (0, 1, True, False):
            raise ValueError(f"feedback must be 1 or 0, got {feedback!r}")
        if self.policy is not None:
            self.policy.late_update(int(t), float(feedback))
            self.n_feedback += 1
            return
        rec = self._late.pop(int(t), None)
        if rec is None:
            raise KeyError(f"no step {t} awaiting feedback (already given, or too old)")
        m, shat_m, dev_m, explored, x = rec
        f = float(feedback)
        if self.g is not None:
            if self.config.queue_update == "dr":
                phi = (self.n_feedback + 1.0) / (self.t + 1.0)
                self.g.deficit -= (self._debias(f) - shat_m) / phi
            self._g_absorb(m, shat_m, dev_m, explored, x, f)
        else:
            self.n_feedback += 1
            if explored:
                self.predictor.add(x, m, f)
                self.predictor.train_step(self.buffer_rng)

    def remember_for_late(self, decision: "Decision", x: np.ndarray) -> None:
        """Paper mode: keep step ``decision.t`` so that :meth:`late_feedback` can use it
        (policy plug-ins keep their own pending steps: nothing to do)."""
        if self.policy is not None:
            return
        self._late[decision.t] = (decision.model, float(decision.shat[decision.model]), 0.0,
                                  decision.explored, np.asarray(x, np.float32))
        if len(self._late) > LATE_WINDOW:
            self._late.popitem(last=False)

    def _g_run_block(self, X, costs, feedback, n) -> BlockTrace:
        """Guarded mode's batched path: a compiled kernel runs the per-request rule over
        stretches in which the predictor cannot change (between two training steps, and
        within one prediction window); Python only feeds the predictor in between."""
        cfg, g, M = self.config, self.g, self.n_models
        t0 = self.t
        U = np.ascontiguousarray(self._policy_draws(t0, t0 + n))
        fb_n = np.ascontiguousarray(np.asarray(feedback[:n]), dtype=np.int8)
        costs_n = np.ascontiguousarray(np.asarray(costs[:n], np.float64))
        out_m = np.empty(n, np.int64)
        out_f = np.zeros((n, 5))  # explored, shat served, s used, q after, v
        out_dev = np.zeros(n)
        learn = np.zeros(n, bool)
        trained = np.zeros(n, bool)
        st = np.array([self.spread_sum, g.deficit, g.var_sum, g.r2sum, g.r2n, self.q,
                       self.n_feedback, g.pending], np.float64)
        params = np.array([cfg.alpha, cfg.c, -1.0 if cfg.V is None else cfg.V, cfg.q_max, cfg.eps,
                           cfg.v_scale, cfg.text_weight, cfg.optimism, cfg.margin_z,
                           -1.0 if cfg.guard_q is None else cfg.guard_q, cfg.prior_strength,
                           cfg.horizon, cfg.pessimism, cfg.label_fpr, cfg.label_fnr, cfg.train_every], np.float64)
        flags = np.array([cfg.levels, cfg.bank_surplus, cfg.queue_update == "dr", cfg.learn_from_all,
                          cfg.policy == "mixture", cfg.policy == "thompson"], np.bool_)
        TS = (np.ascontiguousarray(self._ts_draws(t0, t0 + n)) if cfg.policy == "thompson"
              else np.zeros((1, 1, 1)))
        last_dev = g.last_dev.copy()
        last_shat = g.last_shat.copy()
        i = 0
        while i < n:
            P, p_start = self._g_window(X, i, t0)
            stop = min(n, p_start + len(P))
            j, due = _guarded_kernel(i, stop, t0, P, p_start, costs_n, fb_n, U, st, g.lpos, g.lcnt, g.psum,
                                     g.csum, last_dev, last_shat, params, flags,
                                     out_m, out_f, out_dev, learn, TS)
            for k in np.flatnonzero(learn[i:j]) + i:
                self.predictor.add(X[k], int(out_m[k]), float(fb_n[k, out_m[k]]))
            if due:
                trained[j - 1] = self.predictor.train_step(self.buffer_rng)
            i = j
        (self.spread_sum, g.deficit, g.var_sum, g.r2sum, r2n, self.q, nfb, pending) = st.tolist()
        g.r2n, self.n_feedback, g.pending = int(r2n), int(nfb), int(pending)
        g.last_dev, g.last_shat = last_dev, last_shat
        self.t = t0 + n
        fb_served = fb_n[np.arange(n), out_m] if n else np.zeros(0, np.int8)
        # steps without feedback stay open for late feedback, as in observe()
        none = np.flatnonzero(fb_served == NO_FEEDBACK)
        self._late.update(zip((t0 + none + 1).tolist(),
                              zip(out_m[none].tolist(), out_f[none, 1].tolist(), out_dev[none].tolist(),
                                  out_f[none, 0].astype(bool).tolist(), (X[k] for k in none))))
        while len(self._late) > LATE_WINDOW:
            self._late.popitem(last=False)
        return BlockTrace(model=out_m, explored=out_f[:, 0].astype(bool), feedback=fb_served.astype(np.int8),
                          shat_served=out_f[:, 1].copy(), s_used=out_f[:, 2].copy(), q=out_f[:, 3].copy(),
                          v=out_f[:, 4].copy(), trained=trained)

    def _g_window(self, X, i: int, t0: int) -> tuple[np.ndarray, int]:
        """Predictions from block row i to the end of its window (aligned to absolute
        steps, so any chunking computes the same batches); cached per predictor version."""
        a = t0 + i
        version = self.predictor.version
        cache = self._pred_cache
        if cache is None or cache[0] != version or not (cache[1] <= a < cache[1] + len(cache[2])):
            w = POLICY_PAGE // 16
            stop = min(len(X), i + ((a // w + 1) * w - a))
            self._pred_cache = cache = (version, a, self.predictor.predict(X[i:stop]))
        off = a - cache[1]
        return cache[2][off:], i

    # -- checkpoints ------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Full state to one safetensors file (tensors + JSON metadata); no pickle."""
        from safetensors.numpy import save_file

        if self._pending is not None:
            raise RuntimeError("observe() the pending decision before saving")
        meta = {
            "format": "slarouter-router-v1",
            "config": self.config.to_dict(),
            "n_models": self.n_models, "dim": self.dim, "seed": self.seed,
            "t": self.t, "q": repr(self.q), "spread_sum": repr(self.spread_sum),
            "n_feedback": self.n_feedback,
            "policy_rng": self.policy_rng.bit_generator.state,
            "draws_start": self._draws_start,
            "buffer_rng": self.buffer_rng.bit_generator.state,
            "predictor": self.predictor.state_meta(),
        }
        if self.g is not None:
            meta["guarded"] = self.g.to_meta()
        policy_arrays: dict[str, np.ndarray] = {}
        if self.policy is not None:
            meta["contextual"], policy_arrays = self.policy.state_dict()
        if self.config.policy == "thompson":
            meta["ts_rng"] = self.ts_rng.bit_generator.state
            meta["ts_start"] = self._ts_start
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        arrays = self.predictor.state_arrays()
        arrays["router.policy_draws"] = np.ascontiguousarray(self._draws)
        arrays.update(policy_arrays)
        if self.config.policy == "thompson":
            arrays["router.ts_draws"] = np.ascontiguousarray(self._ts)
        arrays.update(_late_arrays(self._late, self.dim))
        save_file(arrays, str(p),
                  metadata={"slarouter": json.dumps(meta, default=_json_default)})
        return p

    @classmethod
    def load(cls, path: str | Path) -> "SLARouter":
        from safetensors import safe_open
        from safetensors.numpy import load_file

        p = Path(path)
        try:
            with safe_open(str(p), framework="numpy") as fh:
                raw = (fh.metadata() or {}).get("slarouter")
            tensors = load_file(str(p))
            meta = json.loads(raw) if raw else None
        except Exception as exc:  # safetensors raises its own error types
            raise ValueError(f"{p.name} is not a SLARouter checkpoint ({type(exc).__name__}: {str(exc)[:200]})") from None
        if not isinstance(meta, dict) or meta.get("format") != "slarouter-router-v1":
            raise ValueError(f"{p.name} is not a SLARouter checkpoint (missing metadata)")
        try:
            router = cls(RouterConfig.from_dict(meta["config"]), meta["n_models"], meta["dim"], meta["seed"])
            router.t = int(meta["t"])
            router.q = float(meta["q"])
            router.spread_sum = float(meta["spread_sum"])
            router.n_feedback = int(meta["n_feedback"])
            router.policy_rng.bit_generator.state = _int_state(meta["policy_rng"])
            router._draws_start = int(meta["draws_start"])
            router._draws = np.array(tensors["router.policy_draws"], np.float64).reshape(-1, 2)
            router.buffer_rng.bit_generator.state = _int_state(meta["buffer_rng"])
            router.predictor = SatisfactionPredictor.from_state(meta["predictor"], tensors)
            if router.g is not None:
                router.g = GuardedState.from_meta(meta["guarded"])
            if router.policy is not None:
                router.policy.load_state(meta["contextual"], tensors)
            if "ts_rng" in meta:
                router.ts_rng.bit_generator.state = _int_state(meta["ts_rng"])
                router._ts_start = int(meta["ts_start"])
                router._ts = np.array(tensors["router.ts_draws"], np.float64).reshape(
                    -1, 2 * router.n_models, 2 * TS_TRIES + 1)
            if "router.late_t" in tensors:
                router._late = _late_from_arrays(tensors, router.dim)
            _check_finite_state(router, tensors)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{p.name}: corrupt SLARouter checkpoint ({exc})") from None
        return router


def _late_arrays(late: "OrderedDict[int, tuple]", dim: int) -> dict[str, np.ndarray]:
    """Steps still open for late feedback, as arrays in their order (oldest first)."""
    recs = list(late.items())
    return {"router.late_t": np.array([t for t, _ in recs], np.int64),
            "router.late_m": np.array([r[0] for _, r in recs], np.int64),
            "router.late_shat_dev": np.array([(r[1], r[2]) for _, r in recs], np.float64).reshape(-1, 2),
            "router.late_explored": np.array([r[3] for _, r in recs], np.uint8),
            "router.late_x": (np.stack([np.asarray(r[4], np.float32) for _, r in recs]) if recs
                              else np.zeros((0, dim), np.float32))}


def _late_from_arrays(tensors: dict, dim: int) -> "OrderedDict[int, tuple]":
    t = np.asarray(tensors["router.late_t"], np.int64)
    m = np.asarray(tensors["router.late_m"], np.int64)
    sd = np.asarray(tensors["router.late_shat_dev"], np.float64).reshape(-1, 2)
    ex = np.asarray(tensors["router.late_explored"]).astype(bool)
    x = np.asarray(tensors["router.late_x"], np.float32).reshape(-1, dim)
    if not (len(t) == len(m) == len(sd) == len(ex) == len(x)):
        raise ValueError("pending late-feedback arrays disagree in length")
    return OrderedDict((int(t[i]), (int(m[i]), float(sd[i, 0]), float(sd[i, 1]), bool(ex[i]), x[i]))
                       for i in range(len(t)))


def _check_finite_state(router: "SLARouter", tensors: dict) -> None:
    """A checkpoint whose numbers are NaN or infinite would route nonsense: refuse it."""
    bad = [k for k in ("q", "spread_sum") if not math.isfinite(getattr(router, k))]
    if router.g is not None:
        g = router.g
        bad += [f"guarded.{k}" for k in ("deficit", "var_sum", "r2sum") if not math.isfinite(getattr(g, k))]
        bad += [f"guarded.{k}" for k in ("lpos", "lcnt", "psum", "last_dev", "last_shat", "csum")
                if not np.all(np.isfinite(getattr(g, k)))]
    bad += [k for k, v in tensors.items() if k.startswith(("predictor.", "router."))
            and np.asarray(v).dtype.kind == "f" and not np.all(np.isfinite(v))]
    if bad:
        raise ValueError(f"NaN or infinite values in {', '.join(sorted(bad))}")


def _mixture_choice(cost: np.ndarray, level: np.ndarray, target: float, u: float) -> tuple[int, bool]:
    """Cheapest randomised mix of at most two models whose levels reach ``target``;
    ``u`` a uniform draw picks the model. Returns (model, escalated): escalated when no
    mix reaches the target and the priciest model is served (the guard's assumption)."""
    M = len(cost)
    best, pick = math.inf, -1
    for i in range(M):
        if level[i] >= target and cost[i] < best:
            best, pick = cost[i], i
    lo_hi = None
    for i in range(M):
        for j in range(M):
            if level[i] < target <= level[j] and cost[i] < cost[j]:
                w = (target - level[i]) / (level[j] - level[i])
                mix = cost[i] + w * (cost[j] - cost[i])
                if mix < best:
                    best, lo_hi = mix, (i, j, w)
    if lo_hi is not None:
        i, j, w = lo_hi
        return (j if u < w else i), False
    if pick >= 0:
        return pick, False
    return int(np.argmax(cost)), True


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    raise TypeError(type(o).__name__)


def _int_state(state: dict) -> dict:
    """JSON round-trips PCG64 state ints exactly; only nested dicts need copying."""
    return {k: (_int_state(v) if isinstance(v, dict) else v) for k, v in state.items()}


def _argmin_score(v, costs, q, alpha, s):
    """argmin_m V*C_m + Q*(alpha - s_m), ties to the cheaper (lower-index) model."""
    m = 0
    best = v * costs[0] + q * (alpha - s[0])
    for j in range(1, len(costs)):
        sc = v * costs[j] + q * (alpha - s[j])
        if sc < best:
            best = sc
            m = j
    return m


def _queue_kernel(q, alpha, explore, m_explore, v, costs, S, feedback,
                  out_model, out_shat, out_s, out_q):
    """The sequential part of Algorithm 1 over a stretch with fixed predictions.

    Compiled with numba when it is installed (plain Python otherwise, same results).
    """
    n, M = S.shape
    for i in range(n):
        if explore[i]:
            m = m_explore[i]
        else:
            m = _argmin_score(v[i], costs[i], q, alpha, S[i])
        f = feedback[i, m]
        sh = S[i, m]
        s = sh if f < 0 else float(f)
        q = q + alpha - s
        if q < 0.0:
            q = 0.0
        out_model[i] = m
        out_shat[i] = sh
        out_s[i] = s
        out_q[i] = q
    return q


try:  # pragma: no cover - exercised whenever numba is installed
    from numba import njit

    _argmin_score = njit(cache=True, nogil=True)(_argmin_score)
    _queue_kernel = njit(cache=True, nogil=True)(_queue_kernel)
except ImportError:  # pragma: no cover
    pass


def _guarded_kernel(i0, i1, t0, P, p0, costs, fb, U, st, lpos, lcnt, psum, csum, last_dev, last_shat,
                    params, flags, out_m, out_f, out_dev, learn, TS):
    """Guarded mode's rule for block rows [i0, i1) with fixed predictions ``P`` (row i is
    ``P[i - p0]``); the same arithmetic as ``SLARouter._g_decide``/``_g_observe``.

    Stops after a step whose label completes ``train_every`` new labels; returns
    (next row, training due). Compiled with numba when installed.
    """
    alpha, c, V, q_max, eps, v_scale, w, kappa, z, guard, a0, horizon, pess, fpr, fnr, every = params
    levels, bank, dr, learn_all, mixture, thompson = flags
    M = P.shape[1]
    shat = np.empty(M)
    est = np.empty(M)
    dev = np.empty(M)
    cm = np.empty(M)
    lv = np.empty(M)
    for i in range(i0, i1):
        t = t0 + i + 1
        p = min(1.0, c / (float(t) ** 0.25))
        explore = t == 1 or U[i, 0] < p
        st[0] += costs[i, M - 1] - costs[i, 0]
        if V > 0:
            v = V
        elif st[0] <= 0:
            v = q_max * eps
        else:
            v = q_max * eps / (st[0] / t)
        v = v * v_scale
        for j in range(M):
            pj = P[i - p0, j]
            psum[j] += pj
            csum[j] += costs[i, j]
            if levels:
                A = a0 + lpos[j]
                B = a0 + lcnt[j] - lpos[j]
                th = A / (A + B)
                dev[j] = pj - psum[j] / t
                sh = th + w * dev[j]
                sh = min(max(sh, 1e-3), 1 - 1e-3)
                sd = np.sqrt(th * (1 - th) / (A + B + 1))
            else:
                dev[j] = 0.0
                sh = pj
                sd = np.sqrt(pj * (1 - pj) / (lcnt[j] + 2 * a0 + 1))
            shat[j] = sh
            est[j] = min(1.0, sh + kappa * sd)
        base = st[1] if bank else st[5]
        qd = max(0.0, base + z * np.sqrt(st[2]))
        if explore:
            m = min(int(U[i, 1] * M), M - 1)
        elif mixture:
            for j in range(M):
                A = a0 + lpos[j]
                B = a0 + lcnt[j] - lpos[j]
                th = A / (A + B)
                lv[j] = th - pess * np.sqrt(th * (1 - th) / (A + B + 1))
                cm[j] = csum[j] / t
            target = alpha + (base + z * np.sqrt(st[2])) / horizon
            m = _mixture_pick(cm, lv, target, U[i, 1])
        else:
            if thompson:  # posterior samples replace the optimistic levels
                _thompson_levels(lpos, lcnt, P[i - p0], dev, a0, w, levels, TS[i], lv)
                m = _argmin_score(v, costs[i], qd, alpha, lv)
            else:
                m = _argmin_score(v, costs[i], qd, alpha, est)
            if guard >= 0 and qd > guard and m != M - 1:
                m = M - 1
        for j in range(M):
            last_dev[j] = dev[j]
            last_shat[j] = shat[j]
        f = fb[i, m]
        shat_m = shat[m]
        phi = (st[6] + 1.0) / (t + 1.0)
        if f >= 0:
            fd = float(f)
            if fpr != 0.0 or fnr != 0.0:
                fd = (fd - fpr) / (1.0 - fpr - fnr)
            s = shat_m + (fd - shat_m) / phi if dr else fd
        else:
            fd = 0.0
            s = shat_m
        st[1] += alpha - s
        st[5] = max(0.0, st[5] + alpha - s)
        r2 = (st[3] + 0.25) / (st[4] + 1.0)
        st[2] += r2 * (1.0 - phi) / (phi if dr else 1.0)
        out_m[i] = m
        out_f[i, 0] = 1.0 if explore else 0.0
        out_f[i, 1] = shat_m
        out_f[i, 2] = s
        out_f[i, 4] = v
        out_dev[i] = dev[m]
        due = False
        if f >= 0:
            st[6] += 1.0
            st[3] += (fd - shat_m) ** 2
            st[4] += 1.0
            lcnt[m] += 1.0
            lpos[m] += min(1.0, max(0.0, fd - w * dev[m]))
            if learn_all or explore:
                learn[i] = True
                st[7] += 1.0
                if st[7] >= every:
                    st[7] = 0.0
                    due = True
        base = st[1] if bank else st[5]
        out_f[i, 3] = max(0.0, base + z * np.sqrt(st[2]))
        if due:
            return i + 1, True
    return i1, False


def _gamma_variate(a, D, row):
    """Gamma(a, 1) by Marsaglia-Tsang from pre-drawn numbers ``D[row]`` (TS_TRIES
    normals, then TS_TRIES + 1 uniforms; the last boosts a < 1). If every proposal is
    rejected (probability < 1e-5 per variate for a >= 1) the last proposal is kept."""
    K = (D.shape[1] - 1) // 2
    boost = 1.0
    if a < 1.0:
        boost = D[row, 2 * K] ** (1.0 / a)
        a = a + 1.0
    d = a - 1.0 / 3.0
    cc = 1.0 / np.sqrt(9.0 * d)
    g = d
    for k in range(K):
        z = D[row, k]
        v = 1.0 + cc * z
        if v <= 0.0:
            continue
        v = v * v * v
        g = d * v
        u = D[row, K + k]
        z2 = z * z
        if u < 1.0 - 0.0331 * z2 * z2:
            break
        if u > 0.0 and np.log(u) < 0.5 * z2 + d * (1.0 - v + np.log(v)):
            break
    return g * boost


def _thompson_levels(lpos, lcnt, P, dev, a0, w, levels, D, out):
    """One posterior sample per model: Beta(a0 + positives, a0 + negatives) (shifted by
    the predictor's centred deviation ``w * dev`` when ``levels``); without ``levels``
    the Beta has the predictor's mean and ``lcnt + 2 a0`` pseudo-counts."""
    M = lpos.shape[0]
    for j in range(M):
        if levels:
            A = a0 + lpos[j]
            B = a0 + lcnt[j] - lpos[j]
        else:
            pj = min(max(P[j], 1e-3), 1.0 - 1e-3)
            n = lcnt[j] + 2.0 * a0
            A = pj * n
            B = (1.0 - pj) * n
        ga = _gamma_variate(A, D, 2 * j)
        gb = _gamma_variate(B, D, 2 * j + 1)
        th = ga / (ga + gb) if ga + gb > 0.0 else A / (A + B)
        if levels:
            th = th + w * dev[j]
        out[j] = min(max(th, 1e-3), 1.0 - 1e-3)


def _mixture_pick(cost, level, target, u):
    """numba twin of :func:`_mixture_choice` (model only)."""
    M = cost.shape[0]
    best = np.inf
    pick = -1
    for i in range(M):
        if level[i] >= target and cost[i] < best:
            best = cost[i]
            pick = i
    lo = -1
    hi = -1
    wbest = 0.0
    for i in range(M):
        for j in range(M):
            if level[i] < target <= level[j] and cost[i] < cost[j]:
                wv = (target - level[i]) / (level[j] - level[i])
                mix = cost[i] + wv * (cost[j] - cost[i])
                if mix < best:
                    best = mix
                    lo = i
                    hi = j
                    wbest = wv
    if lo >= 0:
        return hi if u < wbest else lo
    if pick >= 0:
        return pick
    top = 0
    for i in range(1, M):
        if cost[i] > cost[top]:
            top = i
    return top


try:  # pragma: no cover - exercised whenever numba is installed
    from numba import njit as _njit

    _mixture_pick = _njit(cache=True, nogil=True)(_mixture_pick)
    _gamma_variate = _njit(cache=True, nogil=True)(_gamma_variate)
    _thompson_levels = _njit(cache=True, nogil=True)(_thompson_levels)
    _guarded_kernel = _njit(cache=True, nogil=True)(_guarded_kernel)
except ImportError:  # pragma: no cover
    pass
