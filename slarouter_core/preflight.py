"""Pre-flight check of an SLA: can a router certify it, and what must it pay at least?

Before the first request, from each model's accuracy and mean cost per request (a
benchmark log, or a zoo file's stated accuracies and prices), the feedback rate and the
SLA window, this says whether the ``contextual`` router's guarantee can be reached at
all, what would make it reachable, and the least a router that certifies it pays: a
router that will miss says so before it starts, not only while it runs (``at_risk``).

Why these figures. The router certifies a window of N requests with a doubly-robust
estimate that adds ``(1 - phi) / phi * r2`` of variance per request
(:mod:`.policies.certificate`): ``phi`` the share of requests with thumbs, ``r2`` the mean
squared error of its prediction of each outcome. To end the window with its ``1 - delta``
bound at alpha, the window must deliver alpha plus the bound's width (the margin). Where
the request text does not help, a request served by a model of accuracy ``a`` is
predicted at ``a``, so ``r2 = a (1 - a)``, averaged over the models in the shares the
cheapest text-blind mixture serves them; where a calibrated LLM judge read the answer,
``E Var(y | verdict)``, which its error rates give. Hence:

- **certifiable** iff the most accurate model, served on every request, ends the window
  with its bound at alpha or above: ``a* - margin(a*) >= alpha``;
- **what would make it so**: the largest alpha, the least feedback rate, the shortest
  window at which that holds;
- **the least a certifying router pays without the text**: the static mixture at alpha
  plus the margin, a multiple of the static mixture at alpha, the judge's calls included;
- **whether a window tells the best two models apart**: the labels each needs (a
  one-sided 90% test with 90% power) against the thumbs a window gives in all.

A text model that predicts the outcome shrinks ``r2`` and so the margin (``residual_var``
takes a measured value); learning while serving costs more than these floors.
``benchmarks/bench_preflight.py`` sets every figure here beside the router's own runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Sequence

import numpy as np

from .baselines.static import static_mixture_lp
from .judge import JudgeModel
from .policies.certificate import Certificate
from .policies.contextual import DEFAULT_WINDOW, GUARANTEES
from .validation import Alpha, Bool, Checked, Choice, Instance, Int, Range, param

#: one-sided 90% normal quantile: confidence and power of the labels-needed test
Z90 = NormalDist().inv_cdf(0.9)
#: the longest window the shortest-window search tries
MAX_WINDOW = 10**12


@dataclass(frozen=True)
class PreflightConfig(Checked):
    """The SLA and the feedback a router will get (defaults: the ``contextual`` policy's
    claim, and the benchmarks' feedback rate)."""

    alpha: float = param(check=Alpha())
    feedback_rate: float = param(0.2, Range(low=0.0, high=1.0, low_open=True))
    window: int = param(DEFAULT_WINDOW, Int(low=1))
    delta: float = param(0.05, Range(low=0.0, high=0.5, low_open=True, high_open=True))
    guarantee: str = param("window", Choice(GUARANTEES))
    #: an LLM judge filling in where users give no thumbs (its error rates), or None
    judge: JudgeModel | None = param(None, Instance(JudgeModel, optional=True, from_dict=True))
    #: share of the answers the judge reads, drawn regardless of the thumbs (those rated calibrate it)
    judge_budget: float = param(1.0, Range(low=0.0, high=1.0))
    #: below a full budget, the judge also reads the rated answers outside its share, to
    #: calibrate itself only (``FeedbackConfig.judge_calibrate``): calls counted, margin as is
    judge_calibrate: bool = param(True, Bool())
    #: one judge call in the costs' unit; None: the cheapest model's mean cost per request
    judge_cost: float | None = param(None, Range(low=0.0, optional=True, to_float=True))
    #: the text model's residual variance on answers without a verdict, where it was
    #: measured; None: text-blind (each model's Bernoulli variance)
    residual_var: float | None = param(None, Range(low=0.0, high=0.25, low_open=True, optional=True,
                                                   to_float=True))


def verdict_calibration(accuracy: np.ndarray, judge: JudgeModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(P(verdict = 1), P(y = 1 | verdict = 0), P(y = 1 | verdict = 1))`` per model: a
    judge with these error rates reading answers of a model of this accuracy, its verdict
    calibrated as the router calibrates it."""
    a = np.asarray(accuracy, np.float64)
    yes = a * (1.0 - judge.fnr) + (1.0 - a) * judge.fpr
    p_no = np.divide(a * judge.fnr, 1.0 - yes, out=np.zeros_like(a), where=yes < 1)
    p_yes = np.divide(a * (1.0 - judge.fnr), yes, out=np.zeros_like(a), where=yes > 0)
    return yes, p_no, p_yes


def judge_residual(accuracy: np.ndarray, judge: JudgeModel) -> np.ndarray:
    """``E Var(y | verdict)`` per model: what is left of an answer's outcome once a judge
    with these error rates has read it and its verdict is calibrated (``P(y | verdict)``)."""
    yes, p_no, p_yes = verdict_calibration(accuracy, judge)
    return yes * p_yes * (1.0 - p_yes) + (1.0 - yes) * p_no * (1.0 - p_no)


def labels_to_separate(a1: float, a2: float) -> float:
    """Labels of each of two models (accuracies ``a1``, ``a2``) a one-sided 90% test needs
    to tell them apart with 90% power (pooled variance); inf when they are equal."""
    gap = abs(float(a1) - float(a2))
    if gap <= 0.0:
        return math.inf
    p = (float(a1) + float(a2)) / 2.0
    return (2.0 * Z90) ** 2 * 2.0 * p * (1.0 - p) / gap**2


class _Margins:
    """The bound's width at a window's end for a satisfaction a text-blind router
    delivers: the cheapest mixture at that satisfaction sets the residuals."""

    def __init__(self, acc: np.ndarray, cost: np.ndarray, cfg: PreflightConfig, judged: bool):
        self.acc, self.cost, self.cfg = acc, cost, cfg
        self.r2_blind = acc * (1.0 - acc)
        self.r2_judged = judge_residual(acc, cfg.judge) if judged else None
        self.budget = cfg.judge_budget if judged else 0.0

    def judged_share(self) -> float:
        """Share of answers a judge reads: ``budget``, drawn regardless of the thumbs."""
        return 0.0 if self.r2_judged is None else self.budget

    def step_var(self, target: float, phi: float) -> float:
        f = static_mixture_lp(self.acc, self.cost, min(target, float(self.acc.max())))[0]
        r2u = float(f @ self.r2_blind) if self.cfg.residual_var is None else self.cfg.residual_var
        share = self.judged_share()
        r2 = r2u if share == 0.0 else share * min(float(f @ self.r2_judged), r2u) + (1.0 - share) * r2u
        return (1.0 - phi) / phi * r2

    def margin(self, target: float, phi: float | None = None, window: int | None = None) -> float:
        """The bound's width over the window's satisfied share at its end."""
        cfg = self.cfg
        phi = cfg.feedback_rate if phi is None else phi
        n = cfg.window if window is None else window
        cert = Certificate(cfg.alpha, cfg.delta, cfg.guarantee, n)
        return cert.width(n * self.step_var(target, phi)) / n

    def target(self) -> float:
        """alpha plus the margin at that satisfaction (a fixed point: the margin moves with
        the mixture that delivers it, slowly, so the iteration contracts at once)."""
        alpha, best = self.cfg.alpha, float(self.acc.max())
        s = alpha
        for _ in range(200):
            nxt = alpha + self.margin(min(s, best))
            if abs(nxt - s) < 1e-12:
                break
            s = nxt
        return s

    def clears(self, phi: float | None = None, window: int | None = None) -> float:
        """How far the best model's end-of-window bound clears alpha (negative: short)."""
        best = float(self.acc.max())
        return best - self.margin(best, phi, window) - self.cfg.alpha


@dataclass(frozen=True)
class Preflight:
    """What a window of this SLA needs and costs, before any request (module docstring)."""

    models: tuple[str, ...]
    accuracy: tuple[float, ...]
    mean_cost: tuple[float, ...]
    config: PreflightConfig
    #: the most accurate model (ties: the cheapest) and the next most accurate
    best: int
    runner_up: int | None
    #: the satisfaction a certifying router must deliver on average (alpha + margin), and
    #: the margin, at that satisfaction where it is reachable, else serving the best model
    target: float
    margin: float
    certifiable: bool
    #: how far the best model's end-of-window bound clears alpha (negative: short)
    headroom: float
    alpha_max: float
    feedback_rate_min: float | None
    window_min: int | None
    #: cost per request: the static mixture at alpha, the best model alone, and the least
    #: a text-blind router that certifies pays (judge calls included; None: not certifiable)
    mixture_cost: float
    best_cost: float
    certified_cost: float | None
    judge_calls: float
    judge_cost: float
    #: without the judge (None: no judge, or not certifiable without it)
    certified_cost_without_judge: float | None
    labels_needed: float | None
    labels_given: float

    @property
    def judge_break_even(self) -> float | None:
        """The judge price per call below which the judge lowers the certified cost (None:
        no judge, or not certifiable either way; inf: certifiable only with it)."""
        if self.config.judge is None or self.certified_cost is None or self.judge_calls == 0:
            return None
        if self.certified_cost_without_judge is None:
            return math.inf
        models_only = self.certified_cost - self.judge_calls * self.judge_cost
        return (self.certified_cost_without_judge - models_only) / self.judge_calls

    def ratio(self, cost: float | None) -> float | None:
        """``cost`` as a multiple of the static mixture's at alpha."""
        if cost is None:
            return None
        return cost / self.mixture_cost if self.mixture_cost > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "models": list(self.models), "accuracy": list(self.accuracy), "mean_cost": list(self.mean_cost),
            "alpha": cfg.alpha, "feedback_rate": cfg.feedback_rate, "window": cfg.window, "delta": cfg.delta,
            "guarantee": cfg.guarantee, "judge": None if cfg.judge is None else cfg.judge.to_dict(),
            "judge_budget": cfg.judge_budget, "judge_calibrate": cfg.judge_calibrate, "residual_var": cfg.residual_var,
            "best": self.models[self.best], "runner_up": None if self.runner_up is None else self.models[self.runner_up],
            "certifiable": self.certifiable, "target": self.target, "margin": self.margin, "headroom": self.headroom,
            "alpha_max": self.alpha_max, "feedback_rate_min": self.feedback_rate_min, "window_min": self.window_min,
            "mixture_cost": self.mixture_cost, "best_cost": self.best_cost, "certified_cost": self.certified_cost,
            "certified_cost_ratio": self.ratio(self.certified_cost), "best_cost_ratio": self.ratio(self.best_cost),
            "judge_calls_per_request": self.judge_calls, "judge_cost": self.judge_cost,
            "certified_cost_without_judge": self.certified_cost_without_judge,
            "judge_break_even": self.judge_break_even, "labels_needed": self.labels_needed,
            "labels_given": self.labels_given,
        }

    def report(self) -> list[str]:
        """The verdict and its figures, a line each."""
        cfg = self.config
        pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
        best = f"{self.models[self.best]} ({pct(self.accuracy[self.best])})"
        claim = (f"alpha {pct(cfg.alpha)}, a {cfg.guarantee} bound at {100 * (1 - cfg.delta):g}% over "
                 f"{cfg.window:,} requests, thumbs on {100 * cfg.feedback_rate:g}% of them"
                 + (f", an LLM judge ({cfg.judge.name}) reading {100 * cfg.judge_budget:g}% of the answers"
                    + (" and the other rated ones (to calibrate it)"
                       if cfg.judge_calibrate and cfg.judge_budget < 1 else "")
                    if cfg.judge else ""))
        lines = [claim]
        if self.certifiable:
            lines.append(f"certifiable: yes. Serving {best} on every request, the window would end with its bound at "
                         f"{pct(self.alpha_max)}, {100 * self.headroom:.2f} points above alpha.")
            lines.append(f"a certifying router delivers about {pct(self.target)} (alpha + a margin of "
                         f"{100 * self.margin:.2f} points, text-blind); without the text the least it pays is "
                         f"{self.ratio(self.certified_cost):.2f}x the static mixture at alpha (the best model alone: "
                         f"{self.ratio(self.best_cost):.2f}x)")
        else:
            lines.append(f"certifiable: no. Even serving {best} on every request, the window would end with its bound "
                         f"at {pct(self.alpha_max)}, {100 * -self.headroom:.2f} points under alpha.")
            fixes = [f"alpha at most {pct(self.alpha_max)}" if self.alpha_max > 0 else None,
                     None if self.feedback_rate_min is None else f"thumbs on at least {self.feedback_rate_min:.3f} "
                     "of requests",
                     None if self.window_min is None else f"a window of at least {self.window_min:,} requests"]
            fixes = [f for f in fixes if f]
            if fixes:
                lines.append("it would be with " + ", or ".join(fixes) + " (each alone)")
        if self.runner_up is not None:
            need = self.labels_needed
            what = ("never (equal accuracies)" if need is None or math.isinf(need) else
                    f"about {need:,.0f} labels of each")
            enough = ("" if need is None or math.isinf(need) else
                      ", enough" if self.labels_given >= 2 * need else
                      ", fewer: expect the router to serve both while it cannot tell them apart")
            lines.append(f"telling {best} from {self.models[self.runner_up]} "
                         f"({pct(self.accuracy[self.runner_up])}) takes {what} (90% confidence and power); the "
                         f"window's thumbs number {self.labels_given:,.0f} in all{enough}")
        if cfg.judge is not None:
            be = self.judge_break_even
            lines.append(f"the judge: {self.judge_calls:.2f} calls per request at {self.ratio(self.judge_cost):.3f}x per "
                         "call" + ("" if be is None else
                                   "; certifiable only with it" if math.isinf(be) else
                                   f"; a text-blind router's cost falls with it below {self.ratio(be):.3f}x per "
                                   "call" if be > 0 else "; it does not lower a text-blind router's cost at any price"))
        return lines


def preflight(accuracy: Sequence[float], mean_cost: Sequence[float], config: PreflightConfig,
              models: Sequence[str] | None = None) -> Preflight:
    """The pre-flight check of ``config`` for a zoo whose models have these accuracies and
    mean costs per request (module docstring)."""
    acc = np.asarray(accuracy, np.float64)
    cost = np.asarray(mean_cost, np.float64)
    if acc.ndim != 1 or len(acc) == 0 or cost.shape != acc.shape:
        raise ValueError(f"accuracy and mean_cost must be lists of the same, non-zero length (got {acc.shape} and "
                         f"{cost.shape})")
    if not np.all(np.isfinite(acc)) or np.any((acc < 0) | (acc > 1)):
        raise ValueError(f"every accuracy must be a number in [0, 1], got {acc.tolist()}")
    if not np.all(np.isfinite(cost)) or np.any(cost < 0):
        raise ValueError(f"every mean cost must be a finite number >= 0, got {cost.tolist()}")
    names = tuple(str(m) for m in models) if models is not None else tuple(f"model-{i}" for i in range(len(acc)))
    if len(names) != len(acc):
        raise ValueError(f"{len(names)} model names for {len(acc)} accuracies")
    cfg = config
    top = np.flatnonzero(acc == acc.max())
    best = int(top[np.argmin(cost[top])])
    others = [i for i in np.argsort(-acc, kind="stable") if i != best]
    runner_up = int(others[0]) if others else None
    judge_cost = float(cost.min()) if cfg.judge_cost is None else float(cfg.judge_cost)
    judged = _Margins(acc, cost, cfg, cfg.judge is not None)
    calls = judged.judged_share()
    if cfg.judge is not None and cfg.judge_calibrate:
        calls += (1.0 - calls) * cfg.feedback_rate  # the rated answers outside the share

    headroom = judged.clears()
    certifiable = headroom >= -1e-12
    # where the mixture's residuals exceed the best model's the fixed point could pass it
    target = min(judged.target(), float(acc[best])) if certifiable else float(acc[best])
    margin = judged.margin(target)

    def least(fn, lo: float, hi: float, integer: bool) -> float | None:
        """The least x in [lo, hi] with fn(x) >= 0 (fn increasing), None if even hi fails."""
        if fn(hi) < 0:
            return None
        if fn(lo) >= 0:
            return lo
        for _ in range(200):
            mid = math.floor((lo + hi) / 2) if integer else (lo + hi) / 2
            if fn(mid) >= 0:
                hi = mid
            else:
                lo = mid
            if (integer and hi - lo <= 1) or (not integer and hi - lo < 1e-7):
                break
        return hi

    phi_min = least(lambda p: judged.clears(phi=p), 1e-6, 1.0, False)
    window_min = least(lambda n: judged.clears(window=int(n)), 1, MAX_WINDOW, True)
    mixture = static_mixture_lp(acc, cost, cfg.alpha)[1]
    certified = static_mixture_lp(acc, cost, target)[1] + calls * judge_cost if certifiable else None
    without = None
    if cfg.judge is not None:
        plain = _Margins(acc, cost, cfg, False)
        if plain.clears() >= -1e-12:
            without = static_mixture_lp(acc, cost, plain.target())[1]
    need = labels_to_separate(acc[best], acc[runner_up]) if runner_up is not None else None
    return Preflight(
        models=names, accuracy=tuple(float(a) for a in acc), mean_cost=tuple(float(c) for c in cost), config=cfg,
        best=best, runner_up=runner_up, target=float(target), margin=float(margin), certifiable=bool(certifiable),
        headroom=float(headroom), alpha_max=float(acc[best] - judged.margin(float(acc[best]))),
        feedback_rate_min=None if phi_min is None else float(phi_min),
        window_min=None if window_min is None else int(window_min),
        mixture_cost=float(mixture), best_cost=float(cost[best]),
        certified_cost=None if certified is None else float(certified), judge_calls=float(calls),
        judge_cost=judge_cost, certified_cost_without_judge=None if without is None else float(without),
        labels_needed=None if need is None else float(need), labels_given=cfg.feedback_rate * cfg.window)


def cheapest_at(rate: np.ndarray, cost: np.ndarray, target: float) -> float:
    """Cheapest mean cost at satisfaction ``target`` over the operating points
    ``(rate, cost)`` and any time-share of two of them (the lower convex hull); NaN when no
    point reaches ``target``."""
    best = np.inf
    for i in np.flatnonzero(rate >= target):
        best = min(best, cost[i])
        for j in np.flatnonzero(rate < target):  # share f of point i, 1 - f of point j
            f = (target - rate[j]) / (rate[i] - rate[j])
            best = min(best, f * cost[i] + (1 - f) * cost[j])
    return float(best) if np.isfinite(best) else float("nan")


def routed_cost(P: np.ndarray, solved: np.ndarray, costs: np.ndarray, target: float) -> float:
    """Cheapest mean cost at true satisfaction (the logged labels) ``target`` of serving each
    request ``argmin_m cost - lam P`` at some price ``lam``, or a time-share of two prices
    or of a price and one model for every request (the predictions may rank requests worse
    than the best model alone)."""
    rows = np.arange(len(P))
    scale = costs.mean() / max(float(P.std()), 1e-3)
    served = [np.argmin(costs - lam * P, axis=1) for lam in scale * np.logspace(-4, 6, 121)]
    served += [np.full(len(P), m) for m in range(P.shape[1])]
    rate = np.array([solved[rows, s].mean() for s in served])
    cost = np.array([costs[rows, s].mean() for s in served])
    return cheapest_at(rate, cost, target)


def text_floor(solved: np.ndarray, costs: np.ndarray, embeddings: np.ndarray, alpha: float, target: float,
               labels: int, fits: int = 3, seed: int = 0, c_shared: float | None = None,
               c_model: float | None = None, judge: JudgeModel | None = None, judged: int = 0) -> float:
    """The least a router whose text model has learned all it can from ``labels`` thumbs
    pays for satisfaction ``target``, as a multiple of the static mixture at ``alpha``: on
    a seeded half of the log, the contextual router's text model (its default penalties,
    or those given) is fitted on ``labels`` outcomes drawn uniformly over that half's
    requests and models, and, with a ``judge``, on ``judged`` more of them as its
    calibrated verdict ``P(y = 1 | verdict)`` (a soft label, as the router learns from
    verdicts; the calibration from the judge's error rates at each model's accuracy); on
    the other half, each request is served at the price (or time-share of two) whose true
    satisfaction is ``target``. Perfect control and no learning while serving, so no router
    with this text model and these labels pays less (mean over ``fits`` label draws);
    other penalties give another floor (``benchmarks/bench_preflight.py --penalties``). A
    log of outcomes for every model on every request is needed (a benchmark log)."""
    from .policies import ContextualConfig
    from .policies.text_model import fit_multitask_logistic, multitask_predictions

    solved = np.asarray(solved, np.float64)
    costs = np.asarray(costs, np.float64)
    n, M = solved.shape
    if len(embeddings) != n or n < 4:
        raise ValueError(f"text_floor needs one embedding per request and at least 4 requests (got {len(embeddings)} "
                         f"embeddings for {n} requests)")
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    learn, held = order[: n // 2], order[n // 2:]
    labels = int(min(max(labels, 1), len(learn) * M))
    judged = int(min(max(judged, 0), len(learn) * M - labels)) if judge is not None else 0
    ctx = ContextualConfig()
    c_shared = ctx.c_shared if c_shared is None else float(c_shared)
    c_model = ctx.c_model if c_model is None else float(c_model)
    mixture = static_mixture_lp(solved[held].mean(0), costs[held].mean(0), alpha)[1]
    if judge is not None:  # P(y = 1 | verdict) per model: [verdict 0, verdict 1]
        calib = np.column_stack(verdict_calibration(solved[learn].mean(0), judge)[1:])
    out = []
    for k in range(fits):
        draw = np.random.default_rng([seed, k])
        pick = draw.choice(len(learn) * M, labels + judged, replace=False)
        rows, models = learn[pick // M], pick % M
        y = solved[rows, models].copy()
        if judged:
            verdict = judge.corrupt(y[labels:].astype(np.int8), draw)
            y[labels:] = calib[models[labels:], verdict]
        theta = fit_multitask_logistic(np.asarray(embeddings[rows], np.float64), models, y, M, c_shared, c_model)
        P = multitask_predictions(theta, embeddings[held], M)
        out.append(routed_cost(P, solved[held], costs[held], target))
    return float(np.mean(out)) / mixture if mixture > 0 else math.inf


def check_text_floor(check: Preflight, solved: np.ndarray, costs: np.ndarray, embeddings: np.ndarray,
                     **penalties: float) -> tuple[float, int, int]:
    """:func:`text_floor` at a pre-flight check's target, with the labels its window gives
    (its thumbs rate, and with its judge the verdicts on its budget's share of the rest),
    the judge's calls added: ``(floor, thumbs, verdicts)``. ``penalties``: ``c_shared``,
    ``c_model`` (default the router's)."""
    cfg = check.config
    n = min(cfg.window, len(solved))
    labels = int(round(cfg.feedback_rate * n))
    judged = int(round((1.0 - cfg.feedback_rate) * cfg.judge_budget * n)) if cfg.judge is not None else 0
    floor = text_floor(solved, costs, embeddings, cfg.alpha, check.target, labels, judge=cfg.judge, judged=judged,
                       **penalties)
    return floor + check.ratio(check.judge_calls * check.judge_cost), labels, judged
