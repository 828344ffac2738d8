"""A live run: several routers streamed side by side on one request order and feedback
plan, with the static mixture and the oracle as references, drawn as thinned chart frames."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd

from ..baselines import clairvoyant_oracle, static_mixture_lp
from ..data import RoutingData
from ..metrics import running_mean, thin_indices
from ..feedback import NO_FEEDBACK, judge_of, thumbs_of
from ..policies.schedule import data_driven_v
from ..policies.registry import POLICY_COLORS as ROUTER_COLORS
from ..policies.registry import info as policy_info
from ..policies.registry import names as router_modes
from ..simulator import Simulation
from .charts import (MAX_POINTS, RATIO_WINDOW, TOP_MODELS, ChartFrame, _chart_spec, _long,
                     _long_parts, color_encoding, cost_encodings)
from .settings import RunSettings
from .tables import LABEL_MODELS, display_scale

if TYPE_CHECKING:
    from ..preflight import Preflight

#: the band of the models a call-ratio chart groups together (zoos over ``TOP_MODELS``)
OTHER_COLOR = "#b0b0b0"
#: the two references drawn beside the routers
REFERENCES = ("static mixture", "oracle")
#: Live run records each router's own lower confidence bound every this many requests
LCB_EVERY = 250
#: the clairvoyant oracle (an LP over every request and model) is drawn up to this size
#: (requests x models); up to ORACLE_SYNC_CELLS it is solved before the first chart (well
#: under a second), above in a background thread (the 30,000 x 4 benchmark stream: ~5 s)
ORACLE_MAX_CELLS = 2_000_000
ORACLE_SYNC_CELLS = 50_000
#: the two lines per router of the belief chart: the satisfaction its queue used, the real one
BELIEF_KINDS = ("belief (thumbs, else estimate)", "real")


def belief_series(arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Running mean of the satisfaction values a router's queue used (``s_used``: the
    feedback where there was some, else its own estimate; where a step left it NaN, the
    delayed-feedback path, the estimate of the served model ``shat_served``) and the
    running real satisfaction (``satisfied``), from :meth:`Simulation.arrays`."""
    used = np.asarray(arrays["s_used"], np.float64)
    used = np.where(np.isfinite(used), used, np.asarray(arrays["shat_served"], np.float64))
    return running_mean(used), running_mean(arrays["satisfied"])


def _locked(method):
    """``method``, run holding its :class:`LiveRun`'s lock."""
    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return locked


class LiveView(NamedTuple):
    """What a page draws of a run at one moment, read in one go under the run's lock
    (:meth:`LiveRun.view`): the headline, the streaming charts by key, the trade-off chart."""
    headline: dict[str, Any]
    charts: dict[str, ChartFrame]
    tradeoff: ChartFrame


class LiveRun:
    """One session's streaming run: one :class:`Simulation` per router mode, side by side.

    Every router gets the same data, embeddings, seed and feedback settings, hence the same
    request order and feedback plan. The static mixture (the cheapest text-blind call mix
    whose mean accuracy reaches alpha, costed on the same requests) and the clairvoyant
    oracle (every label known) are the references. ``routers`` defaults to the settings'
    single ``mode``; with one router its series is called ``SLARouter``.

    Several threads may use one run at once: a dashboard click starts a new script thread
    while the old one may still be inside :meth:`step` (Streamlit's fast reruns stop the
    old thread only at its next Streamlit call), and a lazy download runs in a thread of its
    own. One re-entrant lock orders them: :meth:`step`, :meth:`step_if`, :meth:`view`,
    :meth:`headline`, :meth:`charts`, :meth:`tradeoff_chart` and :meth:`trace_csv` hold it,
    so a reader never sees half a tick and waits for a tick under way.
    """

    def __init__(self, data: RoutingData, embeddings: np.ndarray, settings: RunSettings,
                 routers: tuple[str, ...] | list[str] | None = None):
        routers = tuple(routers) if routers else (settings.mode,)
        if len(set(routers)) != len(routers) or any(m not in router_modes() for m in routers):
            raise ValueError(f"routers must be distinct modes of {', '.join(router_modes())}, got {routers!r}")
        self._lock = threading.RLock()
        self.data = data
        self.settings = settings
        self.routers = routers
        self.sims = {m: Simulation(data, embeddings, settings.simulation_config(data, m)) for m in routers}
        self.sim = self.sims[routers[0]]
        self.alpha = self.sim.config.router.alpha
        self.labels = {m: (m if len(routers) > 1 else "SLARouter") for m in routers}
        #: one judge call's cost (data's unit), counted in each router's operating cost
        self.judge_cost = settings.resolved_judge_cost(data)
        self._lcb: dict[str, tuple[list[int], list[float]]] = {m: ([], []) for m in routers}
        order = self.sim.order
        costs = np.asarray(data.costs[order], np.float64)  # stream order
        acc = data.solved.mean(axis=0)
        self.mixture_fractions, _, self.mixture_feasible = static_mixture_lp(acc, data.costs.mean(axis=0),
                                                                             self.alpha)
        self._mix_cum = np.cumsum(costs @ self.mixture_fractions)
        top = np.flatnonzero(acc >= acc.max() - 1e-12)
        self.best_model = int(top[np.argmin(data.costs.mean(axis=0)[top])])
        self._best_cum = np.cumsum(costs[:, self.best_model])
        self._single_cum = np.cumsum(costs, axis=0)
        mean_cost = data.costs.mean(axis=0)
        self._acc, self._mean_cost = acc, mean_cost
        grid = np.linspace(acc.min(), acc.max(), 21)
        self._frontier = np.array([[static_mixture_lp(acc, mean_cost, float(a))[1], a] for a in grid])
        self._oracle_cum: np.ndarray | None = None
        self._oracle_sat: np.ndarray | None = None
        cells = data.n_requests * data.n_models
        if cells <= ORACLE_SYNC_CELLS:
            self._oracle(embeddings)
        elif cells <= ORACLE_MAX_CELLS:  # seconds of LP: the charts add its line once it is solved
            threading.Thread(target=self._oracle, args=(embeddings,), daemon=True, name="live-oracle").start()

    @functools.cached_property
    def preflight_check(self) -> Preflight | None:
        """The pre-flight check of this run's SLA (:mod:`..preflight`): can the contextual
        router's bound end the stream at alpha with this feedback, and what does a router
        that certifies it pay at least; None without thumbs (nothing to certify with).
        Once per run: what it reads (alpha, the feedback and judge settings, the data) is
        the run's own, and a change to any of them makes a new run."""
        from ..judge import JUDGE_PRESETS
        from ..preflight import PreflightConfig, preflight

        s = self.settings
        if s.feedback_rate <= 0:
            return None
        cfg = PreflightConfig(alpha=self.alpha, feedback_rate=s.feedback_rate, window=self.data.n_requests,
                              judge=JUDGE_PRESETS[s.judge] if s.judge else None, judge_budget=s.judge_budget,
                              judge_cost=self.judge_cost)
        return preflight(self.data.solved.mean(axis=0), self.data.costs.mean(axis=0), cfg, self.data.models)

    def _oracle(self, embeddings: np.ndarray) -> None:
        data, cfg = self.data, self.sim.config
        oracle = clairvoyant_oracle(data, embeddings, self.alpha, cfg.seed, cfg.feedback_rate, feedback=cfg.feedback)
        route = np.empty(data.n_requests, np.int64)
        route[oracle.order] = oracle.model
        order = self.sim.order
        sat, cum = np.cumsum(data.solved[order, route[order]]), np.cumsum(data.costs[order, route[order]])
        with self._lock:  # a chart never draws one of the two without the other
            self._oracle_sat, self._oracle_cum = sat, cum

    @property
    def t(self) -> int:
        return min(s.t for s in self.sims.values())

    @property
    def n_requests(self) -> int:
        return self.sim.n_requests

    @property
    def done(self) -> bool:
        return all(s.done for s in self.sims.values())

    @_locked
    def step(self, n: int | None = None) -> int:
        """Serve the next ``n`` (default: a tick) requests with every router."""
        n = self.settings.per_tick if n is None else int(n)
        served = 0
        for m, sim in self.sims.items():
            a = sim.t
            end = min(a + max(n, 0), sim.n_requests)
            if not policy_info(m).claims_bound:  # no bound to record: one block
                sim.step(end - a)
            while sim.t < end:
                sim.step(min(LCB_EVERY - sim.t % LCB_EVERY, end - sim.t))
                ts, vs = self._lcb[m]
                ts.append(sim.t)
                vs.append(sim.router.certified_lower_bound())
            served = max(served, sim.t - a)
        return served

    def step_if(self, still: Callable[[], bool], n: int | None = None) -> bool:
        """:meth:`step`, only if ``still()`` (is the run still running?) says so when asked
        while holding the lock; whether it stepped. A pause recorded before a tick takes the
        lock stops that tick; a tick that took the lock first is waited for by every reader
        (:meth:`view`, :meth:`trace_csv`), so what a paused page draws is what it served."""
        with self._lock:
            if not still():
                return False
            self.step(n)
            return True

    @_locked
    def view(self) -> LiveView:
        """The headline, the streaming charts (by key) and the trade-off chart, all of
        the same moment (no tick lands between them)."""
        return LiveView(self.headline(), {cf.key: cf for cf in self.charts()}, self.tradeoff_chart())

    def v_note(self, mode: str) -> str:
        """How V applies to this router (its ``PolicyInfo.v_note``; empty: as shown)."""
        note = policy_info(mode).v_note
        return note.format(scale=self._v_scale(mode)) if note else ""

    def _v_scale(self, mode: str) -> float:
        """What the policy multiplies the settings' V by (its ``v_scale_field``; else 1)."""
        name = policy_info(mode).v_scale_field
        return float(getattr(self.sims[mode].config.router.settings, name)) if name else 1.0

    def expected_v(self, mode: str) -> float:
        """The V the run will use, before it starts: a fixed V as set; a data-driven V is
        Q_max * eps over the mean cost gap (dearest minus cheapest model per request),
        which the router measures as requests arrive, here taken from the whole data."""
        cfg = self.sims[mode].config.router.settings
        if not policy_info(mode).v_applies:
            return float("nan")
        if cfg.V is not None:
            v = float(cfg.V)
        else:
            order = np.argsort(self.data.costs.mean(axis=0), kind="stable")
            gap_sum = float(np.sum(self.data.costs[:, order[-1]] - self.data.costs[:, order[0]]))
            v = data_driven_v(cfg.q_max, cfg.eps, gap_sum, self.data.n_requests)
        return v * self._v_scale(mode)

    def router_headline(self, mode: str) -> dict[str, Any]:
        """One router's satisfaction against alpha, its SLA (met, missed, at risk), its
        operating cost (judge calls included) as a multiple of each reference (the static
        mixture, the most accurate model, and ``vs_mixture_same``, the static mixture that
        delivers the router's own satisfaction), V, Q, its own lower bound, and what it learned
        from: explored requests, thumbs, judge calls and the labels its predictor saw."""
        sim = self.sims[mode]
        k = sim.t
        scale, unit = display_scale(self.data.cost_unit)
        out: dict[str, Any] = {"mode": mode, "label": self.labels[mode], "color": ROUTER_COLORS[mode],
                               "q_label": policy_info(mode).queue_title, "v_note": self.v_note(mode),
                               "v_applies": policy_info(mode).v_applies,
                               "best_model": self.data.models[self.best_model], "raw_unit": self.data.cost_unit,
                               "status": sim.router.sla_status(),
                               # (confidence, requests covered) of its bound; None: it claims none
                               "bound_scope": sim.router.bound_scope()}
        if k == 0:
            return {**out, "served": 0, "cost": 0.0, "cost_raw": 0.0, "cost_unit": unit,
                    "satisfaction": float("nan"), "sla": "not started", "v": self.expected_v(mode), "q": 0.0,
                    "explored": 0, "explored_share": float("nan"), "labels": 0, "thumbs": 0, "judge_calls": 0,
                    "judge_spend": 0.0, "feedback": 0, "vs_mixture": float("nan"), "vs_best": float("nan"),
                    "vs_mixture_same": float("nan"), "lcb": float("nan")}
        s = sim.summary()
        a = self._served(mode, k)
        fb = np.asarray(a["feedback"])
        judge_spend = s.judged * self.judge_cost
        cost = float(s.operating_cost) + judge_spend
        best = float(self._best_cum[k - 1])
        mix = float(self._mix_cum[k - 1])
        same = self.mixture_cost_at(s.satisfaction, k)
        return {**out, "served": k, "cost": cost / scale, "cost_raw": cost, "cost_unit": unit,
                "satisfaction": s.satisfaction, "sla": "met" if s.sla_met else "missed", "v": s.final_v,
                "q": s.final_q, "explored": s.explored, "explored_share": s.explored / k,
                "labels": int(np.count_nonzero(a["explored"] & (fb != NO_FEEDBACK))),
                "thumbs": s.feedback, "judge_calls": s.judged,
                "judge_spend": judge_spend, "feedback": s.feedback,
                "vs_mixture": cost / mix if mix > 0 else float("nan"),
                "vs_best": cost / best if best > 0 else float("nan"),
                "vs_mixture_same": cost / same if same > 0 else float("nan"),
                "lcb": sim.router.certified_lower_bound()}

    def mixture_cost_at(self, satisfaction: float, k: int) -> float:
        """The cost of the first ``k`` requests under the static mixture (accuracies known in
        hindsight) that delivers ``satisfaction``: a router that must meet alpha in most
        runs delivers more than alpha, and this prices what it delivered without the text."""
        fractions = static_mixture_lp(self._acc, self._mean_cost, float(satisfaction))[0]
        return float(self._single_cum[k - 1] @ fractions)

    @_locked
    def headline(self) -> dict[str, Any]:
        """Requests served and, per router (``routers``), its headline; the first router's
        cost, satisfaction, SLA, V and Q also at the top level."""
        per = [self.router_headline(m) for m in self.routers]
        first = per[0]
        return {"served": self.t, "total": self.n_requests, "alpha": self.alpha, "cost_unit": first["cost_unit"],
                **{k: first[k] for k in ("cost", "satisfaction", "sla", "v", "q", "explored", "feedback")},
                "routers": per}

    def _router_colors(self) -> dict[str, str]:
        """Each router's label and its mode's colour ("SLARouter", one router, keeps it too)."""
        return {label: ROUTER_COLORS[m] for m, label in self.labels.items()}

    def _colors(self, names: list[str], title: str | None, columns: int | None = None) -> dict:
        return color_encoding("series", names, self.data.models, title, columns, own=self._router_colors())

    def _cost(self, arrays: dict[str, np.ndarray]) -> np.ndarray:
        """Per-request operating cost: the served model's, plus a judge call's where the
        judge gave a verdict (:func:`feedback.judge_of`)."""
        return arrays["cost"] + self.judge_cost * (judge_of(arrays["feedback"]) != NO_FEEDBACK)

    def _served(self, mode: str, k: int) -> dict[str, np.ndarray]:
        """Router ``mode``'s trace arrays (``Simulation.arrays``) cut to the first ``k``
        requests, so that every router's series end at the same request."""
        return {name: v[:k] for name, v in self.sims[mode].arrays().items()}

    def _band_title(self) -> str:
        """What the satisfaction chart's band is: each router's own lower bound, at its own
        confidence (the contextual mode's window certificate at 1 - delta, the others' 90%)."""
        levels = {}
        for m in self.routers:
            scope = self.sims[m].router.bound_scope()
            if scope is not None:
                levels.setdefault(f"{100 * scope[0]:.0f}%", []).append(self.labels[m])
        if not levels:
            return ""
        if len(levels) == 1:
            return f" (band: its own {next(iter(levels))} lower bound)"
        return " (band: each router's own lower bound, " + ", ".join(
            f"{lvl} for {', '.join(names)}" for lvl, names in levels.items()) + ")"

    @_locked
    def charts(self, max_points: int | None = None) -> list[ChartFrame]:
        """The streaming charts, each series thinned to about ``max_points`` (default
        ``MAX_POINTS`` shared by the routers, so a redraw costs about the same with three
        routers as with one): queue, cost, satisfaction, ``belief`` (the satisfaction each
        queue used against the real one), the call ratio per router (``ratio`` for the first,
        ``ratio:<mode>`` for the others) and ``events``. Everything is read from
        :meth:`Simulation.arrays` (the served steps)."""
        if max_points is None:
            max_points = max(500, MAX_POINTS // len(self.routers))
        k = self.t
        n = self.n_requests
        idx = thin_indices(k, max_points)
        t = idx + 1
        scale, unit = display_scale(self.data.cost_unit)
        labels = [self.labels[m] for m in self.routers]
        multi = len(self.routers) > 1

        def upto(values: list[np.ndarray]) -> list[float]:
            top = max((float(np.nanmax(v)) for v in values if len(v)), default=0.0)
            return [0.0, top * 1.05 if top > 0 else 1.0]
        out = []

        arrs = {m: self._served(m, k) for m in self.routers}
        qs = {self.labels[m]: arrs[m]["q"][idx] for m in self.routers}
        out.append(self._queue_chart(qs, t, labels, multi, n, upto))

        oracle = self._oracle_cum
        ref = thin_indices(k, max(2, max_points // 8))
        parts = [(self.labels[m], t, np.cumsum(self._cost(arrs[m]))[idx] / scale) for m in self.routers]
        if k:
            parts.append(("static mixture", ref + 1, self._mix_cum[ref] / scale))
            if oracle is not None:
                parts.append(("oracle", ref + 1, oracle[ref] / scale))
            parts += [(f"only {mname}", ref + 1, self._single_cum[ref, j] / scale)
                      for j, mname in enumerate(self.data.models)]
        names = labels + ["static mixture"] + (["oracle"] if oracle is not None else []) \
            + [f"only {mname}" for mname in self.data.models]
        color, dash = cost_encodings(names, self.data.models, self._router_colors(),
                                     "router, references, single models", REFERENCES)
        out.append(ChartFrame("cost", _long_parts(parts),
                              _chart_spec(f"Cumulative operating cost ({unit})", unit, color, n,
                                         y_domain=upto([p[2] for p in parts]), dash=dash)))

        sat_parts, lo = [], []
        for m in self.routers:
            sat_parts.append((self.labels[m], t, running_mean(arrs[m]["satisfied"])[idx]))
            ts, vs = self._lcb[m]
            band = np.full(len(t), np.nan, np.float32)
            if ts and policy_info(m).claims_bound:
                tt, vv = np.asarray(ts, float), np.asarray(vs, float)
                ok = np.isfinite(vv)
                if ok.any():
                    band = np.interp(t, tt[ok], vv[ok]).astype(np.float32)
                    band[t < tt[ok][0]] = np.nan
            lo.append(band)
        sat_frame = _long_parts(sat_parts)
        sat_frame["lo"] = np.concatenate(lo).astype(np.float32) if lo else np.zeros(0, np.float32)
        out.append(ChartFrame("satisfaction", sat_frame,
                              _chart_spec("Running request satisfaction" + self._band_title(),
                                         "satisfaction", self._colors(labels, "router" if multi else None), n,
                                         rule=self.alpha, rule_label=f"alpha = {100 * self.alpha:.1f}%",
                                         percent=True, y_domain=[0.0, 1.0], band=True)))

        # two smooth running means per router: half the points of the run's own series
        # keep a redraw as cheap as before the chart was added, with no visible change
        b_idx = thin_indices(k, max(2, max_points // 2))
        out.append(self._belief_chart(arrs, b_idx + 1, b_idx, labels, multi))

        band_idx = thin_indices(k, max(2, max_points // 4))
        lo_w = np.maximum(0, band_idx + 1 - RATIO_WINDOW)
        width = (band_idx + 1 - lo_w)[:, None]
        groups, group_names = self._model_groups(arrs)
        for i, m in enumerate(self.routers):
            model = groups[arrs[m]["model"]]
            g = len(group_names)
            counts = np.zeros((k + 1, g), np.int64)
            if k:
                np.cumsum(np.eye(g, dtype=np.int64)[model], axis=0, out=counts[1:])
            share = (counts[band_idx + 1] - counts[lo_w]) / np.maximum(width, 1)
            upper = np.cumsum(share, axis=1)  # bands stacked cheapest first
            ratio = _long(band_idx + 1, {name: upper[:, j] for j, name in enumerate(group_names)})
            ratio["lo"] = (ratio["value"].to_numpy() - share.T.reshape(-1)).astype(np.float32)
            title = f"Model call ratio{', ' + m if multi else ''} (last {RATIO_WINDOW} requests)"
            other = {group_names[-1]: OTHER_COLOR} if group_names[-1].startswith("other") else None
            color = color_encoding("series", group_names, self.data.models, "model (cheapest first)", own=other)
            out.append(ChartFrame("ratio" if i == 0 else f"ratio:{m}", ratio,
                                  _chart_spec(title, "share of calls", color, n, area=True, percent=True,
                                              y_domain=[0.0, 1.0])))

        judge = bool(self.settings.judge)
        kinds = ["exploration", "feedback"] + (["judge"] if judge else []) + ([] if multi else ["predictor update"])
        events, names = [], []
        for m in self.routers:
            explored = arrs[m]["explored"]
            code = arrs[m]["feedback"]
            thumbs = thumbs_of(code) != NO_FEEDBACK  # a judge's verdict is never counted as thumbs
            for label, mask in (("exploration", explored), ("feedback", thumbs), ("judge", judge_of(code) != NO_FEEDBACK),
                                ("predictor update", explored & (code != NO_FEEDBACK))):
                if label not in kinds:
                    continue
                pos = np.flatnonzero(mask)
                pos = pos[thin_indices(len(pos), max(2, max_points // 2))]
                events.append((pos + 1).astype(np.int32))
                names.append(f"{m}: {label}" if multi else label)
        ev = pd.DataFrame({
            "t": np.concatenate(events),
            "event": pd.Categorical.from_codes(np.repeat(np.arange(len(names), dtype=np.int8),
                                                         [len(e) for e in events]), categories=names)})
        if multi:
            ev["router"] = pd.Categorical(ev["event"].astype(str).str.split(":").str[0], categories=list(self.routers))
            color = color_encoding("router", list(self.routers), title=None)
        else:
            color = {"field": "event", "type": "nominal", "legend": None}
        spec = {"title": "Where exploration and feedback happened", "height": {"step": 30 if multi else 34},
                "mark": {"type": "tick", "thickness": 1.5, "opacity": 0.8},
                "encoding": {"x": {"field": "t", "type": "quantitative", "title": "request",
                                   "scale": {"domain": [0, max(n, 1)]}},
                             "y": {"field": "event", "type": "nominal", "title": None,
                                   "scale": {"domain": names}, "sort": names},
                             "color": color}}
        out.append(ChartFrame("events", ev, spec))
        return out

    def _model_groups(self, arrs: dict[str, dict[str, np.ndarray]]) -> tuple[np.ndarray, list[str]]:
        """Each model's band on the call-ratio charts: every model up to ``TOP_MODELS``;
        beyond, the ``TOP_MODELS - 1`` most called so far (all routers together) keep
        their own band, in cost order, and the rest share one "other (n models)" band."""
        models = list(self.data.models)
        if len(models) <= TOP_MODELS:
            return np.arange(len(models)), models
        calls = sum(np.bincount(a["model"], minlength=len(models)) for a in arrs.values())
        keep = np.sort(np.argsort(-calls, kind="stable")[:TOP_MODELS - 1])
        groups = np.full(len(models), len(keep), np.int64)
        groups[keep] = np.arange(len(keep))
        return groups, [models[j] for j in keep] + [f"other ({len(models) - len(keep)} models)"]

    def _queue_chart(self, qs: dict[str, np.ndarray], t: np.ndarray, labels: list[str], multi: bool, n: int,
                     upto) -> ChartFrame:
        """Each router's queue. A policy whose queue is another quantity on another scale
        than the paper's Q (``PolicyInfo.own_queue_axis``, e.g. a certified shortfall)
        gets, beside other routers, its own axis on the right, so that neither is squashed
        flat by the other."""
        color = self._colors(labels, "router" if multi else None)
        own_modes = [m for m in self.labels if policy_info(m).own_queue_axis]
        own = [self.labels[m] for m in own_modes]
        what = ", ".join(f"{m}: {policy_info(m).queue_title}" for m in own_modes)
        if not multi or not own or len(own) == len(labels):
            return ChartFrame("queue", _long(t, qs), _chart_spec(
                "Virtual queue Q_t" + (f" ({what})" if own else ""), "Q", color, n,
                y_domain=upto(list(qs.values()))))
        frame = _long(t, qs)
        others = [lb for lb in labels if lb not in own]
        left = _chart_spec("", f"Q ({', '.join(others)})", color, n,
                           y_domain=upto([qs[lb] for lb in others]))["layer"][0]
        left["transform"] = [{"filter": {"field": "series", "oneOf": others}}]
        right_title = ", ".join(f"{policy_info(m).queue_title} ({m})" for m in own_modes)
        right = _chart_spec("", right_title, color, n,
                            y_domain=upto([qs[lb] for lb in own]))["layer"][0]
        right["transform"] = [{"filter": {"field": "series", "oneOf": own}}]
        right["encoding"] = {**right["encoding"], "y": {**right["encoding"]["y"],
                                                        "axis": {"orient": "right", "titleColor": ROUTER_COLORS[own_modes[0]]}}}
        right_what = ", ".join(f"{m}'s {policy_info(m).queue_title}" for m in own_modes)
        return ChartFrame("queue", frame, {"title": f"Virtual queue Q_t (right axis: {right_what})",
                                           "height": 220, "layer": [left, right],
                                           "resolve": {"scale": {"y": "independent"}}})

    def _belief_chart(self, arrs: dict[str, dict[str, np.ndarray]], t: np.ndarray, idx: np.ndarray,
                      labels: list[str], multi: bool) -> ChartFrame:
        """Per router, the running mean of the satisfaction its queue used against the real
        running satisfaction, with alpha: a missed SLA with Q near 0 shows up as a belief
        line above alpha while the real line is below it (the queue was told all is well)."""
        values = []
        for m in self.routers:
            believed, real = belief_series(arrs[m])
            values += [believed[idx], real[idx]]
        n_lines = len(values)
        frame = pd.DataFrame({
            "t": np.tile(t, n_lines).astype(np.int32),
            "series": pd.Categorical.from_codes(np.repeat(np.arange(n_lines, dtype=np.int16) // 2, len(t)),
                                                categories=labels),
            "value": (np.concatenate(values) if values else np.zeros(0)).astype(np.float32),
            "kind": pd.Categorical.from_codes(np.repeat(np.arange(n_lines, dtype=np.int8) % 2, len(t)),
                                              categories=list(BELIEF_KINDS))})
        dash = {"field": "kind", "type": "nominal", "sort": list(BELIEF_KINDS),
                "scale": {"domain": list(BELIEF_KINDS), "range": [[6, 3], [1, 0]]},
                "legend": {"title": None, "orient": "bottom", "direction": "vertical", "symbolType": "stroke",
                           "labelLimit": 0}}
        return ChartFrame("belief", frame, _chart_spec(
            "What the queue believes against real satisfaction", "running satisfaction",
            self._colors(labels, "router" if multi else None), self.n_requests, rule=self.alpha,
            rule_label=f"alpha = {100 * self.alpha:.1f}%", percent=True, y_domain=[0.0, 1.0], dash=dash))

    @_locked
    def tradeoff_chart(self) -> ChartFrame:
        """Cost per request against satisfaction: each router a point that moves as the run
        goes on; the single models (whole data), the static-mixture frontier (the cheapest
        text-blind mix for each target) and the oracle so far stay put or trail below."""
        k = self.t
        data = self.data
        oracle, oracle_sat = self._oracle_cum, self._oracle_sat  # set by a thread: sat first
        acc, mean_cost = data.solved.mean(axis=0), data.costs.mean(axis=0)
        pts: list[tuple[str, float, float]] = [(m, float(mean_cost[j]), float(acc[j]))
                                               for j, m in enumerate(data.models)]
        for m in self.routers:
            if k:
                a = self._served(m, k)
                pts.append((self.labels[m], float(self._cost(a).mean()), float(a["satisfied"].mean())))
        if oracle is not None and oracle_sat is not None and k:
            pts.append(("oracle", float(oracle[k - 1] / k), float(oracle_sat[k - 1] / k)))
        frame = pd.DataFrame({"series": [p[0] for p in pts], "cost": np.array([p[1] for p in pts], np.float64),
                              "satisfaction": np.array([p[2] for p in pts], np.float64), "kind": "point",
                              "who": ["model"] * data.n_models + ["router"] * (len(pts) - data.n_models)})
        front = pd.DataFrame({"series": "static mixture", "cost": self._frontier[:, 0],
                              "satisfaction": self._frontier[:, 1], "kind": "frontier"})
        frame = pd.concat([frame, front], ignore_index=True)
        names = [self.labels[m] for m in self.routers] + ["static mixture"] \
            + (["oracle"] if oracle is not None else []) + list(data.models)
        # up to LABEL_MODELS models are named beside their points; more would collide, so
        # they are named in a legend below (squares, where routers are circles)
        label_models = data.n_models <= LABEL_MODELS
        color = self._colors(names, None if label_models else "models (squares), routers and references")
        lo, hi = float(np.min(mean_cost)), float(np.max(mean_cost))
        x = {"field": "cost", "type": "quantitative", "title": f"mean cost per request ({data.cost_unit}, log)",
             "scale": {"type": "log", "domain": [lo / 1.5, hi * 1.5]}}
        sats = np.concatenate([frame["satisfaction"].to_numpy(float), [float(self.alpha)]])
        y = {"field": "satisfaction", "type": "quantitative", "title": "satisfaction", "axis": {"format": "%"},
             "scale": {"domain": [max(0.0, float(np.nanmin(sats)) - 0.03), min(1.0, float(np.nanmax(sats)) + 0.03)]}}
        one = {"values": [{"rule": float(self.alpha), "label": f"alpha = {100 * self.alpha:.1f}%"}]}
        spec = {"title": "Cost against satisfaction (routers move as they serve)",
                "height": 260, "layer": [
                    {"transform": [{"filter": "datum.kind == 'frontier'"}],
                     "mark": {"type": "line", "strokeDash": [6, 3], "clip": True},
                     "encoding": {"x": x, "y": y, "color": color, "order": {"field": "satisfaction"}}},
                    {"transform": [{"filter": "datum.kind == 'point'"}],
                     "mark": {"type": "point", "filled": True, "size": 110, "clip": True},
                     "encoding": {"x": x, "y": y, "color": color,
                                  "shape": {"field": "who", "type": "nominal", "legend": None,
                                            "scale": {"domain": ["model", "router"], "range": ["square", "circle"]}},
                                  "tooltip": [{"field": "series"}, {"field": "cost", "format": ".4g"},
                                              {"field": "satisfaction", "format": ".1%"}]}},
                    {"transform": [{"filter": "datum.kind == 'point'" + ("" if label_models else
                                                                         " && datum.who != 'model'")}],
                     "mark": {"type": "text", "align": "left", "dx": 7, "dy": -7, "fontSize": 11,
                              "fontWeight": "bold"},
                     "encoding": {"x": x, "y": y, "text": {"field": "series"}, "color": color}},
                    {"data": one, "mark": {"type": "rule", "strokeDash": [6, 4], "color": "#c0392b"},
                     "encoding": {"y": {"field": "rule", "type": "quantitative"}}}]}
        return ChartFrame("tradeoff", frame, spec)

    @_locked
    def trace_csv(self) -> bytes:
        """Every request served so far; with several routers, one block per router (column
        ``router``)."""
        if len(self.routers) == 1:
            return self.sim.trace().to_csv(index=False).encode("utf-8")
        frames = []
        for m in self.routers:
            tr = self.sims[m].trace()
            tr.insert(0, "router", m)
            frames.append(tr)
        return pd.concat(frames, ignore_index=True).to_csv(index=False).encode("utf-8")
