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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np

from .predictor import PredictorConfig, SatisfactionPredictor

NO_FEEDBACK = -1
POLICY_PAGE = 4096


@dataclass(frozen=True)
class RouterConfig:
    """SLARouter settings.

    ``V`` fixed when given; otherwise data-driven ``V = q_max * eps / DeltaC`` with DeltaC
    the running mean cost gap between the cheapest and the most expensive model (in the
    cost unit of the data, e.g. joules).
    """

    alpha: float
    c: float = 0.1
    V: float | None = None
    q_max: float = 30.0
    eps: float = 0.001
    mode: Literal["paper"] = "paper"
    predictor: PredictorConfig = field(default_factory=PredictorConfig)

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
        if self.mode != "paper":
            raise ValueError(f"unknown mode {self.mode!r}")
        if not isinstance(self.predictor, PredictorConfig):
            raise TypeError("predictor must be a PredictorConfig")

    @property
    def data_driven_v(self) -> bool:
        return self.V is None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["predictor"] = self.predictor.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RouterConfig":
        d = dict(d)
        d["predictor"] = PredictorConfig(**d.get("predictor", {}))
        return cls(**d)


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

    def _check_costs(self, costs: np.ndarray) -> np.ndarray:
        c = np.asarray(costs, dtype=np.float64)
        if c.shape != (self.n_models,):
            raise ValueError(f"costs must have one value per model ({self.n_models}), got shape {c.shape}")
        if not np.all(np.isfinite(c)) or np.any(c < 0):
            raise ValueError("costs must be finite and >= 0")
        return c

    # -- online API -------------------------------------------------------------------
    def decide(self, embedding: np.ndarray, costs: np.ndarray) -> Decision:
        """Choose a model for the next request (Algorithm 1, lines 3-17)."""
        if self._pending is not None:
            raise RuntimeError("observe() the previous decision (feedback or None) before deciding again")
        x = np.asarray(embedding, dtype=np.float32)
        if x.shape != (self.dim,):
            raise ValueError(f"embedding must have shape ({self.dim},), got {x.shape}")
        c = self._check_costs(costs)
        t = self.t + 1
        u_explore, u_choice = self._policy_draws(t - 1, t)[0]
        self._pred_cache = None
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
        if np.shape(X) != (total, self.dim) or np.shape(costs) != (total, M) or np.shape(feedback) != (total, M):
            raise ValueError("X, costs and feedback must have shapes (n, D), (n, M), (n, M)")
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
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        arrays = self.predictor.state_arrays()
        arrays["router.policy_draws"] = np.ascontiguousarray(self._draws)
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
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{p.name}: corrupt SLARouter checkpoint ({exc})") from None
        return router


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    raise TypeError(type(o).__name__)


def _int_state(state: dict) -> dict:
    """JSON round-trips PCG64 state ints exactly; only nested dicts need copying."""
    return {k: (_int_state(v) if isinstance(v, dict) else v) for k, v in state.items()}


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
            m = 0
            best = v[i] * costs[i, 0] + q * (alpha - S[i, 0])
            for j in range(1, M):
                sc = v[i] * costs[i, j] + q * (alpha - S[i, j])
                if sc < best:
                    best = sc
                    m = j
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

    _queue_kernel = njit(cache=True, nogil=True)(_queue_kernel)
except ImportError:  # pragma: no cover
    pass
