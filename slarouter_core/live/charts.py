"""Vega-Lite chart specs shared by the pages: one colour per router, reference, method
and model on every chart, streaming line/band charts and the thinned long frames they draw."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

#: points per plotted series; the full history is a download. The run's own series (Q,
#: satisfaction, its cumulative cost) get all of them; smooth reference series get fewer
#: (single-model cost lines: 1/8, call-ratio bands: 1/4, event ticks: 1/2 per kind), which
#: keeps a browser redraw cheap without visible change.
MAX_POINTS = 2000
#: requests in the moving window of the model-call-ratio chart
RATIO_WINDOW = 200


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
#: single models, in cost order: 20 saturated hues dark enough to read as text on white,
#: ordered so that neighbours in cost order differ in hue and lightness (a grey scale
#: made 11 models look alike); a 21st model and beyond cycle
MODEL_PALETTE = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#a6761d", "#1f78b4", "#b15928",
                 "#6a3d9a", "#17a2b8", "#8c564b", "#a8a81c", "#c2185b", "#2e7d32", "#ef6c00", "#525252",
                 "#3949ab", "#9e0142", "#00897b", "#c79100")
#: charts that stack or list every model group the rest into one "other" band beyond this
TOP_MODELS = 12
#: the width (px) a half-page chart has at 1400 px, for fitting its legend's columns
HALF_WIDTH = 420


def model_colors(models: tuple[str, ...] | list[str]) -> list[str]:
    """Single models in categorical hues (``MODEL_PALETTE``), in the given (cost) order."""
    return [MODEL_PALETTE[j % len(MODEL_PALETTE)] for j in range(len(models))]


def legend_columns(names: list[str], width: int = HALF_WIDTH, cap: int = 4) -> int:
    """How many legend columns fit ``width`` px with every label whole (about 6.5 px a
    character at the legend's 11 px font, plus symbol and gap): long model names get one
    column (the legend grows down, never past the chart's right edge)."""
    longest = max((len(str(n)) for n in names), default=1)
    return max(1, min(cap, len(names), int(width // (longest * 6.5 + 40))))


def series_color(name: str, models: tuple[str, ...] | list[str] = ()) -> str:
    """The colour of a router, reference, method or single model (any page).

    Routers by mode (``paper``, ``guarded``, ``contextual``, also as ``SLARouter``,
    ``slarouter[mode]`` or ``slarouter_mode``), references and baselines by name, single
    models (``m``, ``only m``, ``single:m``) by their place in ``models`` (cost order) in
    ``MODEL_PALETTE``; anything else gets a fixed hue from its name.
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
                   title: str | None = None, columns: int | None = None, width: int = HALF_WIDTH) -> dict:
    """A nominal colour encoding with one fixed colour per name and a legend below the chart
    that shows every entry (in as many columns as fit ``width`` px, labels not cut)."""
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
                         "columns": columns or legend_columns(names, width), "labelLimit": 0, "symbolLimit": 0,
                         "titleLimit": 0}
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
#: plot's own, so a legend below the chart adds room instead of squeezing the plot. A
#: right padding keeps a right-hand axis title off the edge: anything drawn there is cut.
FAST_RENDER = {"usermeta": {"embedOptions": {"renderer": "canvas"}}, "config": {"aria": False},
               "autosize": {"type": "fit-x", "contains": "padding"}, "padding": {"left": 5, "top": 5, "right": 10,
                                                                                 "bottom": 5}}


#: characters of a chart title per line: a half-page chart at 1400 px holds about 55 of
#: the title's 13 px bold font before Vega cuts the title with an ellipsis
TITLE_CHARS = 50


def wrap_title(title: Any, chars: int = TITLE_CHARS) -> Any:
    """A chart title (text, lines or a Vega-Lite title object) broken into lines of at most
    ``chars`` characters at spaces, so that no title is cut at a half-page chart's edge."""
    if isinstance(title, dict):
        return {**title, "text": wrap_title(title.get("text", ""), chars)}
    if not isinstance(title, str) or len(title) <= chars:
        return title
    lines: list[str] = []
    for word in title.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= chars:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def title_text(spec: dict) -> str:
    """A spec's title as one line of text, however it was wrapped (for tests and lookups)."""
    t = spec.get("title", "")
    t = t.get("text", "") if isinstance(t, dict) else t
    return " ".join(t) if isinstance(t, list) else str(t)


@dataclass
class ChartFrame:
    """One chart: its data (already thinned) and its Vega-Lite spec (drawn on a canvas,
    its title in lines that fit)."""

    key: str
    frame: pd.DataFrame
    spec: dict

    def __post_init__(self) -> None:
        self.spec = {**self.spec, **FAST_RENDER}
        if "title" in self.spec:
            self.spec["title"] = wrap_title(self.spec["title"])

