"""Vega-Lite chart specs shared by the pages: one colour per router, reference, method
and model on every chart, streaming line/band charts and the thinned long frames they draw."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache, wraps
from typing import Any, Callable, Mapping

import altair as alt
import numpy as np
import pandas as pd

from ..policies.registry import DEFAULT_POLICY, POLICY_COLORS

#: points per plotted series; the full history is a download. The run's own series (Q,
#: satisfaction, its cumulative cost) get all of them; smooth reference series get fewer
#: (single-model cost lines: 1/8, call-ratio bands: 1/4, event ticks: 1/2 per kind), which
#: keeps a browser redraw cheap without visible change.
MAX_POINTS = 2000
#: requests in the moving window of the model-call-ratio chart
RATIO_WINDOW = 200


# -- colours ------------------------------------------------------------------------------
#: one colour per router mode and per reference, the same on every chart and page
ROUTER_COLORS = POLICY_COLORS  # each policy's own (PolicyInfo.color), a live view of the registry
REFERENCE_COLORS = {"static mixture": "#2e9d4f", "static_mixture": "#2e9d4f", "oracle": "#7b3fc4"}
#: the experiment runner's other methods: distinct hues, none shared with the above
METHOD_COLORS = {"messplus": "#8c564b", "mess+": "#8c564b", "carrot": "#0fa3b1", "causal": "#b5a900",
                 "random": "#e377c2", "slarouter (data-driven v)": "#9c2a1f"}
#: spare hues, handed out when two names would otherwise share a colour
SPARE_COLORS = ("#9467bd", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#ff9896", "#98df8a", "#aec7e8",
                "#ffbb78", "#c5b0d5", "#bcbd22", "#17becf")
#: single models, in cost order: 20 saturated hues, each at least 3:1 against white (a
#: line or label stays visible; the cheapest model's was a near-invisible light grey) and
#: any two at least 16 apart in CIELAB (the first 11 at least 20), ordered so that
#: neighbours in cost order differ in hue and lightness (a grey scale made 11 models look
#: alike); a 21st model and beyond cycle. tests/core/live/test_vega_specs.py measures both.
MODEL_PALETTE = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#5b9518", "#a6761d", "#1f78b4", "#b15928",
                 "#6a3d9a", "#17a2b8", "#8c564b", "#8a8a00", "#c2185b", "#2e7d32", "#000080", "#525252",
                 "#3949ab", "#800000", "#9932cc", "#f032e6")
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
        return ROUTER_COLORS[DEFAULT_POLICY]
    return SPARE_COLORS[sum(map(ord, low)) % len(SPARE_COLORS)]


def color_encoding(field: str, names: list[str], models: tuple[str, ...] | list[str] = (),
                   title: str | None = None, columns: int | None = None, width: int = HALF_WIDTH, *,
                   own: Mapping[str, str] | None = None) -> dict:
    """A nominal colour encoding with one fixed colour per name and a legend below the chart
    that shows every entry (in as many columns as fit ``width`` px, labels not cut).
    ``own``: a name's colour where it is not :func:`series_color`'s (a router drawn under a
    label that does not name its mode); it too yields to a name before it in that colour."""
    names = list(dict.fromkeys(str(n) for n in names))
    own = own or {}
    colours: list[str] = []
    for n in names:  # never two names in one colour
        c = own[n] if n in own else series_color(n, models)
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


def cost_encodings(names: list[str], models: tuple[str, ...] | list[str], routers: Mapping[str, str],
                   title: str | None, references: tuple[str, ...] | list[str] = ()) -> tuple[dict, dict]:
    """The colour and stroke-dash encodings of a cumulative-cost chart (Live run's and the
    service monitor's): each router (``routers``: label to its mode's colour) solid, the
    ``references`` dashed, every other line (a single model) dotted; the colours by
    :func:`color_encoding`'s rule, so no two names share one."""
    color = color_encoding("series", names, models, title, own=routers)
    dash = {"field": "series", "type": "nominal", "legend": None,
            "scale": {"domain": list(names), "range": [[1, 0] if n in routers else [6, 3] if n in references
                                                       else [2, 2] for n in names]}}
    return color, dash


def color_channel(field: str, names: list[str], models: tuple[str, ...] | list[str] = (),
                  title: str | None = None, columns: int | None = None, width: int = HALF_WIDTH) -> alt.Color:
    """:func:`color_encoding` as an Altair channel (built from its keywords: Altair parses a
    plain dict against the schema, about 15 ms a channel)."""
    return alt.Color(**color_encoding(field, names, models, title, columns, width))


# -- Altair to the page's spec ------------------------------------------------------------
#: where a chart's data goes: the page passes its frame beside the spec (Streamlit sends it
#: as Arrow), so :func:`vl_spec` removes this name; Altair needs it to build facets
FRAME = alt.Data(name="frame")
_PLACEHOLDERS = ({"name": "frame"}, {"name": "empty"})


def vl_spec(chart: alt.TopLevelMixin) -> dict:
    """An Altair chart as the Vega-Lite dict ``st.vega_lite_chart(frame, spec)`` takes: the
    data placeholders, Altair's default view size and the schema URL left out (the page
    passes the frame and sizes the chart). Not validated here: the tests validate."""
    spec = chart.to_dict(validate=False)
    for key in ("$schema", "config"):
        spec.pop(key, None)
    datasets = {k: v for k, v in spec.pop("datasets", {}).items() if v != [{}]}
    if datasets:
        spec["datasets"] = datasets
    _drop_placeholders(spec)
    return spec


def cached_spec(build: Callable[..., alt.TopLevelMixin]) -> Callable[..., dict]:
    """``build`` (JSON-able arguments to an Altair chart) as a function that returns the
    chart's :func:`vl_spec`, built once per distinct arguments (Altair takes milliseconds
    to build and copy a layered chart; a page reruns with the same arguments) and copied
    for every call (a caller may change its copy). Tuples arrive as lists."""
    @lru_cache(maxsize=256)
    def spec_json(args_json: str) -> str:
        return json.dumps(vl_spec(build(*json.loads(args_json))))

    @wraps(build)
    def spec(*args: Any) -> dict:
        return json.loads(spec_json(json.dumps(args)))

    spec.cache_info, spec.cache_clear = spec_json.cache_info, spec_json.cache_clear  # type: ignore[attr-defined]
    return spec


def _drop_placeholders(spec: dict) -> None:
    if spec.get("data") in _PLACEHOLDERS:
        del spec["data"]
    for key in ("layer", "hconcat", "vconcat", "concat"):
        for sub in spec.get(key, ()):
            _drop_placeholders(sub)
    if isinstance(spec.get("spec"), dict):
        _drop_placeholders(spec["spec"])


def rule_layers(value: float, label: str, color: str = "#c0392b") -> list[alt.Chart]:
    """A dashed horizontal rule at ``value`` and its label at the left, on their own one-row
    data (drawn once, not once per point of the chart's frame)."""
    one = alt.Data(values=[{"rule": float(value), "label": label}])
    rule = alt.Chart(one).mark_rule(strokeDash=[6, 4], color=color).encode(y=alt.Y("rule:Q"))
    text = alt.Chart(one).mark_text(align="left", dx=4, dy=-7, color=color).encode(
        y=alt.Y("rule:Q"), x=alt.XValue(0), text=alt.Text("label:N"))
    return [rule, text]


def _chart_spec(title: str, y_title: str, color: dict, x_max: int | None, rule: float | None = None,
                rule_label: str = "", height: int = 220, area: bool = False, percent: bool = False,
                y_domain: list[float] | None = None, band: bool = False, dash: dict | None = None) -> dict:
    """A line chart of a long (t, series, value) frame, or (``area``) stacked bands of a
    long (t, series, value, lo) frame whose band edges were stacked beforehand (``lo`` to
    ``value``): the browser then draws without a stack transform, which keeps redraws
    of long histories cheap. ``band``: also a shaded band from ``lo`` to ``value`` where
    ``lo`` is set (a router's own lower confidence bound). ``color`` and ``dash``: the
    colour and stroke-dash encodings as dicts (:func:`color_encoding`).

    The x axis is fixed to the stream length; ``y_domain`` fixes the y axis (charts with
    no data yet get one, so that they draw a frame and no infinite extent). The optional
    horizontal rule (e.g. alpha) carries its own one-row data: drawn once, not per point.

    A tick calls this with the arguments of the tick before: the spec is built once per
    distinct call (:func:`cached_spec`), so Altair costs a tick nothing.
    """
    return _streaming_chart(title, y_title, color, x_max, rule, rule_label, height, area, percent, y_domain,
                            band, dash)


@cached_spec
def _streaming_chart(title: str, y_title: str, color: dict, x_max: int | None, rule: float | None,
                     rule_label: str, height: int, area: bool, percent: bool, y_domain: list[float] | None,
                     band: bool, dash: dict | None) -> alt.LayerChart:
    """The Altair chart of :func:`_chart_spec`."""
    x = alt.X("t:Q", title="request", scale=alt.Scale(domain=[0, max(int(x_max), 1)]) if x_max is not None
              else alt.Undefined)
    y = alt.Y("value:Q", title=y_title, scale=alt.Scale(domain=y_domain) if y_domain is not None else alt.Undefined,
              axis=alt.Axis(format="%") if percent else alt.Undefined)
    if band and isinstance(color.get("legend"), dict):  # the legend shows lines, not the pale band
        color = {**color, "legend": {**color["legend"], "symbolType": "stroke", "symbolOpacity": 1,
                                     "symbolStrokeWidth": 2.5}}
    base = alt.Chart(FRAME).encode(x=x, color=alt.Color(**color))
    if area:
        main = base.mark_area(interpolate="linear", stroke="#ffffff", strokeWidth=0.3).encode(y=y, y2=alt.Y2("lo"))
    else:
        main = base.mark_line(interpolate="linear", clip=True).encode(y=y)
    if dash is not None:
        main = main.encode(strokeDash=alt.StrokeDash(**dash))
    layers: list[alt.Chart] = []
    if band:
        layers.append(base.transform_filter("isValid(datum.lo)").mark_area(opacity=0.18, clip=True)
                      .encode(y=alt.Y("lo:Q"), y2=alt.Y2("value")))
    layers.append(main)
    if rule is not None:
        layers += rule_layers(rule, rule_label)
    return alt.layer(*layers, title=title, height=height)


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
#: Category names on a y axis (the event rows, "contextual: exploration") are never cut.
FAST_RENDER = {"usermeta": {"embedOptions": {"renderer": "canvas"}},
               "config": {"aria": False, "axisYDiscrete": {"labelLimit": 0}},
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

