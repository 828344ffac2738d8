"""How a dataset and its costs read to a person: human units, the zoo and per-benchmark
tables."""

from __future__ import annotations

import math

import pandas as pd

from ..data import RoutingData

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
