"""Charts of the Experiments page: cost against satisfaction per method and benchmark,
and cost and satisfaction against a swept parameter."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .charts import color_encoding

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


