"""UI-free pieces of the dashboard: settings that travel in a URL, a live run with chart
frames thinned for drawing, and a hand-feedback session on the per-request router API.

Nothing here imports Streamlit: the pages only read widgets, call these objects and draw
what they return. Every object that learns (router, queue, trace) is created per user
session by the caller; nothing here is shared between sessions.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from .data import DEFAULT_COST, RoutingData, midpoint_alpha
from .metrics import running_mean, thin_indices
from .router import MODES as ROUTER_MODES
from .router import NO_FEEDBACK, Decision, RouterConfig, SLARouter
from .baselines import clairvoyant_oracle, static_mixture_lp
from .simulator import Simulation, SimulationConfig, stream_plan

#: points per plotted series; the full history is a download. The run's own series (Q,
#: satisfaction, its cumulative cost) get all of them; smooth reference series get fewer
#: (single-model cost lines: 1/8, call-ratio bands: 1/4, event ticks: 1/2 per kind), which
#: keeps a browser redraw cheap without visible change.
MAX_POINTS = 2000
#: requests in the moving window of the model-call-ratio chart
RATIO_WINDOW = 200
ENCODER_CHOICES = ("minilm", "hashing")
#: one set of limits for the URL and the widgets, (lowest, highest) per setting: a shared
#: link with a value outside them is clamped to the nearest limit, with a message
LIMITS: dict[str, tuple[float, float]] = {
    "alpha": (0.001, 0.999), "c": (0.0, 100.0), "V": (1e-12, 1e6), "q_max": (1e-6, 1e6), "eps": (1e-9, 1.0),
    "feedback_rate": (0.0, 1.0), "seed": (0, 2**31 - 1), "per_tick": (1, 20_000)}
#: routers streamed side by side on Live run by default: the paper's rule against the
#: contextual mode, on the same requests and feedback plan
DEFAULT_ROUTERS = ("paper", "contextual")
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
    routers: tuple[str, ...] = DEFAULT_ROUTERS  # Live run: router modes side by side

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
        if not isinstance(self.routers, tuple) or not self.routers or len(set(self.routers)) != len(self.routers) \
                or any(m not in ROUTER_MODES for m in self.routers):
            raise ValueError(f"routers must be one or more distinct modes of {', '.join(ROUTER_MODES)}, "
                             f"got {self.routers!r}")

    def resolved_alpha(self, data: RoutingData) -> float:
        return float(self.alpha) if self.alpha is not None else midpoint_alpha(data)

    def router_config(self, data: RoutingData, mode: str | None = None) -> RouterConfig:
        return RouterConfig(alpha=self.resolved_alpha(data), c=float(self.c),
                            V=float(self.V) if self.fixed_v else None,
                            q_max=float(self.q_max), eps=float(self.eps), mode=mode or self.mode)

    def simulation_config(self, data: RoutingData, mode: str | None = None) -> SimulationConfig:
        """The simulation of router ``mode`` (default ``self.mode``); every mode gets the same
        seed and feedback settings, so the same request order and feedback plan."""
        extra = {}
        if self.feedback_model != "iid":
            extra = feedback_model_fields(self.feedback_model)
        return SimulationConfig(self.router_config(data, mode), feedback_rate=float(self.feedback_rate),
                                seed=int(self.seed), **extra)


def clamp_setting(name: str, value: float) -> float:
    """``value`` moved into ``LIMITS[name]`` (what a widget for it can show)."""
    lo, hi = LIMITS[name]
    return type(value)(min(max(value, lo), hi))


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
             "mode": "mode", "routers": "routers"}
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
            if f == "routers":
                out[key] = ",".join(v)
            else:
                out[key] = ("1" if v else "0") if isinstance(v, bool) else \
                    (f"{v:g}" if isinstance(v, float) else str(v))
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
            elif f == "routers":
                run_kw[f] = tuple(m.strip() for m in raw.split(",") if m.strip())
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
            continue
        # a usable value outside what the widgets offer is clamped to the nearest limit
        # (values the router rejects, e.g. alpha = 1.5, fall back to the default below)
        if f in LIMITS and math.isfinite(run_kw[f]):
            try:
                replace(RunSettings(), **{f: run_kw[f]})
            except ValueError:
                continue
            lo, hi = LIMITS[f]
            if not lo <= run_kw[f] <= hi:
                near = clamp_setting(f, run_kw[f])
                side = "above the highest" if run_kw[f] > hi else "below the lowest"
                problems.append(f"URL parameter {key}={raw} is {side} allowed {f} ({near:g}); using {near:g}.")
                run_kw[f] = near
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


_PREFIXES = {"J": ((1e9, "GJ"), (1e6, "MJ"), (1e3, "kJ"), (1.0, "J")),
             "ms": ((3.6e6, "h"), (6e4, "min"), (1e3, "s"), (1.0, "ms")),
             "s": ((3600.0, "h"), (60.0, "min"), (1.0, "s"))}


def human_cost(value: float, unit: str) -> str:
    """A cost in human units and digits: ``6.079e6 ms`` is "1.69 h", ``0.0001004 USD`` is
    "0.01¢", ``3.5e6 J`` is "3.5 MJ"; NaN is "-"."""
    if value is None or not math.isfinite(float(value)):
        return "-"
    v = float(value)
    a = abs(v)
    if unit == "USD":
        if a == 0:
            return "$0"
        if a >= 1:
            return f"${v:,.2f}"
        if a >= 0.01:
            return f"${v:.3g}"
        return f"{100 * v:.3g}¢"
    for scale, label in _PREFIXES.get(unit, ()):
        if a >= scale or scale == 1.0:
            return f"{v / scale:,.3g} {label}"
    return f"{v:,.0f} {unit}" if a >= 1e4 else f"{v:.3g} {unit}"


def zoo_table(data: RoutingData) -> pd.DataFrame:
    """Models in ascending cost order with mean cost (unit in the header) and accuracy."""
    return pd.DataFrame({
        "model": list(data.models),
        f"mean cost ({data.cost_unit})": data.costs.mean(axis=0),
        "accuracy": data.solved.mean(axis=0),
    })


# -- colours ------------------------------------------------------------------------------
#: one colour per router mode and per reference, the same on every chart and page
ROUTER_COLORS = {"paper": "#d6402f", "guarded": "#e8900c", "contextual": "#1f6feb"}
REFERENCE_COLORS = {"static mixture": "#2e9d4f", "static_mixture": "#2e9d4f", "oracle": "#7b3fc4"}
#: the experiment runner's other methods: distinct hues, none shared with the above
METHOD_COLORS = {"messplus": "#8c564b", "mess+": "#8c564b", "carrot": "#0fa3b1", "causal": "#b5a900",
                 "random": "#e377c2", "slarouter (data-driven v)": "#9c2a1f"}
#: spare hues, handed out when two names would otherwise share a colour
SPARE_COLORS = ("#9467bd", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#ff9896", "#98df8a", "#aec7e8",
                "#ffbb78", "#c5b0d5", "#bcbd22", "#17becf")
_GREY_LIGHT, _GREY_DARK = 0xC8, 0x33


def model_colors(models: tuple[str, ...] | list[str]) -> list[str]:
    """Single models in a neutral grey scale, in the given (cost) order: cheapest lightest."""
    n = len(models)
    out = []
    for j in range(n):
        g = round(_GREY_LIGHT + (_GREY_DARK - _GREY_LIGHT) * (j / (n - 1) if n > 1 else 1.0))
        out.append(f"#{g:02x}{g:02x}{g:02x}")
    return out


def series_color(name: str, models: tuple[str, ...] | list[str] = ()) -> str:
    """The colour of a router, reference, method or single model (any page).

    Routers by mode (``paper``, ``guarded``, ``contextual``, also as ``SLARouter``,
    ``slarouter[mode]`` or ``slarouter_mode``), references and baselines by name, single
    models (``m``, ``only m``, ``single:m``) by their place in ``models`` (cost order) on the
    grey scale; anything else gets a fixed hue from its name.
    """
    key = str(name).strip()
    low = key.lower()
    for prefix in ("only ", "single:", "single_", "single "):
        if key.startswith(prefix) and key[len(prefix):] in models:
            key = key[len(prefix):]
    if key.endswith(" only") and key[:-5] in models:
        key = key[:-5]
    if key in models:
        return model_colors(models)[list(models).index(key)]
    if low in ROUTER_COLORS:
        return ROUTER_COLORS[low]
    if low in REFERENCE_COLORS:
        return REFERENCE_COLORS[low]
    if low in METHOD_COLORS:
        return METHOD_COLORS[low]
    if low.startswith("slarouter") or low.startswith("sla router"):
        for mode in ROUTER_COLORS:
            if mode in low:
                return ROUTER_COLORS[mode]
        return ROUTER_COLORS["paper"]
    return SPARE_COLORS[sum(map(ord, low)) % len(SPARE_COLORS)]


def color_encoding(field: str, names: list[str], models: tuple[str, ...] | list[str] = (),
                   title: str | None = None, columns: int | None = None) -> dict:
    """A nominal colour encoding with one fixed colour per name and a legend below the chart
    that shows every entry (in columns, labels not cut)."""
    names = list(dict.fromkeys(str(n) for n in names))
    colours: list[str] = []
    for n in names:  # never two names in one colour
        c = series_color(n, models)
        if c in colours:
            c = next((x for x in SPARE_COLORS if x not in colours), c)
        colours.append(c)
    enc: dict[str, Any] = {"field": field, "type": "nominal", "sort": names,
                           "scale": {"domain": names, "range": colours}}
    if title is None:
        enc["legend"] = None
    else:
        enc["legend"] = {"title": title, "orient": "bottom", "direction": "horizontal",
                         "columns": columns or min(len(names), 4), "labelLimit": 0, "symbolLimit": 0}
    return enc


# -- live run -----------------------------------------------------------------------------
def _line_spec(title: str, y_title: str, color_title: str | None = "series", rule: float | None = None,
               rule_label: str = "", height: int = 220, area: bool = False,
               domain: list[str] | None = None) -> dict:
    """The streaming chart spec in its first form (used by the Service page's monitor): a
    colour legend titled ``color_title`` (None: no legend) over ``domain``; stacked bands
    (``area``) on a 0-100% axis. See :func:`_chart_spec`."""
    color: dict[str, Any] = {"field": "series", "type": "nominal",
                             **({"title": color_title} if color_title else {"legend": None}),
                             **({"scale": {"domain": domain}, "sort": domain} if domain else {})}
    return _chart_spec(title, y_title, color, None, rule=rule, rule_label=rule_label, height=height, area=area,
                       percent=area, y_domain=[0.0, 1.0] if area else None)


def _chart_spec(title: str, y_title: str, color: dict, x_max: int | None, rule: float | None = None,
                rule_label: str = "", height: int = 220, area: bool = False, percent: bool = False,
                y_domain: list[float] | None = None, band: bool = False, dash: dict | None = None) -> dict:
    """A line chart of a long (t, series, value) frame, or (``area``) stacked bands of a
    long (t, series, value, lo) frame whose band edges were stacked beforehand (``lo`` to
    ``value``): the browser then draws without a stack transform, which keeps redraws
    of long histories cheap. ``band``: also a shaded band from ``lo`` to ``value`` where
    ``lo`` is set (a router's own lower confidence bound).

    The x axis is fixed to the stream length; ``y_domain`` fixes the y axis (charts with
    no data yet get one, so that they draw a frame and no infinite extent). The optional
    horizontal rule (e.g. alpha) carries its own one-row data: drawn once, not per point.
    """
    mark = {"type": "area", "interpolate": "linear", "stroke": "#ffffff", "strokeWidth": 0.3} if area \
        else {"type": "line", "interpolate": "linear", "clip": True}
    y: dict[str, Any] = {"field": "value", "type": "quantitative", "title": y_title}
    if y_domain is not None:
        y["scale"] = {"domain": y_domain}
    if percent:
        y["axis"] = {"format": "%"}
    x: dict[str, Any] = {"field": "t", "type": "quantitative", "title": "request"}
    if x_max is not None:
        x["scale"] = {"domain": [0, max(int(x_max), 1)]}
    enc: dict[str, Any] = {"x": x, "y": y, "color": color}
    if dash is not None:
        enc["strokeDash"] = dash
    if area:
        enc["y2"] = {"field": "lo"}
    if band and isinstance(color.get("legend"), dict):  # the legend shows lines, not the pale band
        color = {**color, "legend": {**color["legend"], "symbolType": "stroke", "symbolOpacity": 1,
                                     "symbolStrokeWidth": 2.5}}
        enc["color"] = color
    layers: list[dict] = []
    if band:
        layers.append({"transform": [{"filter": "isValid(datum.lo)"}],
                       "mark": {"type": "area", "opacity": 0.18, "clip": True},
                       "encoding": {"x": x, "y": {"field": "lo", "type": "quantitative"}, "y2": {"field": "value"},
                                    "color": color}})
    layers.append({"mark": mark, "encoding": enc})
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
    return _long_parts([(name, t, v) for name, v in series.items()])


def _long_parts(parts: list[tuple[str, np.ndarray, np.ndarray]]) -> pd.DataFrame:
    """Long frame from (series, t, values) parts, each with its own (thinned) t."""
    names = [p[0] for p in parts]
    lens = [len(p[1]) for p in parts]
    return pd.DataFrame({
        "t": (np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)).astype(np.int32),
        "series": pd.Categorical.from_codes(np.repeat(np.arange(len(names), dtype=np.int16), lens),
                                            categories=names),
        "value": (np.concatenate([np.asarray(p[2], np.float32) for p in parts]) if parts
                  else np.zeros(0)).astype(np.float32),
    })


#: streaming charts draw on a canvas without ARIA nodes: thousands of SVG elements per
#: redraw are what makes a browser fall behind a live run. ``fit-x``: the height is the
#: plot's own, so a legend below the chart adds room instead of squeezing the plot.
FAST_RENDER = {"usermeta": {"embedOptions": {"renderer": "canvas"}}, "config": {"aria": False},
               "autosize": {"type": "fit-x", "contains": "padding"}}


@dataclass
class ChartFrame:
    """One chart: its data (already thinned) and its Vega-Lite spec (drawn on a canvas)."""

    key: str
    frame: pd.DataFrame
    spec: dict

    def __post_init__(self) -> None:
        self.spec = {**self.spec, **FAST_RENDER}


#: the two references drawn beside the routers
REFERENCES = ("static mixture", "oracle")
#: Live run records each router's own lower confidence bound every this many requests
LCB_EVERY = 250
#: the clairvoyant oracle (an LP over every request and model) is drawn up to this size
#: (requests x models); up to ORACLE_SYNC_CELLS it is solved before the first chart (well
#: under a second), above in a background thread (the 30,000 x 4 benchmark stream: ~5 s)
ORACLE_MAX_CELLS = 2_000_000
ORACLE_SYNC_CELLS = 50_000
Q_LABEL = {"paper": "virtual queue Q", "guarded": "decision queue (Q plus its margin)",
           "contextual": "certified shortfall"}
V_NOTE = {"guarded": "guarded mode multiplies V by its v_scale ({scale:g}), so it shows {scale:g} times the "
                     "V of the settings",
          "contextual": "V, c, Q_max and epsilon do not apply to the contextual mode (its own certified rule)"}


class LiveRun:
    """One session's streaming run: one :class:`Simulation` per router mode, side by side.

    Every router gets the same data, embeddings, seed and feedback settings, hence the same
    request order and feedback plan. The static mixture (the cheapest text-blind call mix
    whose mean accuracy reaches alpha, costed on the same requests) and the clairvoyant
    oracle (every label known) are the references. ``routers`` defaults to the settings'
    single ``mode``; with one router its series is called ``SLARouter``.
    """

    def __init__(self, data: RoutingData, embeddings: np.ndarray, settings: RunSettings,
                 routers: tuple[str, ...] | list[str] | None = None):
        routers = tuple(routers) if routers else (settings.mode,)
        if len(set(routers)) != len(routers) or any(m not in ROUTER_MODES for m in routers):
            raise ValueError(f"routers must be distinct modes of {', '.join(ROUTER_MODES)}, got {routers!r}")
        self.data = data
        self.settings = settings
        self.routers = routers
        self.sims = {m: Simulation(data, embeddings, settings.simulation_config(data, m)) for m in routers}
        self.sim = self.sims[routers[0]]
        self.alpha = self.sim.config.router.alpha
        self.labels = {m: (m if len(routers) > 1 else "SLARouter") for m in routers}
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
        grid = np.linspace(acc.min(), acc.max(), 21)
        self._frontier = np.array([[static_mixture_lp(acc, mean_cost, float(a))[1], a] for a in grid])
        self._oracle_cum: np.ndarray | None = None
        self._oracle_sat: np.ndarray | None = None
        cells = data.n_requests * data.n_models
        if cells <= ORACLE_SYNC_CELLS:
            self._oracle(embeddings)
        elif cells <= ORACLE_MAX_CELLS:  # seconds of LP: the charts add its line once it is solved
            threading.Thread(target=self._oracle, args=(embeddings,), daemon=True, name="live-oracle").start()

    def _oracle(self, embeddings: np.ndarray) -> None:
        data, cfg = self.data, self.sim.config
        oracle = clairvoyant_oracle(data, embeddings, self.alpha, cfg.seed, cfg.feedback_rate, feedback=cfg.feedback)
        route = np.empty(data.n_requests, np.int64)
        route[oracle.order] = oracle.model
        order = self.sim.order
        self._oracle_sat = np.cumsum(data.solved[order, route[order]])
        self._oracle_cum = np.cumsum(data.costs[order, route[order]])

    @property
    def t(self) -> int:
        return min(s.t for s in self.sims.values())

    @property
    def n_requests(self) -> int:
        return self.sim.n_requests

    @property
    def done(self) -> bool:
        return all(s.done for s in self.sims.values())

    def step(self, n: int | None = None) -> int:
        """Serve the next ``n`` (default: a tick) requests with every router."""
        n = self.settings.per_tick if n is None else int(n)
        served = 0
        for m, sim in self.sims.items():
            a = sim.t
            end = min(a + max(n, 0), sim.n_requests)
            if m == "paper":  # claims no bound: one block
                sim.step(end - a)
            while sim.t < end:
                sim.step(min(LCB_EVERY - sim.t % LCB_EVERY, end - sim.t))
                ts, vs = self._lcb[m]
                ts.append(sim.t)
                vs.append(sim.router.certified_lower_bound())
            served = max(served, sim.t - a)
        return served

    def v_note(self, mode: str) -> str:
        note = V_NOTE.get(mode, "")
        return note.format(scale=self.sims[mode].config.router.v_scale) if note else ""

    def router_headline(self, mode: str) -> dict[str, Any]:
        """One router's satisfaction against alpha, cost as a multiple of the static mixture,
        cost saved against the most accurate model, V, Q and its own lower bound."""
        sim = self.sims[mode]
        k = sim.t
        scale, unit = display_scale(self.data.cost_unit)
        rcfg = sim.config.router
        out: dict[str, Any] = {"mode": mode, "label": self.labels[mode], "color": ROUTER_COLORS[mode],
                               "q_label": Q_LABEL[mode], "v_note": self.v_note(mode),
                               "best_model": self.data.models[self.best_model], "raw_unit": self.data.cost_unit}
        if k == 0:
            v = sim.router.current_v() * (rcfg.v_scale if mode == "guarded" else 1.0)
            return {**out, "served": 0, "cost": 0.0, "cost_raw": 0.0, "cost_unit": unit,
                    "satisfaction": float("nan"), "sla": "not started", "v": v, "q": 0.0, "explored": 0,
                    "feedback": 0, "vs_mixture": float("nan"), "saved": 0.0, "saved_share": float("nan"),
                    "lcb": float("nan")}
        s = sim.summary()
        cost = float(s.operating_cost)
        best = float(self._best_cum[k - 1])
        return {**out, "served": k, "cost": cost / scale, "cost_raw": cost, "cost_unit": unit,
                "satisfaction": s.satisfaction, "sla": "met" if s.sla_met else "missed", "v": s.final_v,
                "q": s.final_q, "explored": s.explored, "feedback": s.feedback,
                "vs_mixture": cost / float(self._mix_cum[k - 1]) if self._mix_cum[k - 1] > 0 else float("nan"),
                "saved": best - cost, "saved_share": (best - cost) / best if best > 0 else float("nan"),
                "lcb": sim.router.certified_lower_bound()}

    def headline(self) -> dict[str, Any]:
        """Requests served and, per router (``routers``), its headline; the first router's
        cost, satisfaction, SLA, V and Q also at the top level."""
        per = [self.router_headline(m) for m in self.routers]
        first = per[0]
        return {"served": self.t, "total": self.n_requests, "alpha": self.alpha, "cost_unit": first["cost_unit"],
                **{k: first[k] for k in ("cost", "satisfaction", "sla", "v", "q", "explored", "feedback")},
                "routers": per}

    def _colors(self, names: list[str], title: str | None, columns: int | None = None) -> dict:
        enc = color_encoding("series", names, self.data.models, title, columns)
        for m, label in self.labels.items():  # "SLARouter" (one router) keeps its mode's colour
            enc["scale"]["range"][names.index(label)] = ROUTER_COLORS[m]
        return enc

    def charts(self, max_points: int | None = None) -> list[ChartFrame]:
        """The streaming charts, each series thinned to about ``max_points`` (default
        ``MAX_POINTS`` shared by the routers, so a redraw costs about the same with three
        routers as with one): queue, cost, satisfaction (keys as named), the call ratio per
        router (``ratio`` for the first, ``ratio:<mode>`` for the others) and ``events``."""
        if max_points is None:
            max_points = max(500, MAX_POINTS // len(self.routers))
        k = self.t
        n = self.n_requests
        idx = thin_indices(k, max_points)
        t = idx + 1
        rows = self.sim.order[:k]
        scale, unit = display_scale(self.data.cost_unit)
        labels = [self.labels[m] for m in self.routers]
        multi = len(self.routers) > 1

        def upto(values: list[np.ndarray]) -> list[float]:
            top = max((float(np.nanmax(v)) for v in values if len(v)), default=0.0)
            return [0.0, top * 1.05 if top > 0 else 1.0]
        out = []

        qs = {self.labels[m]: self.sims[m]._q[:k][idx] for m in self.routers}
        out.append(ChartFrame("queue", _long(t, qs),
                              _chart_spec("Virtual queue Q_t" + (" (contextual: certified shortfall)"
                                                                 if "contextual" in self.routers else ""),
                                         "Q", self._colors(labels, "router" if multi else None), n,
                                         y_domain=upto(list(qs.values())))))

        oracle = self._oracle_cum
        ref = thin_indices(k, max(2, max_points // 8))
        parts = [(self.labels[m], t, np.cumsum(self.data.costs[rows, self.sims[m]._model[:k]])[idx] / scale)
                 for m in self.routers]
        if k:
            parts.append(("static mixture", ref + 1, self._mix_cum[ref] / scale))
            if oracle is not None:
                parts.append(("oracle", ref + 1, oracle[ref] / scale))
            parts += [(f"only {mname}", ref + 1, self._single_cum[ref, j] / scale)
                      for j, mname in enumerate(self.data.models)]
        names = labels + ["static mixture"] + (["oracle"] if oracle is not None else []) \
            + [f"only {mname}" for mname in self.data.models]
        dash = {"field": "series", "type": "nominal", "legend": None,
                "scale": {"domain": names, "range": [[1, 0] if nm in labels else [6, 3] if nm in REFERENCES
                                                     else [2, 2] for nm in names]}}
        out.append(ChartFrame("cost", _long_parts(parts),
                              _chart_spec(f"Cumulative operating cost ({unit})", unit,
                                         self._colors(names, "router, references, single models", columns=3), n,
                                         y_domain=upto([p[2] for p in parts]), dash=dash)))

        sat_parts, lo = [], []
        for m in self.routers:
            sim = self.sims[m]
            sat = self.data.solved[rows, sim._model[:k]]
            sat_parts.append((self.labels[m], t, running_mean(sat)[idx]))
            ts, vs = self._lcb[m]
            band = np.full(len(t), np.nan, np.float32)
            if ts and m != "paper":
                tt, vv = np.asarray(ts, float), np.asarray(vs, float)
                ok = np.isfinite(vv)
                if ok.any():
                    band = np.interp(t, tt[ok], vv[ok]).astype(np.float32)
                    band[t < tt[ok][0]] = np.nan
            lo.append(band)
        sat_frame = _long_parts(sat_parts)
        sat_frame["lo"] = np.concatenate(lo).astype(np.float32) if lo else np.zeros(0, np.float32)
        out.append(ChartFrame("satisfaction", sat_frame,
                              _chart_spec("Running request satisfaction" + (
                                  " (band: the router's own 90% lower bound)"
                                  if any(m != "paper" for m in self.routers) else ""),
                                         "satisfaction", self._colors(labels, "router" if multi else None), n,
                                         rule=self.alpha, rule_label=f"alpha = {100 * self.alpha:.1f}%",
                                         percent=True, y_domain=[0.0, 1.0], band=True)))

        band_idx = thin_indices(k, max(2, max_points // 4))
        lo_w = np.maximum(0, band_idx + 1 - RATIO_WINDOW)
        width = (band_idx + 1 - lo_w)[:, None]
        for i, m in enumerate(self.routers):
            model = self.sims[m]._model[:k]
            counts = np.zeros((k + 1, self.data.n_models), np.int64)
            if k:
                np.cumsum(np.eye(self.data.n_models, dtype=np.int64)[model], axis=0, out=counts[1:])
            share = (counts[band_idx + 1] - counts[lo_w]) / np.maximum(width, 1)
            upper = np.cumsum(share, axis=1)  # bands stacked cheapest first
            ratio = _long(band_idx + 1, {mname: upper[:, j] for j, mname in enumerate(self.data.models)})
            ratio["lo"] = (ratio["value"].to_numpy() - share.T.reshape(-1)).astype(np.float32)
            title = f"Model call ratio{', ' + m if multi else ''} (last {RATIO_WINDOW} requests)"
            out.append(ChartFrame("ratio" if i == 0 else f"ratio:{m}", ratio,
                                  _chart_spec(title, "share of calls",
                                             color_encoding("series", list(self.data.models), self.data.models,
                                                            "model (cheapest first)"),
                                             n, area=True, percent=True, y_domain=[0.0, 1.0])))

        kinds = ["exploration", "feedback"] + ([] if multi else ["predictor update"])
        events, names = [], []
        for m in self.routers:
            sim = self.sims[m]
            explored = sim._explored[:k]
            fb = sim._feedback[:k] != NO_FEEDBACK
            for label, mask in (("exploration", explored), ("feedback", fb), ("predictor update", explored & fb)):
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
                a = self.sims[m]
                pts.append((self.labels[m], float(data.costs[a.order[:k], a._model[:k]].mean()),
                            float(data.solved[a.order[:k], a._model[:k]].mean())))
        if oracle is not None and oracle_sat is not None and k:
            pts.append(("oracle", float(oracle[k - 1] / k), float(oracle_sat[k - 1] / k)))
        frame = pd.DataFrame({"series": [p[0] for p in pts], "cost": np.array([p[1] for p in pts], np.float64),
                              "satisfaction": np.array([p[2] for p in pts], np.float64), "kind": "point"})
        front = pd.DataFrame({"series": "static mixture", "cost": self._frontier[:, 0],
                              "satisfaction": self._frontier[:, 1], "kind": "frontier"})
        frame = pd.concat([frame, front], ignore_index=True)
        names = [self.labels[m] for m in self.routers] + ["static mixture"] \
            + (["oracle"] if oracle is not None else []) + list(data.models)
        color = self._colors(names, None)
        lo, hi = float(np.min(mean_cost)), float(np.max(mean_cost))
        x = {"field": "cost", "type": "quantitative", "title": f"mean cost per request ({data.cost_unit}, log)",
             "scale": {"type": "log", "domain": [lo / 1.5, hi * 1.5]}}
        sats = np.concatenate([frame["satisfaction"].to_numpy(float), [float(self.alpha)]])
        y = {"field": "satisfaction", "type": "quantitative", "title": "satisfaction", "axis": {"format": "%"},
             "scale": {"domain": [max(0.0, float(np.nanmin(sats)) - 0.03), min(1.0, float(np.nanmax(sats)) + 0.03)]}}
        one = {"values": [{"rule": float(self.alpha), "label": f"alpha = {100 * self.alpha:.1f}%"}]}
        spec = {"title": "Cost against satisfaction (routers move; models and the static-mixture line stay)",
                "height": 260, "layer": [
                    {"transform": [{"filter": "datum.kind == 'frontier'"}],
                     "mark": {"type": "line", "strokeDash": [6, 3], "clip": True},
                     "encoding": {"x": x, "y": y, "color": color, "order": {"field": "satisfaction"}}},
                    {"transform": [{"filter": "datum.kind == 'point'"}],
                     "mark": {"type": "point", "filled": True, "size": 110, "clip": True},
                     "encoding": {"x": x, "y": y, "color": color,
                                  "tooltip": [{"field": "series"}, {"field": "cost", "format": ".4g"},
                                              {"field": "satisfaction", "format": ".1%"}]}},
                    {"transform": [{"filter": "datum.kind == 'point'"}],
                     "mark": {"type": "text", "align": "left", "dx": 7, "dy": -7, "fontSize": 11},
                     "encoding": {"x": x, "y": y, "text": {"field": "series"}, "color": color}},
                    {"data": one, "mark": {"type": "rule", "strokeDash": [6, 4], "color": "#c0392b"},
                     "encoding": {"y": {"field": "rule", "type": "quantitative"}}}]}
        return ChartFrame("tradeoff", frame, spec)

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


#: the label of the dashed alpha line on the experiment charts ("alpha = 80.0% (target)")
ALPHA_LABEL = {"transform": [{"aggregate": [{"op": "mean", "field": "alpha", "as": "alpha"}]},
                             {"calculate": "'alpha = ' + format(datum.alpha, '.1%') + ' (target)'", "as": "label"}],
               "mark": {"type": "text", "align": "left", "dx": 4, "dy": -7, "color": "#c0392b"},
               "encoding": {"y": {"field": "alpha", "type": "quantitative"}, "x": {"value": 0},
                            "text": {"field": "label"}}}


def comparison_chart(agg: pd.DataFrame, models: tuple[str, ...] | list[str] = ()) -> tuple[pd.DataFrame, dict]:
    """Cost against satisfaction per method, one panel per benchmark, alpha as a rule; one
    colour per method (routers and references as on Live run, single ``models`` in grey)."""
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
                     "color": color_encoding("method", list(dict.fromkeys(frame["method"].astype(str))),
                                             models, title="method"),
                     "shape": {"field": "SLA", "type": "nominal", "scale": {"domain": ["met", "missed"],
                                                                              "range": ["circle", "cross"]}},
                     "tooltip": [{"field": "method"}, {"field": "cost_mean", "format": ".4g"},
                                 {"field": "satisfaction_mean", "format": ".3f"}, {"field": "SLA"}]}},
                {"mark": {"type": "rule", "strokeDash": [6, 4], "color": "#c0392b"},
                 "encoding": {"y": {"aggregate": "mean", "field": "alpha", "type": "quantitative"}}},
                ALPHA_LABEL,
            ],
        },
    }
    return frame, spec


def sweep_charts(agg: pd.DataFrame, x: str, x_title: str, log: bool = False,
                 models: tuple[str, ...] | list[str] = ()) -> list[tuple[pd.DataFrame, dict]]:
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
                                "color": color_encoding(color, list(dict.fromkeys(frame[color].astype(str))),
                                                        models, title="method")}}]
        if y == "satisfaction":
            layers.append({"mark": {"type": "rule", "strokeDash": [6, 4], "color": "#c0392b"},
                           "encoding": {"y": {"aggregate": "mean", "field": "alpha", "type": "quantitative"}}})
            layers.append(ALPHA_LABEL)
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
