"""How a dataset and its costs read to a person: human units, the zoo and per-benchmark
tables, and the zoo as a picture (accuracy against cost, with the static-mixture frontier)."""

from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from ..baselines import static_mixture_lp
from ..data import RoutingData
from .charts import FRAME, cached_spec, color_channel

# -- display helpers ----------------------------------------------------------------------
def display_scale(unit: str) -> tuple[float, str]:
    """Divisor and label for totals: joules are shown in MJ."""
    return (1e6, "MJ") if unit == "J" else (1.0, unit)


_PREFIXES = {"J": ((1e9, "GJ"), (1e6, "MJ"), (1e3, "kJ"), (1.0, "J")),
             "ms": ((3.6e6, "h"), (6e4, "min"), (1e3, "s"), (1.0, "ms")),
             "s": ((3600.0, "h"), (60.0, "min"), (1.0, "s"))}


def human_cost(value: float, unit: str) -> str:
    """A cost in human units and digits: ``6.079e6 ms`` is "1.69 h", ``0.0001004 USD`` is
    "$0.0001" (dollars always, as on the charts' axes: never cents under a USD header),
    ``3.5e6 J`` is "3.5 MJ"; NaN is "-"."""
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
        decimals = min(12, 2 - math.floor(math.log10(a)))  # three significant digits, no exponent
        return "$" + f"{v:.{decimals}f}".rstrip("0").rstrip(".")
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



# -- the zoo at a glance, for 2 to 20 models ------------------------------------------------
#: the label of the static-mixture frontier on the zoo charts (its colour: ``series_color``)
FRONTIER = "static mixture"
#: model names are written beside their points up to this many models (more would overlap)
LABEL_MODELS = 8


def benchmark_long_table(data: RoutingData) -> pd.DataFrame:
    """One row per benchmark (then "(all)") and model, models in cost order: benchmark,
    model, rows, accuracy, mean cost (unit in the header) and that cost in human units.

    Long, not one column pair per model: five columns whether the zoo has 2 models or
    20, so no column is ever cut off.
    """
    long = data.summary()
    if len(data.benchmark_names) == 1:  # "(all)" would repeat the one benchmark's rows
        long = long[long["benchmark"] != "(all)"].reset_index(drop=True)
    cost_col = f"mean cost ({data.cost_unit})"
    long["cost/request"] = [human_cost(v, data.cost_unit) for v in long[cost_col]]
    return long[["benchmark", "model", "rows", "accuracy", "cost/request", cost_col]]


def mixture_frontier(acc: np.ndarray, cost: np.ndarray, points: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """The static mixture's frontier: for each accuracy target from the cheapest model's
    accuracy to the best one's, the mean cost of the cheapest text-blind mix of models
    (:func:`slarouter_core.baselines.static_mixture_lp`). Returns (costs, targets).

    The LP's cost is piecewise linear in the target with its kinks at models'
    accuracies, so it is solved there only (at most one LP per model) and filled in
    between with ``points`` exact points per piece, which a log cost axis draws curved.
    """
    acc = np.asarray(acc, np.float64)
    cost = np.asarray(cost, np.float64)
    cheapest = int(np.lexsort((-acc, cost))[0])  # ties: the more accurate
    lo, hi = float(acc[cheapest]), float(acc.max())
    knots = np.unique(np.concatenate([[lo, hi], acc[(acc >= lo) & (acc <= hi)]]))
    values = np.array([static_mixture_lp(acc, cost, float(a))[1] for a in knots])
    if len(knots) == 1:
        return values, knots
    targets = np.unique(np.concatenate([np.linspace(a, b, points + 1) for a, b in zip(knots[:-1], knots[1:])]))
    return np.interp(targets, knots, values), targets


def zoo_chart_frame(data: RoutingData, per_benchmark: bool = True) -> pd.DataFrame:
    """What :func:`zoo_chart` draws: per benchmark and for all requests ("(all)"), or
    only the latter (not ``per_benchmark``), each model's accuracy and mean cost, and the
    static-mixture frontier. A single benchmark is one group, under its own name."""
    names = list(data.benchmark_names)
    groups = names + ["(all)"] if per_benchmark and len(names) > 1 else ["(all)"]
    rows: list[pd.DataFrame] = []
    bench = data.frame["benchmark"].to_numpy()
    for b in groups:
        mask = np.ones(len(bench), bool) if b == "(all)" else bench == b
        b = names[0] if len(names) == 1 else b
        acc = data.solved[mask].mean(axis=0)
        cost = data.costs[mask].mean(axis=0)
        f_cost, f_acc = mixture_frontier(acc, cost)
        rows.append(pd.DataFrame({"benchmark": b, "series": list(data.models), "kind": "model",
                                  "cost": cost, "accuracy": acc, "order": np.arange(data.n_models)}))
        rows.append(pd.DataFrame({"benchmark": b, "series": FRONTIER, "kind": "frontier",
                                  "cost": f_cost, "accuracy": f_acc, "order": np.arange(len(f_acc))}))
    frame = pd.concat(rows, ignore_index=True)
    frame["cost/request"] = [human_cost(v, data.cost_unit) for v in frame["cost"]]
    return frame


def zoo_chart(data: RoutingData, per_benchmark: bool = True, legend: bool = True, labels: bool = True,
              width: int = 220, height: int = 200) -> tuple[pd.DataFrame, dict]:
    """The zoo as a picture: accuracy against mean cost per request (log scale: zoos span
    orders of magnitude) for each model, one panel per benchmark and one for all
    requests, with the static-mixture frontier (what any router must beat without
    reading the text). Models in the categorical hues of every chart (``MODEL_PALETTE``),
    their names beside the points (``labels``, for zoos of up to :data:`LABEL_MODELS`)
    and in tooltips always; ``legend``: a colour legend below.

    A model that costs 0 has no place on a log axis: the axis is then linear, and says so.
    """
    frame = zoo_chart_frame(data, per_benchmark)
    log = bool((frame["cost"] > 0).all())
    return frame, _zoo_spec(list(data.models), data.cost_unit, log, legend, labels,
                            list(dict.fromkeys(frame["benchmark"])), width, height)


@cached_spec
def _zoo_spec(models: list[str], unit: str, log: bool, legend: bool, labels: bool, panels: list[str], width: int,
              height: int) -> alt.TopLevelMixin:
    """The Altair chart of :func:`zoo_chart` (it depends on the names, not the numbers)."""
    x = alt.X("cost:Q", title=f"{unit}/request ({'log scale' if log else 'linear: a model costs 0'})",
              scale=alt.Scale(type="log") if log else alt.Scale(zero=True))
    y = alt.Y("accuracy:Q", title="accuracy", scale=alt.Scale(zero=False), axis=alt.Axis(format=".0%"))
    color = color_channel("series", models + [FRONTIER], models,
                          title="model (cheapest first)" if legend else None,
                          width=3 * width)  # the legend sits below three panels
    base = alt.Chart().encode(x=x, y=y)
    model_rows = base.transform_filter("datum.kind == 'model'")
    layers = [
        base.transform_filter("datum.kind == 'frontier'").mark_line(strokeWidth=2).encode(
            color=color, order=alt.Order("order:Q"),
            tooltip=[alt.Tooltip("series:N"), alt.Tooltip("accuracy:Q", title="target", format=".3f"),
                     alt.Tooltip("cost/request:N", title="cheapest mix costs")]),
        model_rows.mark_point(filled=True, size=80, stroke="#333333", strokeWidth=0.6, opacity=1).encode(
            color=color, tooltip=[alt.Tooltip("series:N", title="model"), alt.Tooltip("benchmark:N"),
                                  alt.Tooltip("accuracy:Q", format=".3f"),
                                  alt.Tooltip("cost/request:N", title="mean cost")]),
    ]
    if labels and len(models) <= LABEL_MODELS:
        layers.append(model_rows.mark_text(align="left", dx=7, dy=-6, fontSize=10, color="#333333")
                      .encode(text=alt.Text("series:N")))
    if len(panels) == 1:
        return alt.layer(*layers, height=height)
    return (alt.layer(*layers, data=FRAME).properties(width=width, height=height)
            .facet(alt.Facet("benchmark:N", title=None, sort=panels), columns=min(len(panels), 3))
            .resolve_scale(x="independent", y="independent"))


# -- data grids that fit the page -------------------------------------------------------------
#: the main column's width (px) at a 1400 px window with the sidebar open, less a margin
MAIN_WIDTH = 900
#: the data grid's 14 px font: px per character (generous: capitals and digits are wide),
#: and a cell's padding plus a header's sort and help icons
GRID_CHAR_PX = 7.0
GRID_PAD_PX = 28


def grid_cell_text(value: object, number_format: str = "%.4g") -> str:
    """A cell as the grid writes it (floats with ``number_format``, booleans as a box)."""
    if isinstance(value, (bool, np.bool_)):
        return "[x]"
    if isinstance(value, (float, np.floating)):
        return "" if not math.isfinite(float(value)) else number_format % float(value)
    return str(value)


def grid_columns(table: pd.DataFrame, short: dict[str, str] | None = None,
                 number_format: str = "%.4g") -> dict[str, dict]:
    """Per column of a data grid: ``label`` (``short`` names for long headers; the full
    name becomes the header's ``help``), ``width`` in px wide enough for the label and
    every cell, and the ``format`` of float columns (None for others).

    A data grid cuts what does not fit its column with an ellipsis, and a grid wider than
    the page scrolls sideways, hiding its last columns: at 1400 px an 11-model zoo's
    tables did both. The widths' sum is then what the page must have
    room for (:data:`MAIN_WIDTH` at 1400 px)."""
    short = short or {}
    out: dict[str, dict] = {}
    for col in table.columns:
        label = short.get(str(col), str(col))
        is_float = pd.api.types.is_float_dtype(table[col])
        cells = [grid_cell_text(v, number_format) for v in table[col]]
        chars = max([len(label)] + [len(c) for c in cells])
        out[str(col)] = {"label": label, "width": int(math.ceil(chars * GRID_CHAR_PX + GRID_PAD_PX)),
                         "help": str(col) if label != str(col) else None,
                         "format": number_format if is_float else None}
    return out


def short_names(models: tuple[str, ...] | list[str]) -> list[str]:
    """Model names without their vendor prefix ("meta-llama/Llama-3.1-8B" to "Llama-3.1-8B")
    where that keeps them apart: for a narrow column (the full names stay in its header's
    help and on the page around it)."""
    tails = [str(m).rsplit("/", 1)[-1] for m in models]
    return tails if len(set(tails)) == len(tails) else [str(m) for m in models]
