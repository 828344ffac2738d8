"""SLARouter: the online API over a routing policy (slarouter_core/policies).

Two calls per request::

    decision = router.decide(embedding, costs)     # which model serves it
    router.observe(decision, feedback)              # 1, 0 or None (no feedback)

and ``late_feedback(t, feedback)`` for a verdict that arrives later. ``run_block`` serves
many requests with the exact same semantics (and the same random numbers) when their
feedback is known in advance, as in simulation.

The router owns what every policy shares: the step counter, the step uniforms
(exploration, choice) drawn in pages tied to the step index, input checks and
checkpoints. The rule and its state live in the policy, a class registered by name in
:mod:`.policies.registry` (``RouterConfig.mode`` picks it; docs/IMPROVED.md).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .policies import compat
from .feedback import BOTH, CALIBRATION, JUDGED, NO_FEEDBACK, VerdictsInFlight, calibration_of, judge_of, thumbs_of
from .policies.base import LATE_WINDOW, BlockTrace, Policy, StepDraws, int_state
# guarded's names stay importable from here, as the docs import them
from .policies.guarded import GUARDED_SWITCHES, POLICIES, TS_TRIES, GuardedConfig
from .policies.registry import DEFAULT_POLICY, REGISTRY, policy_class, settings_of
from .policies.registry import info as policy_info
from .policies.registry import names as policy_names
from .policies.schedule import exploration_probability
from .validation import check_alpha

__all__ = ["BlockTrace", "Decision", "GUARDED_SWITCHES", "GuardedConfig", "LATE_WINDOW", "NO_FEEDBACK",
           "POLICIES", "RouterConfig", "SLARouter", "TS_TRIES", "exploration_probability", "policy_names"]


@dataclass(frozen=True, init=False)
class RouterConfig:
    """SLARouter settings: the SLA level ``alpha``, the policy (``mode``, a name in
    :mod:`.policies.registry`) and that policy's own frozen settings (``settings``, an
    instance of its ``config_cls``; default: its defaults).

    Settings may also be given flat, as a command line or a method spec gives them:
    ``RouterConfig(alpha=0.6, mode=name, **{setting: value})``, or as a config named
    after the mode (``RouterConfig(alpha, mode=name, **{name: config})``; read back as
    ``config.<name>``). A setting of another policy is an error (it would be ignored),
    not a silent no-op.
    """

    alpha: float
    mode: str
    settings: Any

    def __init__(self, alpha: float, mode: str = DEFAULT_POLICY, settings: Any = None, **flat: Any):
        check_alpha(alpha)
        cls = policy_class(mode).config_cls
        if settings is None and isinstance(flat.get(mode), (cls, dict)):
            settings = flat.pop(mode)  # the settings named after the mode, as before issue 20
        if settings is None:
            settings = cls()
        elif isinstance(settings, dict):
            settings = cls.from_dict(settings)
        if type(settings) is not cls:
            raise TypeError(f"settings of mode {mode!r} must be a {cls.__name__}, got {type(settings).__name__}")
        if flat:
            settings = _with_flat(settings, mode, flat)
        object.__setattr__(self, "alpha", alpha)
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "settings", settings)

    def __getattr__(self, name: str) -> Any:
        """The policy's settings read through (``config.V``), where the policy has them."""
        if name.startswith("_") or name in ("settings", "mode"):
            raise AttributeError(name)
        if name == self.mode:  # config.<mode>: its settings, as before issue 20
            return self.settings
        try:
            return getattr(self.settings, name)
        except AttributeError:
            raise AttributeError(f"mode {self.mode!r} has no setting {name!r}") from None

    def to_dict(self) -> dict:
        return {"alpha": self.alpha, "mode": self.mode, "settings": self.settings.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> "RouterConfig":
        """From :meth:`to_dict`, from flat settings (``{"mode": name, setting: value}``),
        or from a layout written before the policies had their own configs
        (:func:`compat.router_config_dict`)."""
        return cls(**compat.router_config_dict(d))

    def with_settings(self, **settings: Any) -> "RouterConfig":
        """A copy with some settings changed, given flat (as in :meth:`from_dict`); a new
        ``mode`` starts from that policy's defaults."""
        alpha = settings.pop("alpha", self.alpha)
        mode = settings.pop("mode", self.mode)
        base = settings.pop("settings", self.settings if mode == self.mode else None)
        return RouterConfig(alpha, mode, base, **settings)


def _with_flat(settings: Any, mode: str, flat: dict[str, Any]) -> Any:
    """``settings`` with flat ``flat`` settings changed; a setting of another policy names it."""
    def owner(key: str) -> str | None:
        if key in REGISTRY:  # a policy's whole settings, named after it
            return key
        return next((n for n in REGISTRY if key in settings_of(n)), None)

    own = settings_of(mode)
    foreign = sorted(set(flat) - own)
    if foreign:
        first = owner(foreign[0])
        if first is None:
            raise ValueError(f"unknown router setting {foreign[0]!r} (mode {mode!r} takes {', '.join(sorted(own))})")
        same = [k for k in foreign if owner(k) == first]
        raise ValueError(f"{', '.join(same)} apply only to mode={first!r} (mode is {mode!r})")
    return replace(settings, **flat)


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
    #: the contextual fallback chose by price (the cheapest repayment of a shortfall, or a
    #: dear model's draw thinned), not the lowest score
    repaid: bool = False
    #: the served model's satisfaction estimate as the policy's queue counts it
    shat_served: float = math.nan

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


def _uniform_pairs(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.random((n, 2))


class SLARouter:
    """Stateful router. Seeded; the same seed and inputs give the same decisions."""

    def __init__(self, config: RouterConfig, n_models: int, dim: int, seed: int = 0,
                 stream_length: int | None = None):
        """``stream_length``: the requests a simulation will serve; a policy whose SLA
        window is not set takes it as its window (the stream is the SLA's window)."""
        if n_models < 2:
            raise ValueError("routing needs at least two models")
        self.config = config
        self.n_models = int(n_models)
        self.dim = int(dim)
        self.seed = int(seed)
        # child 0 of the seed: the step draws; the policy derives its own streams from the seed
        policy_ss = np.random.SeedSequence(self.seed, spawn_key=(0,))
        self.draws = StepDraws(np.random.Generator(np.random.PCG64(policy_ss)), _uniform_pairs, (2,))
        self.t = 0
        self._pending: tuple[Decision, Any, np.ndarray] | None = None
        self.last_s_used = math.nan
        self.policy: Policy = policy_class(config.mode).create(
            config.settings, config.alpha, self.n_models, self.dim, self.seed, stream_length)

    # -- what the policy knows ------------------------------------------------------------
    @property
    def predictor(self) -> Any:
        """The policy's separate satisfaction predictor (None where it has none)."""
        return self.policy.predictor

    @property
    def q(self) -> float:
        """The queue the policy's rule updates (paper: Q; guarded: its truncated queue; 0
        for a policy without one)."""
        return float(self.policy.q)

    @property
    def n_feedback(self) -> int:
        """Feedback events received so far (immediate and late)."""
        return int(self.policy.n_feedback)

    def current_v(self) -> float:
        """V for the latest decision (data-driven: from the cost gaps seen so far; NaN for
        a policy without V; see its ``PolicyInfo.v_note`` for how its decisions use it)."""
        return float(self.policy.current_v(self.t))

    def decision_queue(self) -> float:
        """The queue the next decision uses: paper mode's Q, guarded mode's max(0, deficit
        + margin), the contextual policy's certified shortfall."""
        return float(self.policy.decision_queue())

    def certified_lower_bound(self, z: float = 1.2816) -> float:
        """The router's own one-sided (default 90%) lower confidence bound on the satisfied
        share of the requests served so far, from its doubly-robust estimate; NaN where the
        policy claims no bound. A policy with its own confidence may ignore ``z``."""
        if self.t == 0:
            return math.nan
        return float(self.policy.lower_bound(self.t, z))

    def bound_scope(self, z: float = 1.2816) -> tuple[float, str] | None:
        """``(confidence, scope)`` of :meth:`certified_lower_bound` at ``z``: its one-sided
        confidence and the requests it covers (``"all requests"``, or ``"this SLA window"``
        for the contextual mode's window certificate, at its own ``1 - delta``); None where
        the mode claims no bound. What labels a bound reads from here."""
        if not policy_info(self.config.mode).claims_bound:
            return None
        return self.policy.bound_scope(z)

    def satisfaction_estimate(self) -> float:
        """The router's own estimate of the satisfied share so far (NaN where it has none)."""
        if self.t == 0:
            return math.nan
        return float(self.policy.estimate(self.t))

    def predict_satisfaction(self, x: np.ndarray) -> np.ndarray:
        """Per-model satisfaction the current mode's model predicts for one request."""
        return self.policy.predict(np.asarray(x, np.float32))[0]

    @property
    def learns_from_every_label(self) -> bool:
        """Whether every label reaches the policy's satisfaction model (see :meth:`teach`)."""
        return bool(self.policy.learns_from_every_label)

    def defer_refits(self, on: bool = True) -> None:
        """Due refits of the satisfaction model wait for :meth:`take_refit` (a service runs
        them on a worker thread, outside its lock); see :meth:`.Policy.defer_refits`."""
        self.policy.defer_refits(on)

    def take_refit(self):
        """The refit that is due, as a job whose ``run()`` may go to any thread (None: none);
        its result goes back through :meth:`apply_refit`."""
        return self.policy.take_refit()

    def apply_refit(self, result) -> None:
        self.policy.apply_refit(result)

    @property
    def model_version(self) -> int:
        """Bumped whenever the satisfaction model changes (a training step or a refit)."""
        return self.policy.version

    def teach(self, embedding: np.ndarray, model: int, feedback: int) -> None:
        """One extra label for the satisfaction model outside the routing rule (the
        hand-feedback demo's "learn from every thumbs"); queues and bounds are untouched.
        A policy without a separate predictor already learns from every label: it refuses."""
        if self.policy.predictor is None:
            raise ValueError(f"mode {self.config.mode!r} learns from every feedback already")
        if feedback not in (0, 1, True, False):
            raise ValueError(f"feedback must be 1 or 0, got {feedback!r}")
        self.policy.teach(self._check_x(embedding), int(model), float(feedback))

    # -- inputs ---------------------------------------------------------------------------
    def _check_x(self, embedding: np.ndarray) -> np.ndarray:
        x = np.asarray(embedding, dtype=np.float32)
        if x.shape != (self.dim,):
            raise ValueError(f"embedding must have shape ({self.dim},), got {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"embedding has {int(np.sum(~np.isfinite(x)))} NaN or infinite value(s): "
                             "refusing it (one would poison the satisfaction predictor)")
        return x

    def _check_costs(self, costs: np.ndarray) -> np.ndarray:
        c = np.asarray(costs, dtype=np.float64)
        if c.shape != (self.n_models,):
            raise ValueError(f"costs must have one value per model ({self.n_models}), got shape {c.shape}")
        if not np.all(np.isfinite(c)) or np.any(c < 0):
            raise ValueError("costs must be finite and >= 0")
        return c

    def _step_draws(self, i0: int, i1: int) -> np.ndarray:
        return self.draws.get(i0, i1, self.t)

    # -- online API -------------------------------------------------------------------------
    def decide(self, embedding: np.ndarray, costs: np.ndarray) -> Decision:
        """Choose a model for the next request."""
        if self._pending is not None:
            raise RuntimeError("observe() the previous decision (feedback or None) before deciding again")
        x = self._check_x(embedding)
        c = self._check_costs(costs)
        t = self.t + 1
        u_explore, u_choice = self._step_draws(t - 1, t)[0]
        step = self.policy.choose(x, c, t, float(u_explore), float(u_choice))
        decision = Decision(t=t, model=step.model, explored=step.explored, p_explore=step.p_explore,
                            shat=step.shat, costs=c, q=step.q, v=step.v, alpha=self.config.alpha,
                            escalated=step.escalated, shat_served=step.shat_served, repaid=step.repaid)
        self._pending = (decision, step, x)
        return decision

    @property
    def judge_use(self) -> str:
        """How the policy uses an LLM judge's verdicts: ``"label"`` as if they were thumbs
        (paper mode, the paper's fill-in protocol), ``"estimate"`` only as predictions
        that the users' thumbs correct (contextual), ``"ignore"`` (guarded)."""
        return self.policy.JUDGE_USE

    def observe(self, decision: Decision, feedback: int | float | None,
                judge: int | None = None) -> None:
        """Feed back the user's verdict on the served response (None: none yet; it may
        still come through :meth:`late_feedback`), and optionally an LLM judge's verdict
        on the same response (``judge``, 0/1; see :attr:`judge_use`). Which responses go
        to the judge must not depend on their thumbs (draw it when serving): the
        contextual policy's estimate rectifies the prediction a step has, and is biased
        where having it depends on being rated."""
        if self._pending is None or self._pending[0] is not decision:
            raise RuntimeError("observe() must be called once, for the latest decision")
        if feedback is not None and feedback not in (0, 1, True, False):
            raise ValueError(f"feedback must be 1, 0 or None, got {feedback!r}")
        if judge is not None and judge not in (0, 1, True, False):
            raise ValueError(f"judge verdict must be 1, 0 or None, got {judge!r}")
        _, step, x = self._pending
        self.last_s_used = self.policy.update(step, x, None if feedback is None else float(feedback),
                                              None if judge is None else float(judge))
        self.t = decision.t
        self._pending = None

    def judge_verdict(self, t: int, verdict: int) -> None:
        """An LLM judge's verdict on step ``t``'s served answer, arriving after the step was
        observed (as in the service, where the judge runs after the reply). Unknown or
        already-labelled steps are ignored: a judge verdict is optional by nature."""
        if verdict not in (0, 1, True, False):
            raise ValueError(f"judge verdict must be 1 or 0, got {verdict!r}")
        try:
            self.policy.late_judge(int(t), float(verdict))
        except KeyError:
            pass

    def judge_calibration(self, t: int, verdict: int) -> bool:
        """An LLM judge's verdict on rated step ``t``'s answer, read only to calibrate the
        judge (the step's prediction stays the text model's: a verdict asked for because
        the answer was rated must not set it). True if the policy took it; a policy
        without a judge calibration, or a step it no longer holds, ignores it."""
        if verdict not in (0, 1, True, False):
            raise ValueError(f"judge verdict must be 1 or 0, got {verdict!r}")
        try:
            return self.policy.judge_calibration(int(t), float(verdict))
        except KeyError:
            return False

    def sla_status(self) -> dict:
        """What the router claims about its SLA now: ``at_risk`` (the target can no longer
        be reached with the stated confidence in the rest of the window), the step the
        standing warning began (``at_risk_since``, None while clear), the step of the
        current SLA window's first warning (``first_at_risk``, None if none; each window
        starts clear), and the guarantee in words (``guarantee``; None for a policy that
        claims none). The contextual policy adds its bound, estimate, the window's length,
        the requests served in it, its index (``window_index``, from 0), how many
        windows were warned (``windows_at_risk``) and how many of the window's requests
        still await thumbs the delay so far says may come (``thumbs_pending``)."""
        return dict(self.policy.sla_status())

    def awaits_feedback(self, t: int) -> bool:
        """Whether :meth:`late_feedback` for step ``t`` would still be taken (the step is
        held: observed without feedback, not too old)."""
        return self.policy.awaits_feedback(int(t))

    def late_feedback(self, t: int, feedback: int | float) -> None:
        """Feedback that arrives after step ``t`` was observed without any. The guarded and
        contextual policies correct their estimate now and learn from it; paper mode (the
        published algorithm has no late feedback) leaves its queue and teaches its
        predictor only if step t explored."""
        if feedback not in (0, 1, True, False):
            raise ValueError(f"feedback must be 1 or 0, got {feedback!r}")
        self.policy.late_update(int(t), float(feedback))

    # -- fast path for simulation -----------------------------------------------------------
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
        fb = np.asarray(feedback[:n])  # the policies read no feedback beyond row n
        judged = bool(np.any(fb >= JUDGED))
        if judged:  # what this policy asks of the judge (see judge_use)
            fb = self.judge_codes(fb)
        if self.policy.BLOCK_PATH:
            used = fb
            if judged and self.judge_use == "label":  # the paper's protocol: a verdict as a label
                used = np.where(fb >= JUDGED, fb - JUDGED, fb).astype(np.int8)
            out = self.policy.run_block(X, costs, used, n, self.t, self._step_draws)
            self.t += n
        else:
            out = serve_requests(self, X, costs, fb, 0, n)  # the per-request rule itself
        if judged:  # the trace records what was given (thumbs and judge calls), not how it was used
            out.feedback = fb[np.arange(n), out.model].astype(np.int8)
        return out

    def judge_codes(self, codes: np.ndarray) -> np.ndarray:
        """A plan's cells as this router would call the judge: ``"estimate"`` keeps every
        verdict (the thumbed ones calibrate the judge), ``"label"`` calls it only where
        the user gave no thumbs, ``"ignore"`` never."""
        if self.judge_use == "estimate":
            return codes
        thumbs = thumbs_of(codes)
        if self.judge_use == "ignore":
            return thumbs
        return np.where((codes >= JUDGED) & (codes < BOTH), codes, thumbs).astype(np.int8)

    # -- checkpoints ----------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Full state to one safetensors file (tensors + JSON metadata); no pickle."""
        from safetensors.numpy import save_file

        if self._pending is not None:
            raise RuntimeError("observe() the pending decision before saving")
        policy_meta, policy_arrays = self.policy.state_dict()
        meta: dict[str, Any] = {
            "format": compat.ROUTER_FORMAT,
            "config": self.config.to_dict(),
            "n_models": self.n_models, "dim": self.dim, "seed": self.seed, "t": self.t,
            "policy_rng": self.draws.rng.bit_generator.state,
            "draws_start": self.draws.start,
            "policy": policy_meta,
        }
        arrays = {"router.policy_draws": np.ascontiguousarray(self.draws.pages)}
        arrays.update({f"policy.{k}": v for k, v in policy_arrays.items()})
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        save_file(arrays, str(p), metadata={"slarouter": json.dumps(meta, default=_json_default)})
        return p

    @classmethod
    def load(cls, path: str | Path) -> "SLARouter":
        """A router saved by :meth:`save` (or by an older version: :mod:`.compat`)."""
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
        if not isinstance(meta, dict) or meta.get("format") not in compat.ROUTER_FORMATS:
            raise ValueError(f"{p.name} is not a SLARouter checkpoint (missing metadata)")
        try:
            meta, tensors = compat.router_checkpoint(meta, tensors)
            router = cls(RouterConfig.from_dict(meta["config"]), meta["n_models"], meta["dim"], meta["seed"])
            router.t = int(meta["t"])
            router.draws.rng.bit_generator.state = int_state(meta["policy_rng"])
            router.draws.start = int(meta["draws_start"])
            router.draws.pages = np.array(tensors["router.policy_draws"], np.float64).reshape(-1, 2)
            router.policy.load_state(meta["policy"], {k[len("policy."):]: v for k, v in tensors.items()
                                                      if k.startswith("policy.")})
            bad = [k for k, v in tensors.items() if np.asarray(v).dtype.kind == "f" and not np.all(np.isfinite(v))
                   and k.startswith(("router.", "policy.predictor.", "policy.router."))]
            if bad:
                raise ValueError(f"NaN or infinite values in {', '.join(sorted(bad))}")
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{p.name}: corrupt SLARouter checkpoint ({exc})") from None
        return router


def serve_requests(router: SLARouter, X, costs: np.ndarray, plan: np.ndarray, a: int, b: int,
                   delay: np.ndarray | None = None, in_flight: VerdictsInFlight | None = None,
                   on_event: Callable[[str], None] | None = None, pos0: int = 0) -> BlockTrace:
    """The per-request loop (``decide``/``observe`` per position), the one both paths use
    where no batched path serves: delayed feedback (``serving.serve_stream``), and a policy without a
    ``run_block`` (``SLARouter.run_block`` with ``delay`` None: a verdict is observed with
    its step), so whole, chunked and per-request runs are identical by construction.
    The trace's ``q`` is the router's ``decision_queue()`` (contextual: its certified
    shortfall), while each ``Decision.q`` is the price its scores use."""
    n = b - a
    out = {k: np.zeros(n, dt) for k, dt in (("model", np.int64), ("explored", bool), ("feedback", np.int8),
                                             ("shat_served", np.float64), ("s_used", np.float64),
                                             ("q", np.float64), ("v", np.float64), ("trained", bool))}
    for k, i in enumerate(range(a, b)):
        if in_flight is not None:
            for t, f in in_flight.arriving(pos0 + i):
                try:
                    _late_thumbs(router, t, f)
                except KeyError:  # older than the router keeps unanswered steps
                    continue
                if on_event:
                    on_event("late")
        version = router.model_version
        d = router.decide(X[i], costs[i])
        f = int(plan[i, d.model])
        thumb, judge, calib = int(thumbs_of(f)), int(judge_of(f)), int(calibration_of(f))
        verdict = None if judge == NO_FEEDBACK or calib != NO_FEEDBACK else judge
        if delay is None:
            router.observe(d, None if thumb == NO_FEEDBACK else thumb, verdict)
            if calib != NO_FEEDBACK:
                router.judge_calibration(d.t, calib)
            out["s_used"][k] = router.last_s_used
        else:  # the queue step is split between the step and the thumb's arrival
            router.observe(d, None, judge=verdict)
            out["s_used"][k] = np.nan
            # the plan code travels with the thumbs: a calibration verdict follows them
            if thumb != NO_FEEDBACK and in_flight.send(pos0 + i, int(delay[i]), d.t, f):
                _late_thumbs(router, d.t, f)
                if on_event:
                    on_event("now")
        out["model"][k] = d.model
        out["explored"][k] = d.explored
        out["feedback"][k] = f
        out["shat_served"][k] = d.shat_served
        out["q"][k] = router.decision_queue()
        out["v"][k] = d.v
        out["trained"][k] = router.model_version != version
        if on_event:
            on_event("step")
    return BlockTrace(**out)


def _late_thumbs(router: SLARouter, t: int, code: int) -> None:
    """Late thumbs in plan code (thumbs y in any code that has them; with ``CALIBRATION``
    + 2 y + j, then the judge's calibration verdict j on the same answer)."""
    router.late_feedback(t, int(thumbs_of(code)))
    if code >= CALIBRATION:
        router.judge_calibration(t, int(calibration_of(code)))


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    raise TypeError(type(o).__name__)
