"""UI-free pieces of the dashboard: settings that travel in a URL, a live run with chart
frames thinned for drawing, and a hand-feedback session on the per-request router API.

Nothing here imports Streamlit: the pages only read widgets, call these objects and draw
what they return. Every object that learns (router, queue, trace) is created per user
session by the caller; nothing here is shared between sessions.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from .data import DEFAULT_COST, RoutingData, midpoint_alpha
from .metrics import running_mean, thin_indices
from .router import MODES as ROUTER_MODES
from .router import NO_FEEDBACK, Decision, RouterConfig, SLARouter
from .simulator import Simulation, SimulationConfig, stream_plan

#: points per plotted series; the full history is a download. The run's own series (Q,
#: satisfaction, its cumulative cost) get all of them; smooth reference series get fewer
#: (single-model cost lines: 1/8, call-ratio bands: 1/4, event ticks: 1/2 per kind), which
#: keeps a browser redraw cheap without visible change.
MAX_POINTS = 2000
#: requests in the moving window of the model-call-ratio chart
RATIO_WINDOW = 200
ENCODER_CHOICES = ("minilm", "hashing")
SOURCES = ("demo", "path", "upload")


# -- settings ---------------------------------------------------------------------------
def _num(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


@dataclass(frozen=True)
class DataSpec:
    """Which data the session works on: source, routing cost, benchmarks, encoder."""

    source: str = "demo"
    path: str = ""
    cost: str = DEFAULT_COST
    benchmarks: tuple[str, ...] = ()  # empty: all benchmarks
    encoder: str = "minilm"

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {self.source!r}")
        if self.source != "demo" and not str(self.path).strip():
            raise ValueError(f"source {self.source!r} needs a file path")
        if not isinstance(self.cost, str) or not self.cost.strip():
            raise ValueError("cost must name a per-model metric such as 'energy_joules'")
        if not isinstance(self.benchmarks, tuple) or not all(isinstance(b, str) for b in self.benchmarks):
            raise ValueError("benchmarks must be a tuple of names")
        if not isinstance(self.encoder, str) or not self.encoder.strip():
            raise ValueError("encoder must be 'minilm', 'hashing' or 'hf:<id or path>'")


@dataclass(frozen=True)
class RunSettings:
    """Router and stream settings shared by Live run, Feedback by hand and Experiments.

    ``alpha=None`` means the data's midpoint alpha (halfway between the accuracies of the
    two most expensive models). ``V`` is used when ``fixed_v``; otherwise V is data-driven
    from ``q_max`` and ``eps``.
    """

    alpha: float | None = None
    c: float = 0.1
    fixed_v: bool = False
    V: float = 1e-5
    q_max: float = 30.0
    eps: float = 0.001
    feedback_rate: float = 0.2
    seed: int = 42
    per_tick: int = 200
    feedback_model: str = "iid"
    mode: str = "paper"

    def __post_init__(self) -> None:
        if self.alpha is not None and not 0.0 < _num(self.alpha, "alpha") < 1.0:
            raise ValueError(f"alpha must be strictly between 0 and 1, got {self.alpha!r}")
        if _num(self.c, "c") < 0:
            raise ValueError(f"c must be >= 0, got {self.c!r}")
        for name in ("V", "q_max", "eps"):
            if _num(getattr(self, name), name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not 0.0 <= _num(self.feedback_rate, "feedback_rate") <= 1.0:
            raise ValueError(f"feedback rate must be in [0, 1], got {self.feedback_rate!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        if isinstance(self.per_tick, bool) or not isinstance(self.per_tick, (int, np.integer)) \
                or not 1 <= self.per_tick <= 100_000:
            raise ValueError(f"requests per tick must be an integer in [1, 100000], got {self.per_tick!r}")
        if not isinstance(self.fixed_v, bool):
            raise ValueError("fixed_v must be True or False")
        if self.mode not in ROUTER_MODES:
            raise ValueError(f"router mode must be one of {', '.join(ROUTER_MODES)}, got {self.mode!r}")

    def resolved_alpha(self, data: RoutingData) -> float:
        return float(self.alpha) if self.alpha is not None else midpoint_alpha(data)

    def router_config(self, data: RoutingData) -> RouterConfig:
        return RouterConfig(alpha=self.resolved_alpha(data), c=float(self.c),
                            V=float(self.V) if self.fixed_v else None,
                            q_max=float(self.q_max), eps=float(self.eps), mode=self.mode)

    def simulation_config(self, data: RoutingData) -> SimulationConfig:
        extra = {}
        if self.feedback_model != "iid":
            extra = feedback_model_fields(self.feedback_model)
        return SimulationConfig(self.router_config(data), feedback_rate=float(self.feedback_rate),
                                seed=int(self.seed), **extra)


def feedback_model_choices() -> tuple[str, ...]:
    """Feedback models the core offers (``slarouter_core.feedback.KINDS``; ``iid`` first)."""
    try:
        from .feedback import KINDS
    except ImportError:  # pragma: no cover - older cores without feedback models
        return ("iid",)
    return ("iid",) + tuple(k for k in KINDS if k != "iid")


def feedback_model_fields(name: str) -> dict:
    """Extra ``SimulationConfig`` keywords selecting feedback model ``name`` (its defaults)."""
    if name == "iid":
        return {}
    if name not in feedback_model_choices():
        raise ValueError(f"unknown feedback model {name!r}: choose one of {', '.join(feedback_model_choices())}")
    from .feedback import FeedbackConfig

    return {"feedback": FeedbackConfig(kind=name)}


# query-parameter names of every setting (short, stable: they are part of shared links)
_RUN_KEYS = {"alpha": "alpha", "c": "c", "fixed_v": "fixedV", "V": "V", "q_max": "qmax", "eps": "eps",
             "feedback_rate": "rate", "seed": "seed", "per_tick": "tick", "feedback_model": "fbmodel",
             "mode": "mode"}
_DATA_KEYS = {"source": "src", "path": "path", "cost": "cost", "benchmarks": "bench", "encoder": "enc"}


def settings_to_query(data: DataSpec, run: RunSettings) -> dict[str, str]:
    """Both settings objects as URL query parameters (defaults left out)."""
    out: dict[str, str] = {}
    d0, r0 = DataSpec(), RunSettings()
    for f, key in _DATA_KEYS.items():
        v = getattr(data, f)
        if v != getattr(d0, f):
            out[key] = ",".join(v) if f == "benchmarks" else str(v)
    for f, key in _RUN_KEYS.items():
        v = getattr(run, f)
        if v != getattr(r0, f):
            out[key] = ("1" if v else "0") if isinstance(v, bool) else (f"{v:g}" if isinstance(v, float) else str(v))
    return out


def settings_from_query(params: Mapping[str, str]) -> tuple[DataSpec, RunSettings, list[str]]:
    """Settings from URL query parameters; each unusable parameter is skipped with a message."""
    problems: list[str] = []
    data_kw: dict[str, Any] = {}
    run_kw: dict[str, Any] = {}
    for f, key in _DATA_KEYS.items():
        if key in params:
            raw = str(params[key])
            data_kw[f] = tuple(b for b in raw.split(",") if b) if f == "benchmarks" else raw
    types = {fl.name: fl.type for fl in fields(RunSettings)}
    for f, key in _RUN_KEYS.items():
        if key not in params:
            continue
        raw = str(params[key]).strip()
        try:
            if f in ("feedback_model", "mode"):
                run_kw[f] = raw
            elif f == "fixed_v":
                if raw not in ("0", "1", "true", "false"):
                    raise ValueError
                run_kw[f] = raw in ("1", "true")
            elif f in ("seed", "per_tick"):
                run_kw[f] = int(raw)
            else:
                run_kw[f] = float(raw)
        except ValueError:
            problems.append(f"URL parameter {key}={raw!r} is not a valid {f} ({types[f]}); using the default.")
    return (_build(DataSpec, data_kw, _DATA_KEYS, problems), _build(RunSettings, run_kw, _RUN_KEYS, problems),
            problems)


def _build(cls, kw: dict, keys: dict, problems: list[str]):
    """``cls(**kw)``; when that is invalid, each unusable field falls back to its default."""
    try:
        return cls(**kw)
    except (ValueError, TypeError):
        pass
    obj = cls()
    for f, v in kw.items():
        try:
            obj = replace(obj, **{f: v})
        except (ValueError, TypeError) as exc:
            problems.append(f"URL parameter {keys[f]}: {exc}; using the default.")
    return obj


def settings_json(data: DataSpec, run: RunSettings, resolved: RoutingData | None = None) -> str:
    """Both settings (and, given the data, the exact router config) as JSON."""
    doc: dict[str, Any] = {"data": asdict(data), "run": asdict(run)}
    doc["data"]["benchmarks"] = list(data.benchmarks)
    if resolved is not None:
        doc["simulation"] = run.simulation_config(resolved).to_dict()
    return json.dumps(doc, indent=2, default=str)


# -- display helpers ----------------------------------------------------------------------
def display_scale(unit: str) -> tuple[float, str]:
    """Divisor and label for totals: joules are shown in MJ."""
    return (1e6, "MJ") if unit == "J" else (1.0, unit)


def zoo_table(data: RoutingData) -> pd.DataFrame:
    """Models in ascending cost order with mean cost (unit in the header) and accuracy."""
    return pd.DataFrame({
        "model": list(data.models),
        f"mean cost ({data.cost_unit})": data.costs.mean(axis=0),
        "accuracy": data.solved.mean(axis=0),
    })


# -- live run -----------------------------------------------------------------------------
def _line_spec(title: str, y_title: str, color_title: str | None = "series", rule: float | None = None,
               rule_label: str = "", height: int = 220, area: bool = False,
               domain: list[str] | None = None) -> dict:
    """A line chart of a long (t, series, value) frame, or (``area``) stacked bands of a
    long (t, series, value, lo) frame whose band edges were stacked beforehand (``lo`` to
    ``value``): the browser then draws without a stack transform, which keeps redraws
    of long histories cheap.

    ``color_title=None`` hides the legend (single series). The optional horizontal rule
    (e.g. alpha) carries its own one-row data so that it is drawn once, not per point.
    """
    mark = {"type": "area", "interpolate": "linear"} if area else {"type": "line", "interpolate": "linear"}
    enc: dict[str, Any] = {
        "x": {"field": "t", "type": "quantitative", "title": "request"},
        "y": {"field": "value", "type": "quantitative", "title": y_title,
              **({"scale": {"domain": [0, 1]}, "axis": {"format": "%"}} if area else {})},
        "color": {"field": "series", "type": "nominal",
                  **({"title": color_title} if color_title else {"legend": None}),
                  **({"scale": {"domain": domain}, "sort": domain} if domain else {})},
    }
    if area:
        enc["y2"] = {"field": "lo"}
    layers: list[dict] = [{"mark": mark, "encoding": enc}]
    if rule is not None:
        one = {"values": [{"rule": float(rule), "label": rule_label}]}
        layers.append({"data": one, "mark": {"type": "rule", "strokeDash": [6, 4], "color": "#c0392b"},
                       "encoding": {"y": {"field": "rule", "type": "quantitative"}}})
        layers.append({"data": one, "mark": {"type": "text", "align": "left", "dx": 4, "dy": -7,
                                              "color": "#c0392b"},
                       "encoding": {"y": {"field": "rule", "type": "quantitative"}, "x": {"value": 0},
                                    "text": {"field": "label"}}})
    return {"title": title, "height": height, "layer": layers}


def _long(t: np.ndarray, series: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """Long frame (t, series, value) with a categorical series column (small on the wire)."""
    names = list(series)
    k = len(t)
    return pd.DataFrame({
        "t": np.tile(t, len(names)).astype(np.int32),
        "series": pd.Categorical.from_codes(np.repeat(np.arange(len(names), dtype=np.int8), k), categories=names),
        "value": np.concatenate([np.asarray(series[n], np.float32) for n in names]) if names
        else np.zeros(0, np.float32),
    })


#: streaming charts draw on a canvas without ARIA nodes: thousands of SVG elements per
#: redraw are what makes a browser fall behind a live run
FAST_RENDER = {"usermeta": {"embedOptions": {"renderer": "canvas"}}, "config": {"aria": False}}


@dataclass
class ChartFrame:
    """One chart: its data (already thinned) and its Vega-Lite spec (drawn on a canvas)."""

    key: str
    frame: pd.DataFrame
    spec: dict

    def __post_init__(self) -> None:
        self.spec = {**self.spec, **FAST_RENDER}


class LiveRun:
    """One session's streaming run: a :class:`Simulation` plus what the charts need."""

    def __init__(self, data: RoutingData, embeddings: np.ndarray, settings: RunSettings):
        self.data = data
        self.settings = settings
        self.sim = Simulation(data, embeddings, settings.simulation_config(data))
        self.alpha = self.sim.config.router.alpha

    @property
    def t(self) -> int:
        return self.sim.t

    @property
    def n_requests(self) -> int:
        return self.sim.n_requests

    @property
    def done(self) -> bool:
        return self.sim.done

    def step(self, n: int | None = None) -> int:
        return self.sim.step(self.settings.per_tick if n is None else n)

    def headline(self) -> dict[str, Any]:
        """Requests served, cost, satisfaction, SLA status, current V and Q."""
        k = self.t
        scale, unit = display_scale(self.data.cost_unit)
        if k == 0:
            return {"served": 0, "total": self.n_requests, "cost": 0.0, "cost_unit": unit,
                    "satisfaction": float("nan"), "alpha": self.alpha, "sla": "not started",
                    "v": self.sim.router.current_v(), "q": 0.0, "explored": 0, "feedback": 0}
        s = self.sim.summary()
        return {"served": k, "total": self.n_requests, "cost": s.operating_cost / scale, "cost_unit": unit,
                "satisfaction": s.satisfaction, "alpha": self.alpha,
                "sla": "met" if s.sla_met else "missed", "v": s.final_v, "q": s.final_q,
                "explored": s.explored, "feedback": s.feedback}

    def charts(self, max_points: int = MAX_POINTS) -> list[ChartFrame]:
        """The five streaming charts, each series thinned to about ``max_points``."""
        k = self.t
        sim = self.sim
        idx = thin_indices(k, max_points)
        t = idx + 1
        rows = sim.order[:k]
        model = sim._model[:k]
        scale, unit = display_scale(self.data.cost_unit)
        out = []

        q = sim._q[:k]
        out.append(ChartFrame("queue", _long(t, {"Q": q[idx]}),
                              _line_spec("Virtual queue Q_t", "Q", color_title=None)))

        served_cost = self.data.costs[rows, model]
        ref = thin_indices(k, max(2, max_points // 8))
        singles = np.cumsum(self.data.costs[rows], axis=0)[ref] / scale if k else np.zeros((0, self.data.n_models))
        names = ["SLARouter"] + [f"only {m}" for m in self.data.models]
        ts = [t] + [ref + 1] * self.data.n_models
        values = [np.cumsum(served_cost)[idx] / scale] + [singles[:, j] for j in range(self.data.n_models)]
        cost = pd.DataFrame({
            "t": np.concatenate(ts).astype(np.int32),
            "series": pd.Categorical.from_codes(
                np.repeat(np.arange(len(names), dtype=np.int8), [len(x) for x in ts]), categories=names),
            "value": np.concatenate(values).astype(np.float32)})
        out.append(ChartFrame("cost", cost,
                              _line_spec(f"Cumulative operating cost ({unit})", unit, color_title="router",
                                         domain=names)))

        sat = self.data.solved[rows, model]
        out.append(ChartFrame("satisfaction", _long(t, {"running satisfaction": running_mean(sat)[idx]}),
                              _line_spec("Running request satisfaction", "satisfaction", color_title=None,
                                         rule=self.alpha, rule_label=f"alpha = {self.alpha:.3f}")))

        counts = np.zeros((k + 1, self.data.n_models), np.int64)
        if k:
            np.cumsum(np.eye(self.data.n_models, dtype=np.int64)[model], axis=0, out=counts[1:])
        band = thin_indices(k, max(2, max_points // 4))
        lo = np.maximum(0, band + 1 - RATIO_WINDOW)
        width = (band + 1 - lo)[:, None]
        share = (counts[band + 1] - counts[lo]) / np.maximum(width, 1)
        upper = np.cumsum(share, axis=1)  # bands stacked cheapest first
        ratio = _long(band + 1, {m: upper[:, j] for j, m in enumerate(self.data.models)})
        ratio["lo"] = (ratio["value"].to_numpy() - share.T.reshape(-1)).astype(np.float32)
        out.append(ChartFrame("ratio", ratio,
                              _line_spec(f"Model call ratio (last {RATIO_WINDOW} requests)", "share of calls",
                                         color_title="model (cheapest first)", area=True,
                                         domain=list(self.data.models))))

        explored = sim._explored[:k]
        fb = sim._feedback[:k] != NO_FEEDBACK
        events = []
        for label, mask in (("exploration", explored), ("feedback", fb), ("predictor update", explored & fb)):
            pos = np.flatnonzero(mask)
            pos = pos[thin_indices(len(pos), max(2, max_points // 2))]
            events.append((pos + 1).astype(np.int32))
        kinds = ["exploration", "feedback", "predictor update"]
        ev = pd.DataFrame({
            "t": np.concatenate(events),
            "event": pd.Categorical.from_codes(np.repeat(np.arange(3, dtype=np.int8), [len(e) for e in events]),
                                               categories=kinds)})
        spec = {"title": "Where exploration and feedback happened", "height": {"step": 34},
                "mark": {"type": "tick", "thickness": 1.5, "opacity": 0.8},
                "encoding": {"x": {"field": "t", "type": "quantitative", "title": "request"},
                             "y": {"field": "event", "type": "nominal", "title": None},
                             "color": {"field": "event", "type": "nominal", "legend": None}}}
        out.append(ChartFrame("events", ev, spec))
        return out

    def trace_csv(self) -> bytes:
        return self.sim.trace().to_csv(index=False).encode("utf-8")


# -- feedback by hand ---------------------------------------------------------------------
@dataclass
class HandRequest:
    """A request routed on the hand-feedback page, waiting for (or with) its verdict."""

    id: int
    text: str
    benchmark: str
    row: int | None  # data row when it came from the stream; None when typed
    decision: Decision
    embedding: np.ndarray
    q_before: float = 0.0  # the router's queue when the request arrived (paper mode: decision.q)
    q_after: float | None = None
    feedback: int | None = None
    shat_after: np.ndarray | None = None
    trained: bool = False
    source: str = "stream"
    stream_pos: int | None = None  # position in the seeded stream (None: typed)

    @property
    def answered(self) -> bool:
        return self.q_after is not None


class HandSession:
    """One user's router on the per-request API (decide, then observe) with hand feedback.

    Requests come from the seeded stream of the data or are typed in. The user answers
    with thumbs up (1) or down (0). With ``auto_feedback`` on, a stream request the user
    skips gets the simulated user's feedback (the logged label, at the stream's feedback
    rate) and ``serve_auto`` serves background traffic the same way; with it off, only the
    user's thumbs are feedback. ``learn_from_all``: Algorithm 1 trains the predictor only
    on feedback for explored requests; when True, every hand verdict also trains it.
    """

    def __init__(self, data: RoutingData, embeddings: np.ndarray, settings: RunSettings,
                 auto_feedback: bool = True, learn_from_all: bool = True):
        emb = np.asarray(embeddings, np.float32)
        if emb.shape[0] != data.n_requests:
            raise ValueError(f"embeddings must have one row per request ({data.n_requests}), got {emb.shape}")
        self.data = data
        self.embeddings = emb
        self.settings = settings
        self.config = settings.router_config(data)
        self.order, self.plan, router_seed = stream_plan(data.n_requests, data.solved,
                                                          float(settings.feedback_rate), int(settings.seed))
        self.router = SLARouter(self.config, data.n_models, emb.shape[1], seed=router_seed)
        self.auto_feedback = bool(auto_feedback)
        self.learn_from_all = bool(learn_from_all)
        self.position = 0  # next stream position
        self.next_id = 1
        self.current: HandRequest | None = None
        self.history: list[HandRequest] = []
        self.auto_served = 0
        self.mean_costs = data.costs.mean(axis=0)

    @property
    def q(self) -> float:
        """The queue the router's next decision uses (guarded mode: with its margin), so the
        Q shown beside the decision table is the Q in its ``Q*(alpha - shat)`` column."""
        return float(self.router.decision_queue())

    @property
    def stream_left(self) -> int:
        return self.data.n_requests - self.position

    def _close_pending(self) -> None:
        """Observe the open request without a hand verdict (auto feedback or none)."""
        cur = self.current
        if cur is None or cur.answered:
            return
        fb: int | None = None
        if self.auto_feedback and cur.stream_pos is not None:
            f = int(self.plan[cur.stream_pos, cur.decision.model])
            fb = None if f == NO_FEEDBACK else f
        self.router.observe(cur.decision, fb)
        cur.q_after = self.q
        cur.feedback = None
        cur.source += " (skipped" + (f", auto feedback {fb})" if fb is not None else ")")
        cur.shat_after = self.router.predict_satisfaction(cur.embedding)

    def next_from_stream(self) -> HandRequest:
        """Route the next request of the seeded stream."""
        if self.stream_left <= 0:
            raise ValueError("the stream is finished: reset the session or type a request")
        self._close_pending()
        pos = self.position
        row = int(self.order[pos])
        x = self.embeddings[row]
        d = self.router.decide(x, self.data.costs[row])
        req = HandRequest(id=self.next_id, text=str(self.data.frame["input_text"].iat[row]),
                          benchmark=str(self.data.frame["benchmark"].iat[row]), row=row, decision=d,
                          embedding=x, q_before=self.q, stream_pos=pos)
        self.position += 1
        self.next_id += 1
        self.current = req
        self.history.append(req)
        return req

    def route_text(self, text: str, embedding: np.ndarray, costs: np.ndarray | None = None) -> HandRequest:
        """Route a typed request (costs default to each model's mean cost on the data)."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("type a request first: the text is empty")
        x = np.asarray(embedding, np.float32)
        if x.shape != (self.router.dim,):
            raise ValueError(f"the embedding has width {x.shape}, the router expects {self.router.dim}: "
                             "embed the text with the same encoder as the data")
        self._close_pending()
        c = self.mean_costs if costs is None else np.asarray(costs, np.float64)
        d = self.router.decide(x, c)
        req = HandRequest(id=self.next_id, text=text.strip(), benchmark="(typed)", row=None, decision=d,
                          embedding=x, q_before=self.q, source="typed")
        self.next_id += 1
        self.current = req
        self.history.append(req)
        return req

    def answer(self, feedback: int) -> HandRequest:
        """The user's verdict on the open request: 1 (thumbs up) or 0 (thumbs down)."""
        cur = self.current
        if cur is None or cur.answered:
            raise ValueError("no open request to answer: take the next request or type one")
        if feedback not in (0, 1) or isinstance(feedback, bool):
            raise ValueError(f"feedback must be 1 (up) or 0 (down), got {feedback!r}")
        version = self.router.model_version
        self.router.observe(cur.decision, int(feedback))
        if self.learn_from_all and not cur.decision.explored and self.config.mode == "paper":
            # Algorithm 1 learns from explored requests only; the demo option also learns here
            # (the guarded mode has its own learn_from_all switch, on by default)
            self.router.predictor.add(cur.embedding, cur.decision.model, float(feedback))
            self.router.predictor.train_step(self.router.buffer_rng)
        cur.trained = self.router.model_version != version
        cur.feedback = int(feedback)
        cur.q_after = self.q
        cur.shat_after = self.router.predict_satisfaction(cur.embedding)
        return cur

    def serve_auto(self, n: int) -> int:
        """Serve the next ``n`` stream requests without showing them (background traffic)."""
        self._close_pending()
        n = int(min(max(n, 0), self.stream_left))
        if n == 0:
            return 0
        a = self.position
        rows = self.order[a:]
        fb = self.plan[a:] if self.auto_feedback else np.full_like(self.plan[a:], NO_FEEDBACK)
        self.router.run_block(self.embeddings[rows], np.ascontiguousarray(self.data.costs[rows]), fb, n=n)
        self.position += n
        self.auto_served += n
        return n

    def explanation(self, req: HandRequest) -> pd.DataFrame:
        """Per model: shat, cost, V*C, Q*(alpha - shat), score; and after the verdict."""
        d = req.decision
        unit = self.data.cost_unit
        out = pd.DataFrame({
            "model": list(self.data.models),
            "shat": d.shat,
            f"cost ({unit})": d.costs,
            "V*C": d.cost_terms,
            "Q*(alpha-shat)": d.queue_terms,
            "score": d.scores,
            "chosen": [self.why(req) if j == d.model else "" for j in range(len(d.shat))],
        })
        if req.shat_after is not None:
            # paper mode: shat is the predictor's output; guarded mode adjusts it (levels, optimism)
            out["shat after" if self.config.mode == "paper" else "predictor after"] = req.shat_after
        return out

    @staticmethod
    def why(req: HandRequest) -> str:
        """How the served model was picked: explored, escalated by the guard, or lowest score."""
        d = req.decision
        if d.explored:
            return "explored"
        if getattr(d, "escalated", False):
            return "escalated (guard)"
        return "lowest score"

    def history_frame(self) -> pd.DataFrame:
        rows = []
        for r in self.history:
            rows.append({
                "id": r.id, "source": r.source, "benchmark": r.benchmark, "text": r.text,
                "model": self.data.models[r.decision.model], "explored": r.decision.explored,
                "shat_served": float(r.decision.shat[r.decision.model]),
                "your_feedback": {None: "", 1: "up", 0: "down"}[r.feedback],
                "q_before": r.q_before, "q_after": r.q_after, "v": r.decision.v,
                "predictor_trained": r.trained,
            })
        return pd.DataFrame(rows, columns=["id", "source", "benchmark", "text", "model", "explored",
                                           "shat_served", "your_feedback", "q_before", "q_after", "v",
                                           "predictor_trained"])

    def history_csv(self) -> bytes:
        return self.history_frame().to_csv(index=False).encode("utf-8")


# -- experiments page ---------------------------------------------------------------------
def parse_numbers(text: str, name: str, integer: bool = False, low: float | None = None,
                  high: float | None = None) -> tuple:
    """Comma/space separated numbers from a text box, with a plain error naming the bad one."""
    parts = [p for p in str(text).replace(";", ",").replace(" ", ",").split(",") if p.strip()]
    if not parts:
        raise ValueError(f"give at least one {name}")
    out = []
    for p in parts:
        try:
            v = int(p) if integer else float(p)
        except ValueError:
            raise ValueError(f"{p!r} is not a valid {name}: give {'whole numbers' if integer else 'numbers'} "
                             "separated by commas") from None
        if not math.isfinite(v) or (low is not None and v < low) or (high is not None and v > high):
            raise ValueError(f"{name} {p} is out of range [{low}, {high}]")
        out.append(v)
    return tuple(dict.fromkeys(out))


def settings_method_params(run: RunSettings) -> dict:
    """SLARouter method params (for the experiment runner) from the session's settings."""
    params: dict[str, Any] = {"c": float(run.c)}
    if run.mode != "paper":
        params["mode"] = run.mode
    if run.fixed_v:
        params["V"] = float(run.V)
    else:
        params.update(q_max=float(run.q_max), eps=float(run.eps))
    return params


def comparison_chart(agg: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Cost against satisfaction per method, one panel per benchmark, alpha as a rule."""
    cols = ["benchmark", "method", "cost_mean", "cost_std", "satisfaction_mean", "satisfaction_std", "alpha",
            "sla_met", "cost_unit"]
    frame = agg[[c for c in cols if c in agg.columns]].copy()
    frame["SLA"] = np.where(frame["sla_met"], "met", "missed")
    unit = str(frame["cost_unit"].iloc[0]) if len(frame) else ""
    spec = {
        "facet": {"field": "benchmark", "type": "nominal", "title": None},
        "columns": 2,
        "resolve": {"scale": {"x": "independent", "y": "independent"}},
        "spec": {
            "height": 220, "width": 320,
            "layer": [
                {"mark": {"type": "point", "filled": True, "size": 90},
                 "encoding": {
                     "x": {"field": "cost_mean", "type": "quantitative", "title": f"operating cost ({unit})",
                           "scale": {"zero": False}},
                     "y": {"field": "satisfaction_mean", "type": "quantitative", "title": "request satisfaction",
                           "scale": {"zero": False}},
                     "color": {"field": "method", "type": "nominal"},
                     "shape": {"field": "SLA", "type": "nominal", "scale": {"domain": ["met", "missed"],
                                                                              "range": ["circle", "cross"]}},
                     "tooltip": [{"field": "method"}, {"field": "cost_mean", "format": ".4g"},
                                 {"field": "satisfaction_mean", "format": ".3f"}, {"field": "SLA"}]}},
                {"mark": {"type": "rule", "strokeDash": [6, 4], "color": "#c0392b"},
                 "encoding": {"y": {"aggregate": "mean", "field": "alpha", "type": "quantitative"}}},
            ],
        },
    }
    return frame, spec


def sweep_charts(agg: pd.DataFrame, x: str, x_title: str, log: bool = False) -> list[tuple[pd.DataFrame, dict]]:
    """Cost and satisfaction against a swept parameter, mean over benchmarks, per method."""
    if x not in agg.columns:
        raise ValueError(f"the results have no column {x!r}")
    g = agg.groupby(["series", x] if "series" in agg.columns else ["method", x], sort=True, observed=True)
    frame = g.agg(cost=("cost_mean", "mean"), satisfaction=("satisfaction_mean", "mean"),
                  alpha=("alpha", "mean")).reset_index()
    color = "series" if "series" in frame.columns else "method"
    unit = str(agg["cost_unit"].iloc[0]) if len(agg) else ""
    xenc = {"field": x, "type": "quantitative", "title": x_title,
            **({"scale": {"type": "log"}, "axis": {"format": ".0e"}} if log else {})}
    out = []
    for y, title in (("cost", f"operating cost ({unit})"), ("satisfaction", "request satisfaction")):
        layers = [{"mark": {"type": "line", "point": True},
                   "encoding": {"x": xenc, "y": {"field": y, "type": "quantitative", "title": title,
                                                 "scale": {"zero": False}},
                                "color": {"field": color, "type": "nominal", "title": "method"}}}]
        if y == "satisfaction":
            layers.append({"mark": {"type": "rule", "strokeDash": [6, 4], "color": "#c0392b"},
                           "encoding": {"y": {"aggregate": "mean", "field": "alpha", "type": "quantitative"}}})
        out.append((frame, {"title": f"{title.split(' (')[0].capitalize()}, mean over benchmarks",
                            "height": 260, "layer": layers}))
    return out


# -- encoders -----------------------------------------------------------------------------
class LazyEncoder:
    """An encoder's spec, width and cache id without loading its weights.

    The embedding cache only needs ``cache_id`` and ``dim`` to serve cached texts, so a
    dataset whose embeddings are all cached opens without importing torch or loading the
    model; ``encode`` loads it (through ``loader``) the first time it is really needed.
    Works for ``minilm`` and ``hf:<local folder>``; other specs are loaded at once.
    """

    def __init__(self, spec: str, loader: Callable[[], Any]):
        from pathlib import Path

        from .encoders import TransformerEncoder, minilm_path

        self.spec = spec
        self._loader = loader
        self._encoder = None
        source = None
        if spec == "minilm":
            source = minilm_path()
        elif spec.startswith("hf:") and Path(spec[3:].strip()).is_dir():
            source = Path(spec[3:].strip())
        config = source / "config.json" if source is not None else None
        if config is not None and config.is_file():
            self.dim = int(json.loads(config.read_text())["hidden_size"])
            facade = TransformerEncoder.__new__(TransformerEncoder)  # cache_id reads spec and source only
            facade.spec, facade.source = spec, str(source)
            self._cache_id = facade.cache_id()
        else:
            self._encoder = loader()
            self.dim = int(self._encoder.dim)
            self._cache_id = self._encoder.cache_id()

    @property
    def loaded(self) -> bool:
        return self._encoder is not None

    def cache_id(self) -> str:
        return self._cache_id

    def encode(self, texts, progress=None) -> np.ndarray:
        if self._encoder is None:
            self._encoder = self._loader()
        return self._encoder.encode(texts, progress=progress)


def benchmark_table(data: RoutingData) -> pd.DataFrame:
    """Per benchmark (and all): rows, then each model's accuracy and mean cost (unit in the
    header), models in cost order; one row per benchmark so the page stays short."""
    long = data.summary()
    cost_col = f"mean cost ({data.cost_unit})"
    out = long.groupby("benchmark", sort=False)["rows"].first().to_frame()
    for m in data.models:
        part = long[long["model"] == m].set_index("benchmark")
        out[f"{m} accuracy"] = part["accuracy"]
        out[f"{m} {cost_col}"] = part[cost_col]
    return out.reset_index()
