"""The ``guarded`` mode (docs/IMPROVED.md): Algorithm 1 with a doubly-robust queue that
banks surplus and targets a lower confidence bound, per-model Beta levels learned from
all feedback, optimism, and a guard that escalates to the priciest model.

The rule is written once, as compiled step functions on named records
(:mod:`.guarded_rule`). The per-request path calls them one step at a time; the batched
kernel loops over them for a stretch of steps with fixed predictions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..feedback import NO_FEEDBACK
from ..predictor import SatisfactionPredictor
from ..validation import Bool, Choice, Int, Range, param
from .base import DRAW_PAGE, BlockTrace, PendingFeedback, PolicyInfo, PolicyStep, StepDraws, int_state
from .guarded_rule import (ARRAYS, STATE, TS_TRIES, _guarded_kernel, decision_queue_of, guarded_choose,
                           guarded_late, guarded_update, params_record)
from .paper import PaperConfig, PredictorPolicy, predictor_streams

POLICIES = ("argmin", "mixture", "thompson")


@dataclass(frozen=True)
class GuardedConfig(PaperConfig):
    """The guarded mode's settings: Algorithm 1's (:class:`PaperConfig`: ``c``, the V
    schedule, the predictor) and its own; each change to Algorithm 1 is a switch:

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

    queue_update: str = param("dr", Choice(("dr", "paper")))
    bank_surplus: bool = param(True, Bool())
    margin_z: float = param(3.0, Range(low=0.0))
    learn_from_all: bool = param(True, Bool())
    levels: bool = param(True, Bool())
    text_weight: float = param(1.0, Range(low=0.0))
    optimism: float = param(2.0, Range(low=0.0))
    guard_q: float | None = param(2.0, Range(low=0.0, optional=True))
    v_scale: float = param(10.0, Range(low=0.0, low_open=True))
    train_every: int = param(8, Int(low=1))
    prior_strength: float = param(1.0, Range(low=0.0, low_open=True))
    policy: str = param("argmin", Choice(POLICIES))
    horizon: float = param(200.0, Range(low=0.0, low_open=True))
    pessimism: float = param(1.0, Range(low=0.0))
    label_fpr: float = param(0.0, Range(low=0.0, high=0.5, high_open=True))
    label_fnr: float = param(0.0, Range(low=0.0, high=0.5, high_open=True))


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

def _thompson_page(M: int) -> Callable[[np.random.Generator, int], np.ndarray]:
    """Per step, for each model's two gamma variates (A then B), TS_TRIES standard
    normals then TS_TRIES + 1 uniforms."""
    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        z = rng.standard_normal((n, 2 * M, TS_TRIES))
        u = rng.random((n, 2 * M, TS_TRIES + 1))
        return np.concatenate([z, u], axis=2)
    return draw


class _StateField:
    """One scalar of the compiled rule's state record, read (and written) as an attribute."""

    def __init__(self, cast: Callable[[Any], Any], doc: str = "", read_only: bool = False):
        self.cast, self.__doc__, self.read_only = cast, doc, read_only

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self if obj is None else self.cast(obj.st[0][self.name])

    def __set__(self, obj: Any, value: Any) -> None:
        if self.read_only:
            raise AttributeError(f"{self.name} is read-only")
        obj.st[0][self.name] = value


class GuardedPolicy(PredictorPolicy):
    """State of ``mode="guarded"``: the named scalar record, per-model level arrays, the
    predictor, its buffer's stream, and (policy ``thompson``) the posterior draws.
    ``current_v`` is V before ``v_scale`` (the sidebar's V); decisions use ``v_scale``
    times it."""

    config_cls = GuardedConfig
    info = PolicyInfo(
        compare_by_default=True,
        label="guarded",
        help="text-blind, holds the SLA by escalating to the priciest model (its V is v_scale times the V "
             "of the paper's rule).",
        queue_title="decision queue (Q plus its margin)", color="#e8900c",
        v_note="guarded mode multiplies V by its v_scale ({scale:g}), so it shows {scale:g} times the V of "
               "the settings",
        v_scale_field="v_scale")
    #: its certificate counts thumbs only (a biased judge would bias it)
    JUDGE_USE = "ignore"

    def __init__(self, config: GuardedConfig, alpha: float, n_models: int, dim: int, seed: int = 0,
                 stream_length: int | None = None):
        self.config = self.g = config
        self.alpha = float(alpha)
        self.M = int(n_models)
        self.D = int(dim)
        self.predictor, self.buffer_rng = predictor_streams(seed, self.M, self.D, config.predictor)
        # Thompson draws: the 4th child of the seed (the other streams are unchanged)
        ts_rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed), spawn_key=(3,))))
        self.par = params_record(self.alpha, config)
        self.st = np.zeros(1, STATE)
        for k in ARRAYS:
            setattr(self, k, np.zeros(self.M))
        self.ts_draws = StepDraws(ts_rng, _thompson_page(self.M), (2 * self.M, 2 * TS_TRIES + 1))
        self.pending = PendingFeedback()
        self.t = 0
        self._pred_cache: tuple[int, int, np.ndarray] | None = None
        self._no_draws = np.zeros((1, 1))

    # -- what the router reads ------------------------------------------------------
    q = _StateField(float, "The truncated queue max(0, Q + alpha - s) (decisions use it without banking).")
    n_feedback = _StateField(int)
    spread_sum = _StateField(float)
    deficit = _StateField(float, "sum(alpha - s_used): the banked queue (negative when ahead of alpha).")
    var_sum = _StateField(float, read_only=True)

    @property
    def learns_from_every_label(self) -> bool:
        return bool(self.g.learn_from_all)

    def decision_queue(self) -> float:
        return float(decision_queue_of(self.st[0], self.par[0]))

    def estimate(self, t: int) -> float:
        """The doubly-robust estimate of the satisfied share so far (NaN without it)."""
        if t == 0 or self.g.queue_update != "dr":
            return math.nan
        return (self.alpha * t - float(self.st[0]["deficit"])) / t

    def lower_bound(self, t: int, z: float) -> float:
        if t == 0 or self.g.queue_update != "dr":
            return math.nan
        return (self.alpha * t - float(self.st[0]["deficit"]) - z * math.sqrt(float(self.st[0]["var_sum"]))) / t

    # -- per request ------------------------------------------------------------------
    def choose(self, x: np.ndarray, costs: np.ndarray, t: int, u_explore: float, u_choice: float) -> PolicyStep:
        M = self.M
        P = np.asarray(self.predictor.predict(x), np.float64)
        D = (np.ascontiguousarray(self.ts_draws.get(t - 1, t, self.t)[0]) if self.g.policy == "thompson"
             else self._no_draws)
        dev, shat, est, lv, cm = (np.empty(M) for _ in range(5))
        m, explore, p, v, qd, escalated = guarded_choose(
            t, float(u_explore), float(u_choice), P, np.ascontiguousarray(costs, np.float64), self.st[0],
            self.par[0], self.lpos, self.lcnt, self.psum, self.csum, dev, shat, est, lv, cm, D)
        self.last_dev, self.last_shat = dev, shat
        self.t = t
        self._pred_cache = None
        return PolicyStep(t=t, model=int(m), explored=bool(explore), p_explore=float(p), shat=est, q=float(qd),
                          v=float(v), shat_served=float(shat[m]), blind=bool(explore), escalated=bool(escalated))

    def update(self, step: PolicyStep, x: np.ndarray, feedback: float | None,
               judge: float | None = None) -> float:
        """``judge`` is not used (JUDGE_USE ``"ignore"``)."""
        m = step.model
        dev_m = float(self.last_dev[m])
        f = -1.0 if feedback is None else float(feedback)
        s_used, learn, due = guarded_update(step.t, m, step.explored, f, step.shat_served, dev_m, self.st[0],
                                            self.par[0], self.lpos, self.lcnt)
        if feedback is None:
            self.pending.add(step.t, (m, step.shat_served, dev_m, step.explored, np.asarray(x, np.float32)))
        else:
            self._learn(x, m, float(feedback), learn, due)
        return float(s_used)

    def late_update(self, t: int, feedback: float) -> None:
        m, shat_m, dev_m, explored, x = self.pending.pop(t)
        learn, due = guarded_late(self.t, float(max(self.t - int(t), 0)), float(feedback), shat_m, dev_m, m, explored,
                                  self.st[0], self.par[0], self.lpos, self.lcnt)
        self._learn(x, m, float(feedback), learn, due)

    def _learn(self, x, m: int, f: float, learn: bool, due: bool) -> bool:
        if learn:
            self.predictor.add(x, m, f)
        if due:
            return self.predictor.train_step(self.buffer_rng)
        return False

    # -- batched ----------------------------------------------------------------------
    def run_block(self, X, costs, feedback, n: int, t0: int,
                  draws: Callable[[int, int], np.ndarray]) -> BlockTrace:
        """The kernel runs the rule over stretches in which the predictor cannot change
        (between two training steps, and within one prediction window); Python only feeds
        the predictor in between."""
        U = np.ascontiguousarray(draws(t0, t0 + n))
        fb_n = np.ascontiguousarray(np.asarray(feedback[:n]), dtype=np.int8)
        costs_n = np.ascontiguousarray(np.asarray(costs[:n], np.float64))
        out_m = np.empty(n, np.int64)
        out_f = np.zeros((n, 5))  # explored, shat served, s used, decision queue after, v
        out_dev = np.zeros(n)
        learn = np.zeros(n, bool)
        trained = np.zeros(n, bool)
        TS = (np.ascontiguousarray(self.ts_draws.get(t0, t0 + n, self.t)) if self.g.policy == "thompson"
              else np.zeros((1, 1, 1)))
        last_dev = self.last_dev.copy()
        last_shat = self.last_shat.copy()
        i = 0
        while i < n:
            P, p_start = self._window(X, i, t0)
            stop = min(n, p_start + len(P))
            j, due = _guarded_kernel(i, stop, t0, P, p_start, costs_n, fb_n, U, self.st, self.par, self.lpos,
                                     self.lcnt, self.psum, self.csum, last_dev, last_shat,
                                     out_m, out_f, out_dev, learn, TS)
            for k in np.flatnonzero(learn[i:j]) + i:
                self.predictor.add(X[k], int(out_m[k]), float(fb_n[k, out_m[k]]))
            if due:
                trained[j - 1] = self.predictor.train_step(self.buffer_rng)
            i = j
        self.last_dev, self.last_shat = last_dev, last_shat
        self.t = t0 + n
        fb_served = fb_n[np.arange(n), out_m] if n else np.zeros(0, np.int8)
        # steps without feedback stay open for late feedback, as in update()
        none = np.flatnonzero(fb_served == NO_FEEDBACK)
        self.pending.extend(zip((t0 + none + 1).tolist(),
                                zip(out_m[none].tolist(), out_f[none, 1].tolist(), out_dev[none].tolist(),
                                    out_f[none, 0].astype(bool).tolist(), (X[k] for k in none))))
        return BlockTrace(model=out_m, explored=out_f[:, 0].astype(bool), feedback=fb_served.astype(np.int8),
                          shat_served=out_f[:, 1].copy(), s_used=out_f[:, 2].copy(), q=out_f[:, 3].copy(),
                          v=out_f[:, 4].copy(), trained=trained)

    def _window(self, X, i: int, t0: int) -> tuple[np.ndarray, int]:
        """Predictions from block row i to the end of its window (aligned to absolute
        steps, so any chunking computes the same batches); cached per predictor version."""
        a = t0 + i
        version = self.predictor.version
        cache = self._pred_cache
        if cache is None or cache[0] != version or not (cache[1] <= a < cache[1] + len(cache[2])):
            w = DRAW_PAGE // 16
            stop = min(len(X), i + ((a // w + 1) * w - a))
            self._pred_cache = cache = (version, a, self.predictor.predict(X[i:stop]))
        off = a - cache[1]
        return cache[2][off:], i

    # -- checkpoints --------------------------------------------------------------------
    def state_dict(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        s = self.st[0]
        meta: dict[str, Any] = {
            "q": repr(float(s["q"])), "spread_sum": repr(float(s["spread_sum"])),
            "t": self.t, "n_feedback": self.n_feedback,
            "buffer_rng": self.buffer_rng.bit_generator.state, "predictor": self.predictor.state_meta(),
            "guarded": {"deficit": repr(float(s["deficit"])), "var_sum": repr(float(s["var_sum"])),
                        "r2sum": repr(float(s["r2sum"])), "r2n": int(s["r2n"]), "pending": int(s["pending"]),
                        "delay_sum": repr(float(s["delay_sum"])),
                        **{k: [repr(float(v)) for v in getattr(self, k)] for k in ARRAYS}}}
        arrays = self.predictor.state_arrays()
        arrays.update(self.pending.to_arrays(self.D))
        if self.g.policy == "thompson":
            meta["ts_rng"] = self.ts_draws.rng.bit_generator.state
            meta["ts_start"] = self.ts_draws.start
            arrays["router.ts_draws"] = np.ascontiguousarray(self.ts_draws.pages)
        return meta, arrays

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        g = meta["guarded"]
        s = self.st[0]
        s["q"], s["spread_sum"] = float(meta["q"]), float(meta["spread_sum"])
        self.t = int(meta["t"])
        s["n_feedback"] = int(meta["n_feedback"])
        for k in ("deficit", "var_sum", "r2sum", "r2n", "pending"):
            s[k] = float(g[k])
        s["delay_sum"] = float(g.get("delay_sum", 0.0))  # older checkpoints: none kept
        if s["delay_sum"] < 0:
            raise ValueError("guarded state delay_sum must be >= 0")
        for k in ARRAYS:
            a = np.array([float(v) for v in g[k]])
            if a.shape != (self.M,):
                raise ValueError(f"guarded state {k} has {a.shape}, expected ({self.M},)")
            setattr(self, k, a)
        self.buffer_rng.bit_generator.state = int_state(meta["buffer_rng"])
        self.predictor = SatisfactionPredictor.from_state(meta["predictor"], arrays)
        self.pending = PendingFeedback.from_arrays(arrays, self.D)
        if "ts_rng" in meta:
            self.ts_draws.rng.bit_generator.state = int_state(meta["ts_rng"])
            self.ts_draws.start = int(meta["ts_start"])
            self.ts_draws.pages = np.array(arrays["router.ts_draws"], np.float64).reshape(
                -1, 2 * self.M, 2 * TS_TRIES + 1)
        bad = [k for k in STATE.names if not math.isfinite(float(s[k]))]
        bad += [k for k in ARRAYS if not np.all(np.isfinite(getattr(self, k)))]
        if bad:
            raise ValueError(f"NaN or infinite values in guarded state {', '.join(bad)}")
