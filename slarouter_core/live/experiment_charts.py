"""Charts of the Experiments page: cost against satisfaction per method and benchmark
(with error bars across seeds), cost and satisfaction against a swept parameter, and the
same specs rendered server-side as PNG or SVG for download."""

from __future__ import annotations

import json
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from .charts import FRAME, cached_spec, color_channel

#: the colour of the SLA target on every experiment chart
ALPHA_COLOR = "#c0392b"
#: what the error bars of the comparison chart show (named in its title)
ERROR_BARS = "± 1 std across seeds"
#: formats :func:`export_chart` writes, with their MIME types (for download buttons)
EXPORT_FORMATS = {"png": "image/png", "svg": "image/svg+xml"}


def alpha_label(prefix: str = "alpha") -> alt.Chart:
    """The text layer that names the dashed alpha line ("alpha = 80.0% (target)"): a bare
    dashed line on a chart reads as just another series."""
    return (alt.Chart().transform_aggregate(alpha="mean(alpha)")
            .transform_calculate(label=f"'{prefix} = ' + format(datum.alpha, '.1%') + ' (target)'")
            .mark_text(align="left", dx=4, dy=-7, color=ALPHA_COLOR)
            .encode(y=alt.Y("alpha:Q"), x=alt.XValue(0), text=alt.Text("label:N")))


#: the label of the dashed alpha line on the experiment charts ("alpha = 80.0% (target)")
ALPHA_LABEL = alpha_label()


def alpha_layers(prefix: str = "alpha") -> list[alt.Chart]:
    """The dashed alpha rule and its label, always together, so no chart shows the line
    unexplained; ``prefix`` "mean alpha" where the line averages several benchmarks."""
    rule = alt.Chart().mark_rule(strokeDash=[6, 4], color=ALPHA_COLOR).encode(
        y=alt.Y("mean(alpha):Q"), tooltip=alt.Tooltip("mean(alpha):Q", format=".1%", title=f"{prefix} (target)"))
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
    return frame, _comparison_spec(unit, seeds, list(dict.fromkeys(frame["method"].astype(str))), list(models),
                                   list(dict.fromkeys(frame["panel"])))


@cached_spec
def _comparison_spec(unit: str, seeds: int, methods: list[str], models: list[str], panels: list[str]) -> alt.FacetChart:
    """The Altair chart of :func:`comparison_chart` (it depends on the names, not the numbers)."""
    color = color_channel("method", methods, models, title="method")
    x_title, y_title, free = f"operating cost ({unit})", "request satisfaction", alt.Scale(zero=False)
    x = alt.X("cost_mean:Q", title=x_title, scale=free)
    y = alt.Y("satisfaction_mean:Q", title=y_title, scale=free)
    base = alt.Chart().encode(color=color)
    bars = [base.mark_rule(opacity=0.6).encode(x=alt.X("cost_lo:Q", title=x_title, scale=free), x2=alt.X2("cost_hi"),
                                               y=y),
            base.mark_rule(opacity=0.6).encode(x=x, y=alt.Y("satisfaction_lo:Q", title=y_title, scale=free),
                                               y2=alt.Y2("satisfaction_hi"))]
    points = base.mark_point(filled=True, size=90).encode(
        x=x, y=y,
        shape=alt.Shape("SLA:N", scale=alt.Scale(domain=["met", "missed"], range=["circle", "cross"]),
                        legend=alt.Legend(orient="bottom", title="SLA")),  # never cut at the right edge
        tooltip=[alt.Tooltip("method:N"), alt.Tooltip("cost_mean:Q", format=".4g", title="cost (mean)"),
                 alt.Tooltip("cost_std:Q", format=".2g", title="cost (std)"),
                 alt.Tooltip("satisfaction_mean:Q", format=".3f", title="satisfaction (mean)"),
                 alt.Tooltip("satisfaction_std:Q", format=".3f", title="satisfaction (std)"), alt.Tooltip("SLA:N")])
    seeds_text = f"{seeds} seed{'s' if seeds != 1 else ''}"
    return (alt.layer(*bars, points, *alpha_layers(), data=FRAME).properties(width=320, height=220)
            .facet(alt.Facet("panel:N", title=None, sort=panels), columns=2)
            .resolve_scale(x="independent", y="independent")
            # room on the right: the right panel's last x label ("1.0") was cut in half
            .properties(padding={"left": 5, "top": 5, "right": 24, "bottom": 5},
                        title=alt.Title("Cost against satisfaction per method",
                                        subtitle=f"mean over {seeds_text}; error bars {ERROR_BARS}; "
                                                 "dashed line: alpha (target)")))


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
    names = list(dict.fromkeys(frame[color].astype(str)))
    alpha_prefix = "mean alpha" if several_bench else "alpha"
    return [(frame, _sweep_spec(x, x_title, log, color, names, list(models), several_fb, y, title, alpha_prefix))
            for y, title in (("cost", f"operating cost ({unit})"), ("satisfaction", "request satisfaction"))]


@cached_spec
def _sweep_spec(x: str, x_title: str, log: bool, color: str, names: list[str], models: list[str],
                several_fb: bool, y: str, y_title: str, alpha_prefix: str) -> alt.LayerChart:
    """The Altair chart of one of :func:`sweep_charts` (``y``: cost or satisfaction)."""
    xenc = alt.X(f"{x}:Q", title=x_title, **({"scale": alt.Scale(type="log"), "axis": alt.Axis(format=".0e")}
                                            if log else {}))
    line = alt.Chart().mark_line(point=True).encode(
        x=xenc, y=alt.Y(f"{y}:Q", title=y_title, scale=alt.Scale(zero=False)),
        color=color_channel(color, names, models, title="method"))
    if several_fb:
        line = line.encode(strokeDash=alt.StrokeDash(
            "feedback_model:N", title="feedback model",
            legend=alt.Legend(orient="bottom", symbolType="stroke", symbolStrokeWidth=2)))
    layers = [line] + (alpha_layers(alpha_prefix) if y == "satisfaction" else [])
    return alt.layer(*layers, title=f"{y_title.split(' (')[0].capitalize()}, mean over benchmarks", height=260)


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

