"""Charts of the Experiments page: cost against satisfaction per method and benchmark
(with error bars across seeds), cost and satisfaction against a swept parameter, and the
same specs rendered server-side as PNG or SVG for download."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from .charts import color_encoding

#: the colour of the SLA target on every experiment chart
ALPHA_COLOR = "#c0392b"
#: what the error bars of the comparison chart show (named in its title)
ERROR_BARS = "± 1 std across seeds"
#: formats :func:`export_chart` writes, with their MIME types (for download buttons)
EXPORT_FORMATS = {"png": "image/png", "svg": "image/svg+xml"}


def alpha_label(prefix: str = "alpha") -> dict:
    """The text layer that names the dashed alpha line ("alpha = 80.0% (target)"): a bare
    dashed line on a chart reads as just another series."""
    return {"transform": [{"aggregate": [{"op": "mean", "field": "alpha", "as": "alpha"}]},
                          {"calculate": f"'{prefix} = ' + format(datum.alpha, '.1%') + ' (target)'", "as": "label"}],
            "mark": {"type": "text", "align": "left", "dx": 4, "dy": -7, "color": ALPHA_COLOR},
            "encoding": {"y": {"field": "alpha", "type": "quantitative"}, "x": {"value": 0},
                         "text": {"field": "label"}}}


#: the label of the dashed alpha line on the experiment charts ("alpha = 80.0% (target)")
ALPHA_LABEL = alpha_label()


def alpha_layers(prefix: str = "alpha") -> list[dict]:
    """The dashed alpha rule and its label, always together, so no chart shows the line
    unexplained; ``prefix`` "mean alpha" where the line averages several benchmarks."""
    rule = {"mark": {"type": "rule", "strokeDash": [6, 4], "color": ALPHA_COLOR},
            "encoding": {"y": {"aggregate": "mean", "field": "alpha", "type": "quantitative"},
                         "tooltip": [{"aggregate": "mean", "field": "alpha", "type": "quantitative",
                                      "format": ".1%", "title": f"{prefix} (target)"}]}}
    return [rule, alpha_label(prefix)]


def _panels(agg: pd.DataFrame) -> pd.Series:
    """One panel per benchmark, and per feedback model when several were run (the same
    method under IID and bursty feedback must not share a panel)."""
    panel = agg["benchmark"].astype(str)
    if "feedback_model" in agg.columns and agg["feedback_model"].nunique() > 1:
        panel = panel + " · feedback " + agg["feedback_model"].astype(str)
    return panel


def comparison_chart(agg: pd.DataFrame, models: tuple[str, ...] | list[str] = ()) -> tuple[pd.DataFrame, dict]:
    """Cost against satisfaction per method, one panel per benchmark (and feedback model),
    alpha as a labelled rule, error bars of ± 1 std across seeds on both axes; one colour
    per method (routers and references as on Live run, single ``models`` in their own hues)."""
    cols = ["benchmark", "method", "seeds", "cost_mean", "cost_std", "satisfaction_mean", "satisfaction_std",
            "alpha", "sla_met", "cost_unit", "feedback_model"]
    frame = agg[[c for c in cols if c in agg.columns]].copy()
    frame["panel"] = _panels(agg)
    frame["SLA"] = np.where(frame["sla_met"], "met", "missed")
    for m in ("cost", "satisfaction"):
        std = frame[f"{m}_std"] if f"{m}_std" in frame.columns else 0.0
        frame[f"{m}_lo"] = frame[f"{m}_mean"] - std
        frame[f"{m}_hi"] = frame[f"{m}_mean"] + std
    unit = str(frame["cost_unit"].iloc[0]) if len(frame) else ""
    seeds = int(frame["seeds"].max()) if "seeds" in frame.columns and len(frame) else 0
    color = color_encoding("method", list(dict.fromkeys(frame["method"].astype(str))), models, title="method")
    x = {"field": "cost_mean", "type": "quantitative", "title": f"operating cost ({unit})", "scale": {"zero": False}}
    y = {"field": "satisfaction_mean", "type": "quantitative", "title": "request satisfaction",
         "scale": {"zero": False}}
    bars = [
        {"mark": {"type": "rule", "opacity": 0.6},
         "encoding": {"x": {**x, "field": "cost_lo"}, "x2": {"field": "cost_hi"}, "y": y, "color": color}},
        {"mark": {"type": "rule", "opacity": 0.6},
         "encoding": {"x": x, "y": {**y, "field": "satisfaction_lo"}, "y2": {"field": "satisfaction_hi"},
                      "color": color}},
    ]
    points = {"mark": {"type": "point", "filled": True, "size": 90},
              "encoding": {
                  "x": x, "y": y, "color": color,
                  "shape": {"field": "SLA", "type": "nominal", "scale": {"domain": ["met", "missed"],
                                                                           "range": ["circle", "cross"]},
                            "legend": {"orient": "bottom", "title": "SLA"}},  # never cut at the right edge
                  "tooltip": [{"field": "method"}, {"field": "cost_mean", "format": ".4g", "title": "cost (mean)"},
                              {"field": "cost_std", "format": ".2g", "title": "cost (std)"},
                              {"field": "satisfaction_mean", "format": ".3f", "title": "satisfaction (mean)"},
                              {"field": "satisfaction_std", "format": ".3f", "title": "satisfaction (std)"},
                              {"field": "SLA"}]}}
    seeds_text = f"{seeds} seed{'s' if seeds != 1 else ''}"
    spec = {
        "title": {"text": "Cost against satisfaction per method",
                  "subtitle": f"mean over {seeds_text}; error bars {ERROR_BARS}; dashed line: alpha (target)"},
        "facet": {"field": "panel", "type": "nominal", "title": None, "sort": list(dict.fromkeys(frame["panel"]))},
        "columns": 2,
        "resolve": {"scale": {"x": "independent", "y": "independent"}},
        "spec": {"height": 220, "width": 320, "layer": [*bars, points, *alpha_layers()]},
    }
    return frame, spec


def sweep_charts(agg: pd.DataFrame, x: str, x_title: str, log: bool = False,
                 models: tuple[str, ...] | list[str] = (), series: str | None = None
                 ) -> list[tuple[pd.DataFrame, dict]]:
    """Cost and satisfaction against a swept parameter, mean over benchmarks, one line
    per method (``series``: one line of that name through every method, e.g. the specs
    of a V sweep), dashed per feedback model when several were run."""
    if x not in agg.columns:
        raise ValueError(f"the results have no column {x!r}")
    if series is not None:
        agg = agg.assign(series=series)
    color = "series" if "series" in agg.columns else "method"
    several_fb = "feedback_model" in agg.columns and agg["feedback_model"].nunique() > 1
    keys = [color, x] + (["feedback_model"] if several_fb else [])
    frame = agg.groupby(keys, sort=True, observed=True).agg(
        cost=("cost_mean", "mean"), satisfaction=("satisfaction_mean", "mean"), alpha=("alpha", "mean")).reset_index()
    unit = str(agg["cost_unit"].iloc[0]) if len(agg) else ""
    several_bench = "benchmark" in agg.columns and agg["benchmark"].nunique() > 1
    xenc = {"field": x, "type": "quantitative", "title": x_title,
            **({"scale": {"type": "log"}, "axis": {"format": ".0e"}} if log else {})}
    out = []
    for y, title in (("cost", f"operating cost ({unit})"), ("satisfaction", "request satisfaction")):
        enc: dict[str, Any] = {"x": xenc, "y": {"field": y, "type": "quantitative", "title": title,
                                                "scale": {"zero": False}},
                               "color": color_encoding(color, list(dict.fromkeys(frame[color].astype(str))),
                                                       models, title="method")}
        if several_fb:
            enc["strokeDash"] = {"field": "feedback_model", "type": "nominal", "title": "feedback model",
                                 "legend": {"orient": "bottom", "symbolType": "stroke", "symbolStrokeWidth": 2}}
        layers = [{"mark": {"type": "line", "point": True}, "encoding": enc}]
        if y == "satisfaction":
            layers += alpha_layers("mean alpha" if several_bench else "alpha")
        out.append((frame, {"title": f"{title.split(' (')[0].capitalize()}, mean over benchmarks",
                            "height": 260, "layer": layers}))
    return out


# -- export -------------------------------------------------------------------------------
class ChartExportError(RuntimeError):
    """A chart could not be rendered to an image; the message says why, for the user."""


def _json_values(frame: pd.DataFrame) -> list[dict]:
    """The frame as JSON records (NaN as null, NumPy scalars as plain numbers)."""
    return json.loads(frame.to_json(orient="records", double_precision=15))


def standalone_spec(frame: pd.DataFrame, spec: dict, width: int = 420) -> dict:
    """The page's spec with its data inlined and a fixed size, as a renderer outside the
    browser needs it (Streamlit passes the data separately and sizes charts itself)."""
    full: dict[str, Any] = {"$schema": "https://vega.github.io/schema/vega-lite/v5.json",
                            "background": "white", **spec, "data": {"values": _json_values(frame)}}
    if "facet" not in full and "width" not in full:
        full["width"] = width
    return full


def render_chart(full_spec: dict, fmt: str, scale: float = 2.0) -> bytes:
    """A standalone Vega-Lite spec (:func:`standalone_spec`) as PNG or SVG, rendered on the
    server by vl-convert (no browser, nothing downloaded)."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(EXPORT_FORMATS)}, got {fmt!r}")
    try:
        import vl_convert
    except ImportError:
        raise ChartExportError(f"The chart cannot be saved as {fmt.upper()}: the package vl-convert-python "
                               "is not installed (pip install vl-convert-python).") from None
    try:
        if fmt == "png":
            return bytes(vl_convert.vegalite_to_png(full_spec, scale=scale))
        return vl_convert.vegalite_to_svg(full_spec).encode("utf-8")
    except Exception as exc:  # vl-convert reports every rendering problem as a plain exception
        raise ChartExportError(f"The chart could not be rendered as {fmt.upper()}: {_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    """The message of a renderer error without its JavaScript stack trace."""
    lines = [x.strip() for x in str(exc).splitlines() if x.strip() and not x.strip().startswith("at ")]
    return " ".join(lines[:2]) or type(exc).__name__


def export_chart(frame: pd.DataFrame, spec: dict, fmt: str) -> bytes:
    """The chart the page draws from ``frame`` and ``spec``, as PNG or SVG bytes."""
    return render_chart(standalone_spec(frame, spec), fmt)

