"""What the contextual policy claims about its SLA, and the estimate behind the claim.

**Estimate (prediction-powered, doubly robust).** Step t served a model whose text model
predicts satisfaction ``p_t``. Where an LLM judge read the served answer, its verdict
``j_t`` refines that prediction through a calibration fitted on *earlier* steps that have
both a verdict and the user's thumbs: ``g_t = P(y = 1 | j_t, p_t)`` (a three-parameter
logistic regression on ``[1, logit p, j]``; the judge's error rates are never assumed).
The user's thumbs, given with probability ``phi`` independently of the verdict, rectify it::

    s_t = g_t + L_t (y_t - g_t) / phi

``g_t`` depends only on the past, so ``sum_t (s_t - y_t)`` is a martingale: the estimate is
unbiased however wrong the text model or the judge is (a judge 7 points too harsh makes
``g`` worse, never the estimate biased; Angelopoulos et al., Science 2023). Each step adds
``(1 - phi) / phi * E[(y - g)^2]`` to its variance, estimated from the labelled steps'
residuals, separately for judged and unjudged steps (a good judge shrinks the first).
That is ``variance="running"``: each step is priced, as it is accounted, at the mean of all
residuals so far. ``variance="labelled"`` sums instead each thumbed step's own
``(1 - phi) / phi^2 (y - g)^2``, the Horvitz-Thompson estimate of the window's
``sum_t (1 - phi) / phi (y_t - g_t)^2`` (unbiased however the residuals change), and
projects the steps to come from the newest residuals: a text model that learns makes
its later residuals smaller than the mean of all, which the running one overstates.

The rectification holds only if ``g_t`` is the prediction the step would have had without
its thumbs, so whether a step goes to the judge must not depend on whether it was rated:
a judge on a budget reads a share ``b`` of all answers, drawn when the answer is served
(rated ones give its calibration pairs; :attr:`Certificate.judge_share` is ``b`` as
measured). A rated answer outside the draw may be read too once its thumbs came, for a
calibration pair only (:meth:`Certificate.calibrate`): that verdict never becomes a
step's prediction, so it may depend on the thumbs. Thumbs that arrive after their step
was accounted rectify it then (:meth:`Certificate.late_thumbs`); ``phi`` is then the
share of steps whose thumbs were due, not of all steps: with thumbs ``d`` requests late
(``d`` the mean delay so far) the last ``d`` steps cannot have theirs yet, and dividing by
all steps inflated every correction. Those last steps' corrections are still to come, so
the window's count adds the text model's mean error so far (the corrections per due step)
for each of them, and its variance; late thumbs for a step of an earlier window correct
nothing in this one. docs/RESULTS.md ("A judge on a share of the requests") measures each
rule against its breach.

**Bound.** ``guarantee="window"`` (default): for each window of ``N`` requests (the stream
in simulation; a setting in a service, windows then follow each other),
``P(satisfied share of the window < (sum s - z sqrt(V)) / N) <= delta`` with ``z`` the
normal quantile of ``1 - delta``: a fixed-horizon bound from the martingale central limit
theorem, a normal approximation whose coverage the tests check on streams where the truth
is known. ``guarantee="anytime"``: a confidence sequence, valid at every step at once, the
one-sided normal-mixture boundary ``sqrt((V + rho) (log((V + rho) / rho) + 2 log(1 / delta)))``
(Howard et al. 2021; asymptotic, as the increments are bounded but not Gaussian), about
twice as wide at the end of a window.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

import numpy as np

from .schedule import label_share

#: calibration pairs kept (the newest); a refit when their count grew by a quarter
MAX_PAIRS = 20_000
#: how the bound's variance is estimated (``Certificate(variance=...)``)
VARIANCES = ("running", "labelled")
#: ``variance="labelled"``: the number of newest residuals the projection of the steps to
#: come mostly reads (each older one fades by ``1 - 1 / RECENT_RESIDUALS``)
RECENT_RESIDUALS = 256
#: anytime mode's mixture scale, in variance units of the satisfied count (the boundary is
#: tightest near V = rho; fixed in advance, as its validity requires)
RHO = 250.0


def _logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def fit_calibration(F: np.ndarray, y: np.ndarray, ridge: float = 1e-2, iters: int = 25) -> np.ndarray:
    """Logistic regression of ``y`` on features ``F`` by Newton's method (a tiny ridge keeps it
    finite when the classes separate); deterministic, float64."""
    w = np.zeros(F.shape[1])
    for _ in range(iters):
        z = F @ w
        q = 1.0 / (1.0 + np.exp(-z))
        g = F.T @ (q - y) + ridge * w
        H = (F * (q * (1 - q))[:, None]).T @ F + ridge * np.eye(F.shape[1])
        step = np.linalg.solve(H, g)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return w


class Certificate:
    """The running estimate, its variance and the bound (see the module docstring)."""

    def __init__(self, alpha: float, delta: float, guarantee: str, window: int, rectify: bool = True,
                 bank: float = 1.0, variance: str = "running"):
        if variance not in VARIANCES:
            raise ValueError(f"variance must be one of {VARIANCES}, got {variance!r}")
        self.variance = variance
        self.bank = float(bank)  # share of the window by which the final margin is to be banked
        self.rectify = bool(rectify)  # False: trust the predictions (the ablation of the thumbs' correction)
        self.alpha = float(alpha)
        self.delta = float(delta)
        self.guarantee = guarantee
        self.window = int(window)
        if self.window < 1:
            raise ValueError(f"the SLA window must be at least 1 request, got {window}")
        self.z = NormalDist().inv_cdf(1.0 - self.delta)
        # the at-risk test's quantile: warn when a miss is likelier than 2 delta
        self.z_risk = NormalDist().inv_cdf(1.0 - min(2.0 * self.delta, 0.5))
        # the current window: steps, estimated satisfied count, its variance
        self.t = 0
        self.dr = 0.0
        self.var = 0.0
        self.n_windows = 0
        # over all steps: the thumbs rate, residuals (unjudged, judged), judge calibration
        self.steps = 0
        self.thumbs = 0
        self.judged = 0
        # steps accounted without thumbs, and how many of them a judge read: the judge's
        # budget as the estimate sees it (judge_share)
        self.open_steps = 0
        self.open_judged = 0
        # steps between each step and its thumbs, summed (0 for thumbs given with the step),
        # and the thumbs' corrections (s - g) summed over all windows
        self.delay_sum = 0.0
        self.rect_all = 0.0
        self.r2 = np.zeros(2)
        self.r2_n = np.zeros(2)
        # the same residuals, the older ones fading (``variance="labelled"``'s projection)
        self.r2_recent = np.zeros(2)
        self.r2_recent_n = np.zeros(2)
        self.pairs_buf = np.zeros((MAX_PAIRS, 3))  # (logit p, verdict, thumbs), a ring
        self.pairs_n = 0
        self.calib: np.ndarray | None = None
        self.next_calib = 16
        # the at-risk signal, per SLA window: the first warning of the current window, the
        # step the warning now standing began (None when clear), windows warned so far
        self.first_at_risk: int | None = None
        self.at_risk = False
        self.at_risk_since: int | None = None
        self.windows_at_risk = 0
        self._margin: tuple[tuple, float] | None = None  # final_margin's memo

    # -- the estimate -------------------------------------------------------------------
    @property
    def phi(self) -> float:
        """Running share of steps with thumbs (a Laplace-smoothed, predictable estimate),
        among the steps whose thumbs were due: all but the mean delay of the thumbs so far."""
        return self._phi(self.delay_sum / self.thumbs if self.thumbs else 0.0)

    def _phi(self, lag: float) -> float:
        return label_share(float(self.steps), float(self.thumbs), float(lag))

    def value(self, p: float, judge: float | None) -> float:
        """The prediction ``g`` for a step: the text model's, or the calibrated judge's."""
        if judge is None or self.calib is None:
            return float(p)
        z = float(self.calib @ np.array([1.0, _logit(p), judge]))
        return 1.0 / (1.0 + math.exp(-z))

    def residual_var(self, judged: bool, recent: bool = False) -> float:
        """Mean squared residual of the judged or unjudged steps; ``recent``: over the newest
        (each older one fading by ``1 - 1 / RECENT_RESIDUALS``), since a text model that
        learns leaves the steps to come nearer its latest residuals than the mean of all."""
        k = int(judged)
        if judged and self.r2_n[1] < 8:  # too few judged residuals: the unjudged ones
            k = 0
        sq, n = (self.r2_recent, self.r2_recent_n) if recent else (self.r2, self.r2_n)
        return float((sq[k] + 0.25) / (n[k] + 1.0))

    def _residual(self, k: int, sq: float) -> None:
        """One squared residual of kind ``k`` (0: unjudged, 1: judged)."""
        self.r2[k] += sq
        self.r2_n[k] += 1
        fade = 1.0 - 1.0 / RECENT_RESIDUALS
        self.r2_recent[k] = fade * self.r2_recent[k] + sq
        self.r2_recent_n[k] = fade * self.r2_recent_n[k] + 1.0

    @property
    def judge_share(self) -> float:
        """Share of the steps accounted without thumbs that a judge read (1 before there is
        one): the chance that a step is judged, rated or not (the judge's budget)."""
        return self.open_judged / self.open_steps if self.open_steps else 1.0

    def step_var(self) -> float:
        """Variance one upcoming step adds (at the judge's share of the steps)."""
        phi = self.phi
        share = self.judge_share if self.judged else 0.0
        recent = self.variance == "labelled"
        r2 = share * self.residual_var(True, recent) + (1 - share) * self.residual_var(False, recent)
        return (1.0 - phi) / phi * r2

    def account(self, p: float, judge: float | None, feedback: float | None) -> tuple[float, float]:
        """Step accounted; returns ``(s, g)``: its share of the estimate and its prediction."""
        if self.guarantee == "window" and self.t >= self.window:
            self.new_window()
        g = self.value(p, judge)
        phi = self.phi
        if self.variance == "running":
            self.var += (1.0 - phi) / phi * self.residual_var(judge is not None)
        elif feedback is not None:
            self.var += (1.0 - phi) / phi ** 2 * (feedback - g) ** 2
        s = g
        if feedback is not None:
            s = g + (feedback - g) / phi if self.rectify else feedback
            self.rect_all += s - g
            self._learn(p, g, judge, feedback)
        else:
            self.open_steps += 1
            self.open_judged += judge is not None
        self.dr += s
        self.t += 1
        self.steps += 1
        self.thumbs += feedback is not None
        self.judged += judge is not None
        return s, g

    def late_thumbs(self, p: float, g: float, judge: float | None, feedback: float, age: int = 0) -> float:
        """Thumbs for a step already accounted without them, ``age`` steps ago; returns what
        they add to its value (in window mode nothing, for a step of an earlier window)."""
        age = max(int(age), 0)
        # phi before these thumbs, with their delay in the lag: the first late thumbs would
        # otherwise divide by every step, due or not (the first correction tens of times too big)
        phi = self._phi((self.delay_sum + age) / (self.thumbs + 1))
        ds = (feedback - g) / phi if self.rectify else feedback - g
        self.rect_all += ds
        if self._closed(age):
            ds = 0.0  # its window is closed: its thumbs teach, they do not count here
        elif self.variance == "labelled":
            self.var += (1.0 - phi) / phi ** 2 * (feedback - g) ** 2
        self.dr += ds
        self.thumbs += 1
        self.delay_sum += age
        self._learn(p, g, judge, feedback)
        return ds

    def late_judge(self, p: float, g: float, judge: float, age: int = 0) -> float:
        """A judge verdict for a step accounted without one and without thumbs, ``age``
        steps ago: its prediction becomes the calibrated judge's (in window mode, for a step
        of an earlier window, nothing changes in this one); returns the new prediction."""
        g_new = self.value(p, judge)
        phi = self.phi
        if not self._closed(age):
            self.dr += g_new - g
            if self.variance == "running":
                self.var += (1.0 - phi) / phi * (self.residual_var(True) - self.residual_var(False))
        self.judged += 1
        self.open_judged += 1
        return g_new

    def _learn(self, p: float, g: float, judge: float | None, y: float) -> None:
        """A rated step's residuals (``g``: its prediction with the judge's verdict where there
        is one) and calibration pair. While the judge reads only some steps, a rated one it
        read also measures the text model's own residual, which the unjudged ones need."""
        self._residual(int(judge is not None), (y - g) ** 2)
        if judge is None:
            return
        if self.judge_share < 1.0:
            self._residual(0, (y - float(p)) ** 2)
        self._pair(p, judge, y)

    def calibrate(self, p: float, judge: float, y: float) -> None:
        """A verdict on a rated step's answer read only to calibrate the judge (the step kept
        the text model's prediction ``p``): a calibration pair, and a sample of the judged
        steps' residual, since the judge read it whatever its thumbs say."""
        self._residual(1, (y - self.value(p, judge)) ** 2)
        self._pair(p, judge, y)

    def _pair(self, p: float, judge: float, y: float) -> None:
        """One calibration pair; the calibration is refitted when the pairs grew by a quarter."""
        self.pairs_buf[self.pairs_n % MAX_PAIRS] = (_logit(p), judge, y)
        self.pairs_n += 1
        n = self.pairs_n
        if n >= self.next_calib:
            pairs = self.pairs
            if 0 < pairs[:, 2].sum() < len(pairs):
                F = np.column_stack([np.ones(len(pairs)), pairs[:, 0], pairs[:, 1]])
                self.calib = fit_calibration(F, pairs[:, 2])
            self.next_calib = max(n + 1, int(math.ceil(n * 1.25)))

    @property
    def pairs(self) -> np.ndarray:
        """The kept calibration pairs (order does not matter to the fit)."""
        return self.pairs_buf[:min(self.pairs_n, MAX_PAIRS)]

    def _closed(self, age: int) -> bool:
        """Whether the step ``age`` steps ago belongs to an SLA window already closed."""
        return self.guarantee == "window" and age >= self.t

    def pending(self) -> float:
        """Steps of this window whose thumbs, if any, are not due yet (the mean delay)."""
        return min(self.delay_sum / self.thumbs, float(self.t)) if self.delay_sum else 0.0

    def _due(self) -> float:
        """Steps so far whose thumbs were due (all but the mean delay; at least one). Read
        only while steps are pending, so after some thumbs."""
        return max(self.steps - self.delay_sum / self.thumbs, 1.0)

    def count(self) -> float:
        """The window's estimated satisfied count: the steps' values, plus for each step
        whose thumbs are not due yet the corrections per due step so far (an unbiased
        estimate of the text model's mean error, which its thumbs would have corrected)."""
        k = self.pending()
        return self.dr + k * self.rect_all / self._due() if k else self.dr

    def count_var(self) -> float:
        """The count's variance: the steps', plus that of the pending steps' correction (and,
        where the variance is read off the labelled steps, that of their own thumbs to come)."""
        k = self.pending()
        if not k:
            return self.var
        own = k * self.step_var() if self.variance == "labelled" else 0.0
        return self.var + own + k * k * self.step_var() / self._due()

    def new_window(self) -> None:
        """The next SLA window: its estimate, variance and warnings start afresh (a warning of
        the last window says nothing of this one; what was learned about residuals and the
        judge stays)."""
        self.t, self.dr, self.var = 0, 0.0, 0.0
        self.n_windows += 1
        self.at_risk, self.at_risk_since, self.first_at_risk = False, None, None

    # -- the bound ----------------------------------------------------------------------
    def width(self, var: float) -> float:
        """Half-width of the one-sided bound on the satisfied count at variance ``var``."""
        if self.guarantee == "anytime":
            v = var + RHO
            return math.sqrt(v * (math.log(v / RHO) + 2.0 * math.log(1.0 / self.delta)))
        return self.z * math.sqrt(max(var, 0.0))

    def lower_count(self) -> float:
        return self.count() - self.width(self.count_var())

    def lower_bound(self) -> float:
        """The claimed lower bound on the satisfied share of the window so far."""
        return self.lower_count() / self.t if self.t else 0.0

    def estimate(self) -> float:
        return self.count() / self.t if self.t else 0.0

    def remaining(self) -> int:
        return max(self.window - self.t, 0)

    def final_margin(self) -> float:
        """Window mode: the bound's width expected at the window's end, in requests
        (memoised on what it is computed from: a step reads it three or four times)."""
        key = (self.var, self.t, self.window, self.steps, self.thumbs, self.judged, self.delay_sum,
               self.r2.tobytes(), self.r2_n.tobytes(), self.r2_recent.tobytes())
        if self._margin is None or self._margin[0] != key:
            self._margin = (key, self.width(self.count_var() + self.remaining() * self.step_var()))
        return self._margin[1]

    def shortfall(self) -> float:
        """How far the estimate is behind the path that ends the window with the bound at
        alpha (window mode: alpha plus the final margin's pro-rata share so far; anytime:
        the bound itself behind alpha), in requests."""
        if self.guarantee == "anytime":
            return self.alpha * self.t - self.lower_count()
        share = min(1.0, self.t / (self.bank * self.window))
        return self.alpha * self.t + share * self.final_margin() - self.count()

    def repay_rates(self) -> tuple[float, float] | None:
        """Window mode: ``(path, need)``, the path's rate now and the rate the rest of the
        window must average to end on the path's end (the path's rate plus the shortfall
        spread over the remaining requests); None in anytime mode (no end to repay by)."""
        if self.guarantee != "window":
            return None
        path = self.path_rate()
        return path, path + max(self.shortfall(), 0.0) / max(self.remaining(), 1)

    def path_rate(self) -> float:
        """Window mode: the path's rate now, alpha plus the final margin's pro-rata share
        while it is being banked."""
        banking = self.t < self.bank * self.window
        return self.alpha + (self.final_margin() / (self.bank * self.window) if banking else 0.0)

    def target_rate(self, h: float, h_min: float) -> float:
        """Satisfaction rate the next requests must reach: the path's rate plus the
        shortfall repaid over ``max(h_min, h t)`` requests (never beyond the window). In
        window mode a surplus is spent only beyond the bound's current width, and over the
        rest of the window: early estimates are noisy, and spending a lucky one on cheap
        models left deficits that only the best model could repay."""
        horizon = max(h_min, h * self.t)
        shortfall = self.shortfall()
        if self.guarantee == "window":
            horizon = min(horizon, max(self.remaining(), 1))
            base = self.path_rate()
            if shortfall < 0:
                # a surplus may be noise: only what the bound is sure of is spent, and
                # over the rest of the window (a deficit is repaid at once)
                shortfall = min(0.0, shortfall + self.width(self.count_var()))
                horizon = max(self.remaining(), 1)
        else:
            base = self.alpha
        return base + shortfall / horizon

    def check_risk(self, best_rate: float, step: int) -> bool:
        """SLA at risk: even serving the rest of the window at ``best_rate`` (an upper bound
        on the satisfaction the policy can deliver: the contextual policy's ``risk_rate``)
        leaves the window likely below alpha."""
        if self.guarantee == "window":
            # at risk: even at its best the window ends below alpha with probability above
            # 2 delta (a run that lands on its bound, as the controller aims to, is not)
            R = self.remaining()
            end = self.count() + R * best_rate - self.z_risk * math.sqrt(self.count_var() + R * self.step_var())
            risk = end < self.alpha * self.window
        else:  # anytime: the bound is behind alpha and even the best level is below it
            risk = self.lower_bound() < self.alpha and best_rate < self.alpha
        if risk and not self.at_risk:
            self.at_risk_since = int(step)
        elif not risk:
            self.at_risk_since = None
        self.at_risk = bool(risk)
        if risk and self.first_at_risk is None:
            self.first_at_risk = int(step)
            self.windows_at_risk += 1
        return self.at_risk

    def describe(self) -> str:
        """The claim in words. What holds is the bound: the satisfaction is at least the
        lower bound with probability ``1 - delta``. Ending a window with that bound at alpha
        is what the policy steers for, not a promise: a stream with too little headroom
        for its labels ends below it (and ``at_risk`` says so when it sees it coming). The
        chance that a window ends with its bound at alpha or above and still falls short is
        at most ``delta`` (the bound's own miss); a window's chance of meeting alpha is
        measured, never claimed (a share of runs whose bound cleared alpha may exceed
        ``delta`` where few runs clear it)."""
        conf = f"{100 * (1 - self.delta):g}%"
        a = f"{100 * self.alpha:g}%"
        if self.guarantee == "anytime":
            return (f"satisfaction of all requests so far >= its lower bound at every step at once, with probability "
                    f">= {conf} (asymptotic confidence sequence); the router steers to keep that bound at alpha {a} "
                    f"or above and flags at_risk when it cannot: the chance that the satisfaction so far is below alpha "
                    f"at any step where that bound is at alpha or above is at most {100 * self.delta:g}%")
        return (f"satisfaction over each window of {self.window} requests >= its lower bound with probability "
                f">= {conf} (fixed-horizon normal bound); the router steers to end each window with that bound at "
                f"alpha {a} or above and flags at_risk when it no longer can: the chance that a window ends there "
                f"and still falls below alpha is at most {100 * self.delta:g}%")

    # -- checkpoints --------------------------------------------------------------------
    _SCALARS = ("t", "dr", "var", "n_windows", "steps", "thumbs", "judged", "next_calib", "pairs_n", "window")

    def state_dict(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta = {k: repr(float(getattr(self, k))) for k in self._SCALARS}
        meta["first_at_risk"] = self.first_at_risk
        meta["at_risk"] = self.at_risk
        meta["at_risk_since"] = self.at_risk_since
        meta["windows_at_risk"] = self.windows_at_risk
        meta["open_steps"], meta["open_judged"] = self.open_steps, self.open_judged
        meta["delay_sum"] = repr(float(self.delay_sum))
        meta["rect_all"] = repr(float(self.rect_all))
        arrays = {"certificate.r2": self.r2.copy(), "certificate.r2_n": self.r2_n.copy(),
                  "certificate.r2_recent": self.r2_recent.copy(), "certificate.r2_recent_n": self.r2_recent_n.copy(),
                  "certificate.pairs": np.ascontiguousarray(self.pairs)}
        if self.calib is not None:
            arrays["certificate.calib"] = self.calib.copy()
        return meta, arrays

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        for k in self._SCALARS:
            v = float(meta[k])
            if not math.isfinite(v):
                raise ValueError(f"certificate state {k} is not finite")
            setattr(self, k, v if k in ("dr", "var") else int(v))
        fa = meta.get("first_at_risk")
        self.first_at_risk = None if fa is None else int(fa)
        self.at_risk = bool(meta.get("at_risk", False))
        # checkpoints before these fields: a standing warning began no later than the first
        since = meta.get("at_risk_since", self.first_at_risk if self.at_risk else None)
        self.at_risk_since = None if since is None or not self.at_risk else int(since)
        self.windows_at_risk = int(meta.get("windows_at_risk", int(self.first_at_risk is not None)))
        # checkpoints before the judge's share was kept: none measured yet (1 until it is)
        self.open_steps, self.open_judged = int(meta.get("open_steps", 0)), int(meta.get("open_judged", 0))
        if not 0 <= self.open_judged <= self.open_steps:
            raise ValueError("certificate state open_judged must be between 0 and open_steps")
        # checkpoints before delays were kept: none (thumbs taken as given with their steps)
        self.delay_sum = float(meta.get("delay_sum", 0.0))
        self.rect_all = float(meta.get("rect_all", 0.0))
        if not (math.isfinite(self.delay_sum) and self.delay_sum >= 0):
            raise ValueError("certificate state delay_sum must be finite and non-negative")
        if not math.isfinite(self.rect_all):
            raise ValueError("certificate state rect_all is not finite")
        for k in ("r2", "r2_n"):
            a = np.array(arrays[f"certificate.{k}"], np.float64).reshape(2)
            if not np.all(np.isfinite(a)):
                raise ValueError(f"certificate state {k} is not finite")
            setattr(self, k, a)
        # checkpoints before the newest residuals were kept: all of them, none faded
        for k, all_ in (("r2_recent", "r2"), ("r2_recent_n", "r2_n")):
            a = np.array(arrays.get(f"certificate.{k}", getattr(self, all_)), np.float64).reshape(2)
            if not np.all(np.isfinite(a)):
                raise ValueError(f"certificate state {k} is not finite")
            setattr(self, k, a)
        pairs = np.array(arrays["certificate.pairs"], np.float64).reshape(-1, 3)
        if not np.all(np.isfinite(pairs)) or len(pairs) > MAX_PAIRS:
            raise ValueError("certificate calibration pairs are malformed")
        self.pairs_buf[:len(pairs)] = pairs
        c = arrays.get("certificate.calib")
        self.calib = None if c is None else np.array(c, np.float64)
