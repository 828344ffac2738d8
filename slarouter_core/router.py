"""SLARouter: the online API over a routing policy (slarouter_core/policies).

Two calls per request::

    decision = router.decide(embedding, costs)     # which model serves it
    router.observe(decision, feedback)              # 1, 0 or None (no feedback)

and ``late_feedback(t, feedback)`` for a verdict that arrives later. ``run_block`` serves
many requests with the exact same semantics (and the same random numbers) when their
feedback is known in advance, as in simulation.

The router owns what every policy shares: the step counter, the step uniforms
(exploration, choice) drawn in pages tied to the step index, input checks and
checkpoints. The rule and its state live in the policy: ``paper`` (Algorithm 1 as
published), ``guarded`` and ``contextual`` (docs/IMPROVED.md).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .feedback import BOTH, JUDGED, NO_FEEDBACK, judge_of, thumbs_of
from .policies.base import LATE_WINDOW, BlockTrace, StepDraws, int_state
from .policies.contextual import ContextualConfig, ContextualPolicy
from .policies.guarded import FIELDS as GUARDED_FIELDS
from .policies.guarded import GUARDED_SWITCHES, POLICIES, TS_TRIES, GuardedConfig, GuardedPolicy
from .policies.paper import PaperPolicy
from .policies.schedule import exploration_probability
from .predictor import PredictorConfig, SatisfactionPredictor
from .validation import check_alpha, check_choice, check_number, check_optional_number

MODES = ("paper", "guarded", "contextual")
#: contextual settings that may be given flat (``optimism`` is also guarded's: it stays there)
CONTEXTUAL_FIELDS = frozenset(f.name for f in fields(ContextualConfig)) - frozenset(GUARDED_FIELDS)

__all__ = ["BlockTrace", "Decision", "GUARDED_SWITCHES", "GuardedConfig", "LATE_WINDOW", "MODES", "NO_FEEDBACK",
           "POLICIES", "RouterConfig", "SLARouter", "TS_TRIES", "exploration_probability"]


@dataclass(frozen=True)
class RouterConfig:
    """SLARouter settings: the SLA level, the policy (``mode``) and its own settings.

    ``c``, ``V``, ``q_max`` and ``eps`` set the exploration schedule and the cost weight of
    the drift-plus-penalty rule (paper and guarded modes): ``V`` fixed when given,
    otherwise data-driven ``V = q_max * eps / DeltaC`` with DeltaC the running mean cost gap
    between the cheapest and the most expensive model (in the cost unit of the data).
    ``predictor`` is the satisfaction predictor of those two modes. ``guarded`` and
    ``contextual`` hold the settings of those modes and must stay at their defaults in
    any other mode (a setting that would be ignored is an error, not a silent no-op).
    """

    alpha: float
    c: float = 0.1
    V: float | None = None
    q_max: float = 30.0
    eps: float = 0.001
    mode: Literal["paper", "guarded", "contextual"] = "paper"
    predictor: PredictorConfig = field(default_factory=PredictorConfig)
    guarded: GuardedConfig = field(default_factory=GuardedConfig)
    contextual: ContextualConfig = field(default_factory=ContextualConfig)

    def __post_init__(self) -> None:
        check_alpha(self.alpha)
        check_number("c", self.c, low=0.0)
        check_optional_number("V", self.V, low=0.0, low_open=True)
        if self.V is None:
            for name in ("q_max", "eps"):
                check_number(name, getattr(self, name), low=0.0, low_open=True)
        check_choice("mode", self.mode, MODES)
        if not isinstance(self.predictor, PredictorConfig):
            raise TypeError("predictor must be a PredictorConfig")
        for name, cls in (("guarded", GuardedConfig), ("contextual", ContextualConfig)):
            value = getattr(self, name)
            if isinstance(value, dict):
                object.__setattr__(self, name, cls.from_dict(value))
            if not isinstance(getattr(self, name), cls):
                raise TypeError(f"{name} must be a {cls.__name__}")
            if self.mode != name and getattr(self, name) != cls():
                raise ValueError(f"{name} settings apply only to mode='{name}' (mode is {self.mode!r})")

    @property
    def data_driven_v(self) -> bool:
        return self.V is None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["predictor"] = self.predictor.to_dict()
        d["guarded"] = self.guarded.to_dict()
        d["contextual"] = self.contextual.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RouterConfig":
        """From :meth:`to_dict`, or from flat settings as a command line or a method spec
        gives them (and as checkpoints before the policy split stored them): guarded
        settings (``margin_z``, ``policy``, ...) at the top level go into ``guarded``, and
        contextual ones (``z``, ``clusters``, ...; ``optimism`` is guarded's) into
        ``contextual``."""
        d = dict(d)
        flat = {k: d.pop(k) for k in list(d) if k in GUARDED_FIELDS}
        ctx_flat = {k: d.pop(k) for k in list(d) if k in CONTEXTUAL_FIELDS}
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown router setting(s) {', '.join(unknown)}")
        pred, ctx, grd = d.get("predictor"), d.get("contextual"), d.get("guarded")
        if isinstance(ctx, dict) and "z" in ctx:
            # written before the window certificate: its settings do not carry over (other
            # modes stored its defaults; a contextual state is refused when it is loaded)
            ctx = None
        d["predictor"] = pred if isinstance(pred, PredictorConfig) else PredictorConfig(**(pred or {}))
        ctx = ctx if isinstance(ctx, ContextualConfig) else ContextualConfig.from_dict(ctx)
        d["contextual"] = replace(ctx, **ctx_flat) if ctx_flat else ctx
        guarded = {**(grd.to_dict() if isinstance(grd, GuardedConfig) else dict(grd or {})), **flat}
        if flat and d.get("mode", "paper") != "guarded" and GuardedConfig(**guarded) == GuardedConfig():
            guarded = {}  # old checkpoints stored the (default) guarded fields in every mode
        d["guarded"] = GuardedConfig(**guarded)
        return cls(**d)

    def with_settings(self, **settings: Any) -> "RouterConfig":
        """A copy with some settings changed; guarded and contextual settings may be given
        flat (as in :meth:`from_dict`)."""
        flat = {k: settings.pop(k) for k in list(settings) if k in GUARDED_FIELDS}
        if flat:
            settings["guarded"] = replace(settings.get("guarded", self.guarded), **flat)
        ctx_flat = {k: settings.pop(k) for k in list(settings) if k in CONTEXTUAL_FIELDS}
        if ctx_flat:
            settings["contextual"] = replace(settings.get("contextual", self.contextual), **ctx_flat)
        return replace(self, **settings)


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
        ss = np.random.SeedSequence(self.seed)
        policy_ss, buffer_ss, predictor_ss = ss.spawn(3)
        self.draws = StepDraws(np.random.Generator(np.random.PCG64(policy_ss)), _uniform_pairs, (2,))
        self.t = 0
        self._pending: tuple[Decision, Any, np.ndarray] | None = None
        self.last_s_used = math.nan
        if config.mode == "contextual":
            self.policy: Any = ContextualPolicy(
                config.contextual, config.alpha, self.n_models, self.dim,
                seed=int(np.random.SeedSequence(self.seed, spawn_key=(4,)).generate_state(1)[0]),
                stream_length=stream_length)
            return
        predictor = SatisfactionPredictor(dim, n_models, config.predictor,
                                          seed=int(predictor_ss.generate_state(1, np.uint64)[0]))
        buffer_rng = np.random.Generator(np.random.PCG64(buffer_ss))
        if config.mode == "guarded":
            # Thompson draws: the 4th child of the seed (the other streams are unchanged)
            ts_rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(self.seed, spawn_key=(3,))))
            self.policy = GuardedPolicy(config, self.n_models, self.dim, predictor, buffer_rng, ts_rng)
        else:
            self.policy = PaperPolicy(config, self.n_models, self.dim, predictor, buffer_rng)

    # -- what the policy knows ------------------------------------------------------------
    @property
    def predictor(self) -> SatisfactionPredictor | None:
        """The satisfaction predictor of the paper and guarded modes (None: contextual)."""
        return getattr(self.policy, "predictor", None)

    @property
    def q(self) -> float:
        """The virtual queue (paper); guarded mode's truncated queue; 0 in contextual mode."""
        return float(getattr(self.policy, "q", 0.0))

    @property
    def n_feedback(self) -> int:
        """Feedback events received so far (immediate and late)."""
        return int(self.policy.n_feedback)

    def current_v(self) -> float:
        """V for the latest decision (data-driven: from the cost gaps seen so far; guarded
        mode's decisions use ``v_scale`` times it)."""
        if self.config.mode == "contextual":
            return float(self.config.q_max * self.config.eps if self.config.V is None else self.config.V)
        return self.policy.current_v(self.t)

    def decision_queue(self) -> float:
        """The queue the next decision uses: paper mode's Q, guarded mode's max(0, deficit
        + margin), the contextual policy's certified shortfall."""
        return float(self.policy.decision_queue())

    def certified_lower_bound(self, z: float = 1.2816) -> float:
        """The router's own one-sided (default 90%) lower confidence bound on the satisfied
        share of the requests served so far, from its doubly-robust estimate; NaN in paper
        mode, which claims no bound. The contextual policy uses its configured ``z``."""
        if self.t == 0:
            return math.nan
        return float(self.policy.lower_bound(self.t, z))

    def satisfaction_estimate(self) -> float:
        """The router's own estimate of the satisfied share so far (NaN where it has none)."""
        if self.t == 0:
            return math.nan
        return float(self.policy.estimate(self.t))

    def predict_satisfaction(self, x: np.ndarray) -> np.ndarray:
        """Per-model satisfaction the current mode's model predicts for one request."""
        return self.policy.predict(np.asarray(x, np.float32))[0]

    @property
    def model_version(self) -> int:
        """Bumped whenever the satisfaction model changes (a training step or a refit)."""
        return self.policy.version

    def teach(self, embedding: np.ndarray, model: int, feedback: int) -> None:
        """One extra label for the satisfaction model outside the routing rule (the
        hand-feedback demo's "learn from every thumbs"); queues and bounds are untouched.
        The contextual mode already learns from every label: it has no extra lesson."""
        if not hasattr(self.policy, "teach"):
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
                            escalated=step.escalated, shat_served=step.shat_served)
        self._pending = (decision, step, x)
        return decision

    @property
    def judge_use(self) -> str:
        """How the policy uses an LLM judge's verdicts: ``"label"`` as if they were thumbs
        (paper mode, the paper's fill-in protocol), ``"estimate"`` only as predictions
        that the users' thumbs correct (contextual), ``"ignore"`` (guarded)."""
        return getattr(self.policy, "JUDGE_USE", "ignore")

    def observe(self, decision: Decision, feedback: int | float | None,
                judge: int | None = None) -> None:
        """Feed back the user's verdict on the served response (None: none yet; it may
        still come through :meth:`late_feedback`), and optionally an LLM judge's verdict
        on the same response (``judge``, 0/1; see :attr:`judge_use`)."""
        if self._pending is None or self._pending[0] is not decision:
            raise RuntimeError("observe() must be called once, for the latest decision")
        if feedback is not None and feedback not in (0, 1, True, False):
            raise ValueError(f"feedback must be 1, 0 or None, got {feedback!r}")
        if judge is not None and judge not in (0, 1, True, False):
            raise ValueError(f"judge verdict must be 1, 0 or None, got {judge!r}")
        _, step, x = self._pending
        f = None if feedback is None else float(feedback)
        use = self.judge_use
        if use == "label" and f is None and judge is not None:
            f = float(judge)
        if use == "estimate":
            self.last_s_used = self.policy.update(step, x, f, None if judge is None else float(judge))
        else:
            self.last_s_used = self.policy.update(step, x, f)
        self.t = decision.t
        self._pending = None

    def judge_verdict(self, t: int, verdict: int) -> None:
        """An LLM judge's verdict on step ``t``'s served answer, arriving after the step was
        observed (as in the service, where the judge runs after the reply). Unknown or
        already-labelled steps are ignored: a judge verdict is optional by nature."""
        if verdict not in (0, 1, True, False):
            raise ValueError(f"judge verdict must be 1 or 0, got {verdict!r}")
        use = self.judge_use
        try:
            if use == "label":
                self.policy.late_update(int(t), float(verdict))
            elif use == "estimate":
                self.policy.late_judge(int(t), float(verdict))
        except KeyError:
            pass

    def sla_status(self) -> dict:
        """What the router claims about its SLA now: ``at_risk`` (the target can no longer
        be reached with the stated confidence in the rest of the window), the step of the
        first warning (``first_at_risk``, None if none), and the guarantee in words
        (``guarantee``; None for a policy that claims none)."""
        status = getattr(self.policy, "sla_status", None)
        if status is None:
            return {"at_risk": False, "first_at_risk": None, "guarantee": None}
        return dict(status())

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
        if hasattr(self.policy, "run_block"):
            used = fb
            if judged and self.judge_use == "label":  # the paper's protocol: a verdict as a label
                used = np.where(fb >= JUDGED, fb - JUDGED, fb).astype(np.int8)
            out = self.policy.run_block(X, costs, used, n, self.t, self._step_draws)
            self.t += n
        else:
            out = self._per_request_block(X, costs, fb, n)
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

    def _per_request_block(self, X, costs, feedback, n: int) -> BlockTrace:
        """A policy without a batched path: the per-request rule itself, so whole, chunked
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
            thumb, judge = int(thumbs_of(f)), int(judge_of(f))
            self.observe(d, None if thumb == NO_FEEDBACK else thumb, None if judge == NO_FEEDBACK else judge)
            out["model"][i] = d.model
            out["explored"][i] = d.explored
            out["feedback"][i] = f
            out["shat_served"][i] = d.shat_served
            out["s_used"][i] = self.last_s_used
            out["q"][i] = self.policy.decision_queue()
            out["v"][i] = d.v
            out["trained"][i] = self.policy.version != version
        return BlockTrace(**out)

    # -- checkpoints ----------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Full state to one safetensors file (tensors + JSON metadata); no pickle."""
        from safetensors.numpy import save_file

        if self._pending is not None:
            raise RuntimeError("observe() the pending decision before saving")
        meta: dict[str, Any] = {
            "format": "slarouter-router-v1",
            "config": self.config.to_dict(),
            "n_models": self.n_models, "dim": self.dim, "seed": self.seed,
            "t": self.t, "n_feedback": self.n_feedback,
            "policy_rng": self.draws.rng.bit_generator.state,
            "draws_start": self.draws.start,
        }
        arrays = {"router.policy_draws": np.ascontiguousarray(self.draws.pages)}
        policy_meta, policy_arrays = self.policy.state_dict()
        if self.config.mode == "contextual":
            meta["contextual"] = policy_meta
        else:
            meta.update(policy_meta)
        arrays.update(policy_arrays)
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        save_file(arrays, str(p), metadata={"slarouter": json.dumps(meta, default=_json_default)})
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
            n_feedback = int(meta["n_feedback"])
            router.draws.rng.bit_generator.state = int_state(meta["policy_rng"])
            router.draws.start = int(meta["draws_start"])
            router.draws.pages = np.array(tensors["router.policy_draws"], np.float64).reshape(-1, 2)
            if router.config.mode == "contextual":
                router.policy.load_state(meta["contextual"], tensors)  # counts its own steps and labels
            else:
                router.policy.load_state(meta, tensors)
                router.policy.n_feedback = n_feedback
                router.policy.t = router.t
            bad = [k for k, v in tensors.items() if k.startswith(("predictor.", "router."))
                   and np.asarray(v).dtype.kind == "f" and not np.all(np.isfinite(v))]
            if bad:
                raise ValueError(f"NaN or infinite values in {', '.join(sorted(bad))}")
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{p.name}: corrupt SLARouter checkpoint ({exc})") from None
        return router


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    raise TypeError(type(o).__name__)
