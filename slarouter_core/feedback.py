"""Feedback models: how (and when) users, or an LLM judge, give thumbs-up/down.

A :class:`FeedbackConfig` says, per request of a simulated stream, whether feedback is
given, what it says and when it arrives. ``FeedbackConfig()`` (``kind="iid"``) is today's
behaviour: each request independently gives feedback with probability ``rate``, using
exactly the random draws :func:`slarouter_core.simulator.stream_plan` always used, so the
default reproduces earlier numbers bit for bit.

Kinds
-----
``iid``       feedback with probability ``rate`` per request, independent of everything.
``bursty``    a two-state Markov chain (on/off); while *on* feedback is given with
              probability ``rate / on_fraction``, while *off* never. Mean on-period length
              ``burst_length``; the stationary share of *on* steps is ``on_fraction``, so the
              long-run feedback rate is still ``rate``.
``negative``  negativity bias: a thumbs-down (label 0) is given with probability
              ``min(1, rate * negative_ratio)``, a thumbs-up with probability ``rate``.
``delayed``   IID presence, but each verdict arrives ``delay`` steps later (``delay_dist``
              ``"fixed"`` or ``"geometric"`` with that mean); the router sees it late.
``drift``     IID feedback, but the workload drifts: the stream starts with the first half
              of the benchmarks (by name) and ends with the second half, with ``drift_mix``
              of the other half mixed into each part.

Any kind can route labels through a simulated LLM judge (:mod:`slarouter_core.judge`):
``judge=JudgeModel(...)`` flips labels with the judge's false-positive/negative rates.

Judge fill-in (the paper's protocol: "when users do not provide feedback, SLARouter falls
back to synthetic signals from an LLM judge"): ``judge_fill=JudgeModel(...)`` keeps the
users' thumbs as they are and sends a share ``judge_budget`` of the requests to the
judge, drawn independently of the thumbs (as a service draws it when it replies): on the
unrated ones its verdict stands in, on the rated ones the pair calibrates it (its raw
verdicts are biased; prediction-powered inference needs judge and truth on the same
requests, and an unbiased estimate needs the judge's choice of requests not to depend on
the thumbs). A plan cell then holds one of

=============================  ===============================================
``NO_FEEDBACK`` (-1)           nothing
0, 1                           the user's thumbs only
``JUDGED`` + j (2, 3)          the judge's verdict j only (no thumbs)
``BOTH`` + 2 y + j (4-7)       thumbs y and the judge's verdict j
``CALIBRATION`` + 2 y + j      thumbs y, and the judge's verdict j read only to
(8-11)                         calibrate it (``judge_calibrate``: a rated answer
                               outside the budget's draw)
=============================  ===============================================

so that one int8 matrix still carries a whole stream's verdicts. A judge verdict is never
a thumb: the router decides how to use it (``SLARouter.observe(..., judge=)``), and a
router that does not use the judge where thumbs exist records only the thumbs there
(the trace then counts no judge call for it). Count with :func:`thumbs_of`,
:func:`judge_of` and :func:`judge_calls`, never by comparing codes by hand.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from .judge import JudgeModel
from .validation import Bool, Checked, Choice, Instance, Range, check_number, param

FeedbackKind = Literal["iid", "bursty", "negative", "delayed", "drift"]
KINDS: tuple[str, ...] = ("iid", "bursty", "negative", "delayed", "drift")
NO_FEEDBACK = -1
#: plan code of a judge verdict alone: JUDGED + verdict (the user gave no thumbs)
JUDGED = 2
#: plan code of thumbs y with the judge's verdict j on the same answer: BOTH + 2 y + j
BOTH = 4
#: plan code of thumbs y with a verdict j that only calibrates the judge: CALIBRATION + 2 y + j
CALIBRATION = 8


def thumbs_of(codes):
    """The users' thumbs in plan codes (0/1; ``NO_FEEDBACK`` where they gave none)."""
    c = np.asarray(codes)
    return np.where(c >= CALIBRATION, (c - CALIBRATION) // 2,
                    np.where(c >= BOTH, (c - BOTH) // 2, np.where(c >= JUDGED, NO_FEEDBACK, c))).astype(np.int8)


def judge_of(codes):
    """The judge's verdicts in plan codes, every call (0/1; ``NO_FEEDBACK`` where it gave
    none); :func:`calibration_of` tells those read only to calibrate it."""
    c = np.asarray(codes)
    return np.where(c >= CALIBRATION, (c - CALIBRATION) % 2,
                    np.where(c >= BOTH, (c - BOTH) % 2,
                             np.where(c >= JUDGED, c - JUDGED, NO_FEEDBACK))).astype(np.int8)


def calibration_of(codes):
    """The verdicts read only to calibrate the judge (0/1; ``NO_FEEDBACK`` elsewhere): a
    step's prediction never uses them."""
    c = np.asarray(codes)
    return np.where(c >= CALIBRATION, (c - CALIBRATION) % 2, NO_FEEDBACK).astype(np.int8)


def judge_calls(codes) -> int:
    """How many judge calls a trace's feedback column records."""
    return int(np.sum(np.asarray(codes) >= JUDGED))


def n_thumbs(codes) -> int:
    """How many thumbs a trace's feedback column records."""
    return int(np.sum(thumbs_of(codes) != NO_FEEDBACK))


@dataclass(frozen=True)
class FeedbackConfig(Checked):
    """How feedback is given in a simulated stream (see the module docstring)."""

    kind: FeedbackKind = param("iid", Choice(KINDS), label="feedback kind")
    burst_length: float = param(50.0, Range(low=1.0))
    on_fraction: float = param(0.25, Range(low=0.0, high=1.0, low_open=True))
    negative_ratio: float = param(3.0, Range(low=0.0, low_open=True))
    delay: float = param(50.0, Range(low=0.0))
    delay_dist: Literal["fixed", "geometric"] = param("fixed", Choice(("fixed", "geometric")))
    drift_mix: float = param(0.1, Range(low=0.0, high=0.5))
    judge: JudgeModel | None = param(None, Instance(JudgeModel, optional=True, from_dict=True))
    judge_fill: JudgeModel | None = param(None, Instance(JudgeModel, optional=True, from_dict=True))
    judge_budget: float = param(1.0, Range(low=0.0, high=1.0))
    judge_calibrate: bool = param(True, Bool())

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.judge is not None and self.judge_fill is not None:
            raise ValueError("judge (the judge replaces the users' thumbs) and judge_fill (it fills in "
                             "where they gave none) cannot both be set")

    @property
    def is_default(self) -> bool:
        return self.kind == "iid" and self.judge is None and self.judge_fill is None

    def check_rate(self, rate: Any, name: str = "feedback_rate") -> float:
        """The one check of a feedback rate: a share in [0, 1] that this model can realise
        (bursty: at most ``on_fraction``); returns it as a float."""
        rate = check_number(name, rate, low=0.0, high=1.0)
        if self.kind == "bursty" and rate / self.on_fraction > 1 + 1e-12:
            raise ValueError(f"bursty feedback: rate {rate} / on_fraction {self.on_fraction} exceeds 1; "
                             "raise on_fraction or lower the rate")
        return rate

    def to_dict(self) -> dict:
        d = asdict(self)
        d["judge"] = None if self.judge is None else self.judge.to_dict()
        d["judge_fill"] = None if self.judge_fill is None else self.judge_fill.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict | None) -> "FeedbackConfig":
        return cls(**(d or {}))  # a judge given as a dict is read by its declared rule


@dataclass(frozen=True)
class FeedbackPlan:
    """Per-stream plan: ``feedback[i, m]`` the verdict if model m serves request i (-1: none),
    ``delay[i]`` steps until it arrives (None: all immediate)."""

    feedback: np.ndarray
    delay: np.ndarray | None


class VerdictsInFlight:
    """Delayed verdicts on their way to the router: the one place that turns a plan's
    delays into arrival times (the simulator and the hand-feedback session share it).

    The verdict on the request at stream position ``pos`` with delay ``k`` reaches the
    router just before position ``pos + k`` is served; with ``k = 0``, right after its
    own step (``send`` then answers True and keeps nothing)."""

    def __init__(self) -> None:
        self._due: dict[int, list[tuple[int, int]]] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._due.values())

    def send(self, pos: int, delay: int, t: int, verdict: int) -> bool:
        """Schedule the verdict on router step ``t``; True when it arrives at once."""
        if delay == 0:
            return True
        self._due.setdefault(int(pos) + int(delay), []).append((int(t), int(verdict)))
        return False

    def arriving(self, pos: int) -> list[tuple[int, int]]:
        """(router step, verdict) pairs due before position ``pos`` is served, oldest due
        first and in the order they were sent; they are handed over once."""
        out: list[tuple[int, int]] = []
        for due in sorted(k for k in self._due if k <= pos):
            out += self._due.pop(due)
        return out


def _rng(seed: int, tag: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), 7919, int(tag)])))


def bursty_mask(n: int, rate: float, burst_length: float, on_fraction: float,
                rng: np.random.Generator) -> np.ndarray:
    """Who gives feedback under on/off bursts (vectorised over run lengths)."""
    p_on = min(1.0, rate / on_fraction)
    mean_off = burst_length * (1.0 - on_fraction) / on_fraction if on_fraction < 1 else 0.0
    state = np.zeros(n, bool)
    pos = 0
    on = rng.random() < on_fraction
    # draw run lengths in batches; geometric with the given means
    while pos < n:
        k = max(16, int(2 * n / max(1.0, burst_length + mean_off)) + 16)
        on_len = rng.geometric(1.0 / burst_length, k)
        off_len = rng.geometric(1.0 / max(mean_off, 1.0), k) if on_fraction < 1 else np.zeros(k, np.int64)
        for a, b in zip(on_len, off_len):
            if pos >= n:
                break
            if on:
                state[pos:pos + a] = True
                pos += int(a)
                on = False
            if pos >= n:
                break
            pos += int(b)
            on = True
    return state & (rng.random(n) < p_on)


def make_plan(labels: np.ndarray, gives_iid: np.ndarray, rate: float, seed: int,
              config: FeedbackConfig) -> FeedbackPlan:
    """Feedback matrix (n, M) and delays for labels already in stream order.

    ``gives_iid`` is the IID draw (``uniform < rate``) the default model uses unchanged.
    """
    labels = np.asarray(labels)
    n = len(labels)
    config.check_rate(rate)
    shown = labels
    if config.judge is not None:
        shown = config.judge.corrupt(labels, _rng(seed, 1))
    delay = None
    if config.kind in ("iid", "drift", "delayed"):
        fb = np.where(gives_iid[:, None], shown, NO_FEEDBACK).astype(np.int8)
        if config.kind == "delayed":
            if config.delay_dist == "fixed":
                delay = np.full(n, int(round(config.delay)), np.int64)
            else:
                mean = float(config.delay)
                delay = (_rng(seed, 2).geometric(1.0 / (mean + 1.0), n) - 1).astype(np.int64) if mean > 0 \
                    else np.zeros(n, np.int64)
    elif config.kind == "bursty":
        gives = bursty_mask(n, rate, config.burst_length, config.on_fraction, _rng(seed, 3))
        fb = np.where(gives[:, None], shown, NO_FEEDBACK).astype(np.int8)
    else:  # negative
        u = _rng(seed, 4).random(n)[:, None]
        p = np.where(shown > 0, rate, min(1.0, rate * config.negative_ratio))
        fb = np.where(u < p, shown, NO_FEEDBACK).astype(np.int8)
    if config.judge_fill is not None:
        fb = fill_in(fb, labels, config.judge_fill, config.judge_budget, _rng(seed, 6),
                     calibrate=config.judge_calibrate)
    return FeedbackPlan(feedback=fb, delay=delay)


def fill_in(fb: np.ndarray, labels: np.ndarray, judge: JudgeModel, budget: float,
            rng: np.random.Generator, calibrate: bool = False) -> np.ndarray:
    """``fb`` with the judge's verdicts on a share ``budget`` of the requests, drawn
    independently of the thumbs: ``JUDGED`` + j where the user gave none, ``BOTH`` + 2 y + j
    where they did. The judge reads the served answer, so its verdict is drawn for every
    model and the served one is what the router sees. With ``calibrate`` it also reads the
    rated answers outside the draw (``CALIBRATION`` + 2 y + j), for its calibration only:
    below a full budget the draw alone leaves it a share ``budget`` of the thumbs to be
    calibrated on, and a verdict that never sets its step's prediction can follow the
    thumbs without biasing the estimate.

    The judge once read every thumbed answer and the budget's share of the rest. Below a
    full budget that made a step's prediction depend on whether it was rated, which the
    thumbs' rectification cannot undo once they arrive after the step was accounted
    (``delayed`` feedback, a service): on a synthetic stream whose text model over-predicts
    by 27 points, at a quarter's budget, the estimate 15 points too high and the bound
    above the truth in every run (``benchmarks/bench_judge_timing.py``)."""
    judged = rng.random(fb.shape[0]) < budget
    verdict = judge.corrupt(np.asarray(labels), rng).astype(np.int8)
    filled = np.where(fb >= 0, BOTH + 2 * fb + verdict, JUDGED + verdict)
    rest = np.where(fb >= 0, CALIBRATION + 2 * fb + verdict, fb) if calibrate else fb
    return np.where(judged[:, None], filled, rest).astype(np.int8)


def drift_order(order: np.ndarray, groups: np.ndarray, mix: float, seed: int) -> np.ndarray:
    """Reorder a shuffled stream so that its benchmark mix changes mid-stream.

    ``groups`` holds each row's benchmark name. Benchmarks sorted by name are split in two
    halves A and B; the stream's first part carries A's requests plus a share ``mix`` of
    B's, the second part the rest. With a single benchmark the order is unchanged.
    """
    groups = np.asarray(groups)
    names = sorted(set(groups.tolist()))
    if len(names) < 2:
        return order
    first = set(names[: len(names) // 2])
    in_a = np.array([groups[r] in first for r in order])
    rng = _rng(seed, 5)
    # a share `mix` of each group's requests move to the other part
    swap = rng.random(len(order)) < mix
    early = in_a ^ swap
    return np.concatenate([order[early], order[~early]])
