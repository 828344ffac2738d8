"""The policy plug-in base.

A policy answers two questions, like River's ``predict_one``/``learn_one``: which model
serves this request (``choose``), and what to learn from a verdict (``update``, which
takes feedback that arrives with the request or any time later). It exposes the value
its decisions are priced with (``decision_queue``) and its whole state as JSON metadata
plus NumPy arrays (``state_dict``/``load_state``) so that the router can checkpoint it
into safetensors without pickle.

The router hands the policy the two uniforms of the step (exploration, choice). They are
drawn per step index, so serving a stream whole, in chunks or one request at a time
gives identical decisions.

A policy is a :class:`Policy` (abstract base: the methods above, defaults for the rest)
with a frozen settings class (:class:`PolicyConfig`) and a :class:`PolicyInfo` (how the
dashboard and the CLI show it), registered by name in :mod:`.registry`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import asdict, dataclass, fields, is_dataclass
from statistics import NormalDist
from typing import Any, Callable, ClassVar, Protocol

import numpy as np

from ..validation import Checked


@dataclass(frozen=True)
class PolicyStep:
    """What a policy decided for step ``t`` and the numbers behind it.

    ``shat`` are the per-model satisfaction estimates the decision used, and
    ``argmin_m v * costs_m + q * (alpha - shat_m)`` is the rule (``Decision.scores``).
    ``blind``: the model was chosen without looking at the request (exploration, or a
    fallback that serves every request alike), so its label is an unbiased sample of that
    model's satisfaction over the stream. ``by_cluster``: chosen by the request's cluster
    only (contextual mode), so its label is unbiased for that cluster, not the stream.
    """

    t: int
    model: int
    explored: bool
    p_explore: float
    shat: np.ndarray
    q: float
    v: float
    shat_served: float
    blind: bool = False
    escalated: bool = False  # guarded mode: the guard overrode the rule's choice
    by_cluster: bool = False
    #: contextual mode: its fallback served the model that repays a shortfall at least cost,
    #: not the lowest score (the best level: ``ContextualConfig.repay_cost``), or the draw's
    #: best model not thinned instead of a thinned pick (``ContextualConfig.thin_fallback``)
    repaid: bool = False


@dataclass
class BlockTrace:
    """Per-step arrays for a block of requests served by a policy's batched path."""

    model: np.ndarray
    explored: np.ndarray
    feedback: np.ndarray
    shat_served: np.ndarray
    s_used: np.ndarray
    q: np.ndarray
    v: np.ndarray
    trained: np.ndarray


@dataclass(frozen=True)
class PolicyInfo:
    """How a policy is shown (dashboard, CLI): read from the class, so that no page or
    live module names a policy.

    ``queue_title`` is what its queue chart shows (``decision_queue()``), ``v_note`` how V
    applies (empty: as shown; ``{scale:g}`` is filled with the config's ``v_scale_field``),
    ``claims_bound``: whether ``lower_bound``/``estimate`` are numbers worth plotting;
    ``own_queue_axis``: its queue is another quantity than Algorithm 1's Q (a chart gives
    it its own axis beside the others); ``score_multiplier``: the name of ``Decision.q`` in
    the score ``V*C + q*(alpha - shat)``.
    """

    label: str
    help: str
    queue_title: str
    color: str
    v_applies: bool = True
    v_note: str = ""
    v_scale_field: str | None = None
    claims_bound: bool = True
    own_queue_axis: bool = False
    explored_labels_only: bool = False
    #: the multiplier of ``alpha - shat`` in its decision's score (Algorithm 1's queue Q;
    #: a policy that prices satisfaction names its price)
    score_multiplier: str = "Q"
    #: shown beside the sidebar's router in a comparison by default (the Experiments page)
    compare_by_default: bool = False


@dataclass(frozen=True)
class PolicyConfig(Checked):
    """Base of a policy's own frozen settings: fields declared with their rules
    (:func:`validation.param`), checked on construction by :class:`validation.Checked`;
    a nested config may be given as a dict where its rule says so."""

    def to_dict(self) -> dict:
        return {f.name: (v.to_dict() if hasattr(v, "to_dict") else asdict(v) if is_dataclass(v) else v)
                for f in fields(self) for v in [getattr(self, f.name)]}

    @classmethod
    def from_dict(cls, d: dict | None) -> "PolicyConfig":
        d = dict(d or {})
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise ValueError(f"unknown setting(s) {', '.join(unknown)} (settings: {', '.join(known)})")
        return cls(**d)  # a nested config given as a dict: its Instance(..., from_dict=True) rule


class Policy(ABC):
    """One routing rule with explicit state (see the module docstring).

    A policy class declares ``config_cls`` (its frozen settings) and ``info`` (how it is
    shown), and is built by ``create(settings, alpha, n_models, dim, seed, stream_length)``
    from the router's seed (it derives its own random streams). The router reads only
    what is declared here: ``JUDGE_USE`` (how a judge's verdicts count: ``"label"``,
    ``"estimate"`` or ``"ignore"``), ``BLOCK_PATH`` (a batched ``run_block`` exists),
    ``predictor`` (a separate satisfaction model that ``teach`` trains, or None).
    """

    config_cls: ClassVar[type]
    info: ClassVar[PolicyInfo]
    JUDGE_USE: ClassVar[str] = "ignore"
    BLOCK_PATH: ClassVar[bool] = False
    predictor: Any = None
    version: int = 0  # bumped whenever the satisfaction model changes
    n_feedback: int = 0
    q: float = 0.0  # the queue the rule updates (0 for a policy without one)

    @classmethod
    def create(cls, settings: Any, alpha: float, n_models: int, dim: int, seed: int,
               stream_length: int | None = None) -> "Policy":
        return cls(settings, alpha, n_models, dim, seed, stream_length)  # type: ignore[call-arg]

    @abstractmethod
    def choose(self, x: np.ndarray, costs: np.ndarray, t: int, u_explore: float,
               u_choice: float) -> PolicyStep: ...

    @abstractmethod
    def update(self, step: PolicyStep, x: np.ndarray, feedback: float | None,
               judge: float | None = None) -> float:
        """Account step ``step.t`` (thumbs and the judge's verdict, either may be None);
        returns the satisfaction value the rule used."""

    @abstractmethod
    def late_update(self, t: int, feedback: float) -> None: ...

    @abstractmethod
    def decision_queue(self) -> float: ...

    @abstractmethod
    def predict(self, X: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def lower_bound(self, t: int, z: float) -> float: ...

    @abstractmethod
    def estimate(self, t: int) -> float: ...

    @abstractmethod
    def state_dict(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]: ...

    @abstractmethod
    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None: ...

    # -- defaults -----------------------------------------------------------------------
    def bound_scope(self, z: float) -> tuple[float, str]:
        """``(confidence, scope)`` of :meth:`lower_bound` at ``z``: a one-sided normal bound
        at ``z`` on every request so far, by default (a policy with its own claim says so)."""
        return NormalDist().cdf(z), "all requests"

    def sla_status(self) -> dict:
        """What it claims about its SLA now (see ``SLARouter.sla_status``); none by default."""
        return {"at_risk": False, "at_risk_since": None, "first_at_risk": None, "guarantee": None}

    def awaits_feedback(self, t: int) -> bool:
        """Whether step ``t`` still awaits its late feedback (its record is held)."""
        pending = getattr(self, "pending", None)
        steps = pending.steps if isinstance(pending, PendingFeedback) else pending
        return steps is not None and int(t) in steps

    def late_judge(self, t: int, verdict: float) -> None:
        """A judge's verdict on step ``t`` after it was observed: a label where the policy
        takes verdicts as labels, else nothing (``"estimate"`` policies override it)."""
        if self.JUDGE_USE == "label":
            self.late_update(t, verdict)

    def judge_calibration(self, t: int, verdict: float) -> bool:
        """A judge's verdict on rated step ``t``'s answer, to calibrate the judge only; True
        if taken (only a policy that calibrates a judge takes it)."""
        return False

    @property
    def learns_from_every_label(self) -> bool:
        """Whether every label reaches its satisfaction model (Algorithm 1's predictor
        learns from explored steps only; ``teach`` may give it the others)."""
        return True

    def current_v(self, t: int) -> float:
        """V for step ``t`` (NaN: the policy has no V)."""
        return math.nan

    def teach(self, x: np.ndarray, model: int, feedback: float) -> None:
        """One extra label outside the rule (only a policy with a separate predictor)."""
        raise ValueError(f"policy {type(self).__name__} learns from every feedback already")

    def run_block(self, X, costs, feedback, n: int, t0: int,
                  draws: Callable[[int, int], np.ndarray]) -> BlockTrace:
        """Batched serving (only where ``BLOCK_PATH``; the router serves per request otherwise)."""
        raise NotImplementedError

    # -- refits out of the request path (a service) -------------------------------------
    def defer_refits(self, on: bool = True) -> None:
        """Let a due refit of the satisfaction model wait for :meth:`take_refit` instead
        of running inside the call that made it due (a policy without a costly refit
        ignores this)."""

    def take_refit(self) -> "RefitJob | None":
        """The refit that is due, as a job to run on any thread (None: none due)."""
        return None

    def apply_refit(self, result: Any) -> None:
        """Install what a :meth:`take_refit` job's ``run()`` returned."""
        raise ValueError(f"policy {type(self).__name__} has no refit to apply")


class RefitJob(Protocol):
    """A refit taken out of the request path: it holds copies of what the fit reads, so
    ``run()`` is pure (same inputs, same result, on any thread)."""

    def run(self) -> Any: ...


#: steps kept open for late feedback, per router (older ones are forgotten, oldest first)
LATE_WINDOW = 100_000
#: steps per page of pre-drawn random numbers
DRAW_PAGE = 4096


class StepDraws:
    """Random numbers tied to the step index: step i always gets row i of a stream drawn
    in fixed pages of ``DRAW_PAGE`` steps, whatever the chunking of the calls, so that a
    stream served whole, in chunks or one request at a time sees the same numbers."""

    def __init__(self, rng: np.random.Generator, draw: Any, shape: tuple[int, ...]):
        self.rng = rng
        self._draw = draw  # draw(rng, n_steps) -> (n_steps, *shape)
        self.start = 0
        self.pages = np.zeros((0, *shape))

    def get(self, i0: int, i1: int, now: int) -> np.ndarray:
        """Rows for 0-based steps [i0, i1); rows before step ``now`` may be dropped."""
        if i0 < self.start:
            raise RuntimeError("random draws for past steps are gone")
        while self.start + len(self.pages) < i1:
            keep_from = max(0, min(now, self.start + len(self.pages)) - self.start)
            self.start += keep_from
            self.pages = np.concatenate([self.pages[keep_from:], self._draw(self.rng, DRAW_PAGE)])
        return self.pages[i0 - self.start:i1 - self.start]


class PendingFeedback:
    """Steps served without feedback, for a verdict that arrives later: step t ->
    (model, estimate served, deviation, explored, embedding or None). The newest
    ``LATE_WINDOW`` are kept (an OrderedDict: dropping the oldest is O(1))."""

    def __init__(self) -> None:
        self.steps: OrderedDict[int, tuple] = OrderedDict()

    def __len__(self) -> int:
        return len(self.steps)

    def add(self, t: int, record: tuple) -> None:
        self.steps[int(t)] = record
        if len(self.steps) > LATE_WINDOW:
            self.steps.popitem(last=False)

    def extend(self, items) -> None:
        self.steps.update(items)
        while len(self.steps) > LATE_WINDOW:
            self.steps.popitem(last=False)

    def pop(self, t: int) -> tuple:
        rec = self.steps.pop(int(t), None)
        if rec is None:
            raise KeyError(f"no step {t} awaiting feedback (already given, or too old)")
        return rec

    def to_arrays(self, dim: int) -> dict[str, np.ndarray]:
        """As arrays in their order (oldest first); a step kept without its embedding
        stores zeros."""
        recs = list(self.steps.items())
        return {"router.late_t": np.array([t for t, _ in recs], np.int64),
                "router.late_m": np.array([r[0] for _, r in recs], np.int64),
                "router.late_shat_dev": np.array([(r[1], r[2]) for _, r in recs], np.float64).reshape(-1, 2),
                "router.late_explored": np.array([r[3] for _, r in recs], np.uint8),
                "router.late_x": (np.stack([np.zeros(dim, np.float32) if r[4] is None else
                                            np.asarray(r[4], np.float32) for _, r in recs]) if recs
                                  else np.zeros((0, dim), np.float32))}

    @classmethod
    def from_arrays(cls, tensors: dict, dim: int) -> "PendingFeedback":
        out = cls()
        if "router.late_t" not in tensors:
            return out
        t = np.asarray(tensors["router.late_t"], np.int64)
        m = np.asarray(tensors["router.late_m"], np.int64)
        sd = np.asarray(tensors["router.late_shat_dev"], np.float64).reshape(-1, 2)
        ex = np.asarray(tensors["router.late_explored"]).astype(bool)
        x = np.asarray(tensors["router.late_x"], np.float32).reshape(-1, dim)
        if not (len(t) == len(m) == len(sd) == len(ex) == len(x)):
            raise ValueError("pending late-feedback arrays disagree in length")
        out.steps = OrderedDict((int(t[i]), (int(m[i]), float(sd[i, 0]), float(sd[i, 1]), bool(ex[i]), x[i]))
                                for i in range(len(t)))
        return out


def int_state(state: dict) -> dict:
    """A bit generator's state from JSON (which round-trips its ints exactly); only nested
    dicts need copying."""
    return {k: (int_state(v) if isinstance(v, dict) else v) for k, v in state.items()}
