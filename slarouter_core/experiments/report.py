"""Reports of aggregated results: Markdown in the shape of the paper's Table 2, the
overview and gap tables, and the result files the CLI writes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .aggregation import aggregate, gaps, group_keys, overview
from .alpha import MEET_SHARE, seeds_needed


def _fmt_group_title(r: pd.Series, keys: list[str]) -> str:
    parts = []
    if "dataset" in keys:
        parts.append(str(r["dataset"]))
    if "benchmark" in keys:
        parts.append(f"**{r['benchmark']}**")
    title = " / ".join(parts) if parts else "all"
    extra = f"alpha = {100 * r['alpha']:.1f}%"
    if "feedback_rate" in keys:
        extra += f", feedback rate {r['feedback_rate']:g}"
    if "feedback_model" in keys and r["feedback_model"] != "iid":
        extra += f", feedback {r['feedback_model']}"
    return f"{title} ({extra})"


def _fmt_post(r: pd.Series) -> str:
    """Post-convergence satisfaction (the stream's second half, a start fixed in advance;
    see :class:`metrics.Summary`) over the seeds that have it ("k/n seeds"); "–" for
    methods without a queue."""
    conv = r.get("converged", np.nan)
    if pd.isna(conv):
        return "–" if pd.isna(r.get("post_convergence_mean", np.nan)) else f"{100 * r['post_convergence_mean']:.1f}"
    if conv == 0:
        return "not converged"
    return f"{100 * r['post_convergence_mean']:.1f} ({int(conv)}/{int(r['seeds'])} seeds)"


def format_table(agg: pd.DataFrame) -> str:
    """Markdown in the shape of the paper's Table 2: one table per benchmark, rows =
    methods; operating cost (incl. training cost) and request satisfaction as mean ± std
    over seeds, post-convergence satisfaction (queue methods), model call ratio, SLA met/missed; the cheapest deployable method meeting
    the SLA in bold and marked "cheapest"; reference bounds marked "(ref)"."""
    call_cols = [c for c in agg.columns if c.startswith("calls_")]
    models = "/".join(c[len("calls_"):] for c in call_cols)
    unit = agg["cost_unit"].iloc[0] if len(agg) else "MJ"
    keys = group_keys(agg)
    blocks = []
    groups = agg.groupby(keys, sort=False) if keys else [(None, agg)]
    for _, block in groups:
        first = block.iloc[0]
        lines = [_fmt_group_title(first, keys), "",
                 f"| method | operating cost ({unit}) | request satisfaction (%) | post-conv. (%) | "
                 f"model call ratio ({models}) | seeds ≥ alpha | own LCB (%) | SLA |",
                 "|---|---|---|---|---|---|---|---|"]
        for _, r in block.iterrows():
            ratio = "/".join("-" if pd.isna(r[c]) else f"{100 * r[c]:.0f}%" for c in call_cols)
            name = str(r["method"]) + (" (ref)" if r.get("reference", False) else "")
            cost = f"{r['cost_mean']:.3f} ± {r['cost_std']:.3f}"
            sat = f"{100 * r['satisfaction_mean']:.1f} ± {100 * r['satisfaction_std']:.1f}"
            post = _fmt_post(r)
            sla = "met" if r["sla_met"] else "missed"
            met = f"{int(r['seeds_met'])}/{int(r['seeds'])}" if "seeds_met" in r else "–"
            lcb = r.get("lcb_mean", math.nan)
            lcb = "–" if pd.isna(lcb) else f"{100 * lcb:.1f}"
            if r.get("cheapest", False):
                name, cost, sat, sla = f"**{name}**", f"**{cost}**", f"**{sat}**", "**met, cheapest**"
            lines.append(f"| {name} | {cost} | {sat} | {post} | {ratio} | {met} | {lcb} | {sla} |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def format_overview(agg: pd.DataFrame) -> str:
    ov = overview(agg)
    cols = [c for c in ("cost_vs_static_mixture", "cost_vs_oracle") if c in ov.columns]
    head = ("| method | SLA met | cheapest | satisfaction − alpha (pp, mean) | mean cost |"
            + "".join(f" cost ÷ {c[len('cost_vs_'):].replace('_', ' ')} (geo. mean) |" for c in cols))
    lines = [head, "|---|---|---|---|---|" + "---|" * len(cols)]
    unit = agg["cost_unit"].iloc[0] if len(agg) else ""
    for _, r in ov.iterrows():
        line = (f"| {r['method']} | {r['sla_met']}/{r['benchmarks']} | {r['cheapest']} | "
                f"{r['satisfaction_minus_alpha_pp']:+.1f} | {r['cost_mean']:.3f} {unit} |")
        line += "".join(f" {r[c]:.2f}× |" for c in cols)
        lines.append(line)
    return "\n".join(lines)


def _ratio(x: float) -> str:
    """A cost ratio, or a dash where it could not be formed (the single models did not run)."""
    return f"{x:.2f}×" if np.isfinite(x) else "–"


def format_gaps(agg: pd.DataFrame, method_key: str = "slarouter") -> str:
    g = gaps(agg, method_key)
    if g.empty:
        return f"(no {method_key} runs)"
    unit = agg["cost_unit"].iloc[0]
    lines = [f"| benchmark | method | alpha (%) | satisfaction − alpha (pp) | SLA | cost ({unit}) | "
             "÷ static mixture | ÷ static mixture at its satisfaction | ÷ oracle | cheapest compliant (÷ its cost) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in g.iterrows():
        bench = r.get("benchmark", "all")
        if r.get("feedback_model", "iid") != "iid":
            bench = f"{bench} [feedback {r['feedback_model']}]"
        cc = r["cheapest_compliant"]
        cc = f"{cc} ({r['cost_vs_cheapest_compliant']:.2f}×)" if cc != "none" else "none"
        lines.append(f"| {bench} | {r['method']} | {100 * r['alpha']:.1f} | {r['gap_pp']:+.1f} | "
                     f"{'met' if r['sla_met'] else 'missed'} | {r['cost']:.3f} | {r['cost_vs_static_mixture']:.2f}× | "
                     f"{_ratio(r['cost_vs_mixture_at_satisfaction'])} | {r['cost_vs_oracle']:.2f}× | {cc} |")
    return "\n".join(lines)


def write_results(results: pd.DataFrame, path: str | Path) -> Path:
    """Tidy rows to ``.parquet`` or ``.csv`` (by suffix)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix.lower() == ".parquet":
        results.to_parquet(p, index=False)
    elif p.suffix.lower() == ".csv":
        results.to_csv(p, index=False)
    elif p.suffix.lower() == ".json":
        p.write_text(results.to_json(orient="records", indent=2))
    else:
        raise ValueError(f"results file must end in .csv, .parquet or .json, got {p.name}")
    return p


def report_text(agg: pd.DataFrame) -> str:
    """The Table-2 report of aggregated results as Markdown: overview, SLARouter against
    the references (when it ran), the paper's scoring beside ours and the published
    Table 2 beside our figures (:mod:`.paper`), and one table per benchmark."""
    text = "### Overview\n\n" + format_overview(agg) + "\n\n"
    if "method_key" in agg.columns and (agg["method_key"] == "slarouter").any():
        text += "### SLARouter against the references\n\n" + format_gaps(agg) + "\n\n"
    from .paper import format_paper_section

    text += format_paper_section(agg) + "\n"
    return text + "### Per benchmark\n\n" + format_table(agg) + "\n"


def write_report(results: pd.DataFrame, markdown: str | Path | None = None,
                 table_csv: str | Path | None = None) -> str:
    """The Table-2 report as Markdown (overview + per-benchmark tables); optionally
    written to ``markdown`` and the aggregated table to ``table_csv``. Returns the text."""
    agg = aggregate(results)
    text = report_text(agg)
    if markdown:
        p = Path(markdown)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    if table_csv:
        p = Path(table_csv)
        p.parent.mkdir(parents=True, exist_ok=True)
        agg.to_csv(p, index=False)
    return text


# -- dashboard tables: one comparison table, one pivot per sweep ---------------------------
#: what "cheapest" means, for a caption or a column's help
CHEAPEST_NOTE = ("cheapest: per benchmark (and feedback setting), the deployable method with the lowest mean "
                 "operating cost among those that meet alpha. The oracle and the static mixture are reference "
                 "bounds (they read the stream's labels or means), so they are never the cheapest.")
#: what "seeds ≥ alpha" and "met" mean
SEEDS_MET_NOTE = (f"seeds ≥ alpha: the seeds whose whole-stream satisfaction reached alpha. A method meets "
                  f"alpha (SLA met) when at least {MEET_SHARE:.0%} of its seeds do ({seeds_needed(20)} of 20, "
                  f"{seeds_needed(3)} of 3); a mean above alpha is not enough.")
#: the cell choices of :func:`pivot_table`
PIVOT_METRICS = ("satisfaction and cost", "satisfaction (%)", "operating cost", "seeds ≥ alpha")
#: column labels of the swept parameters in :func:`pivot_table`
SWEEP_LABELS = {"V": "V", "feedback_rate": "feedback rate", "feedback_model": "feedback",
                "alpha_setting": "alpha"}
#: row keys a pivot adds next to the method when they vary (and are not the swept column)
_PIVOT_ROW_KEYS = ("dataset", "feedback_model", "feedback_rate")


def _several(agg: pd.DataFrame, column: str) -> bool:
    return column in agg.columns and agg[column].nunique(dropna=False) > 1


def comparison_table(agg: pd.DataFrame) -> pd.DataFrame:
    """One row per (benchmark, feedback setting, method) with plain numeric columns: the
    table the Experiments page shows and exports (CSV, Markdown). Seeds meeting alpha as
    "k/n" with the exact 95% interval on the share of runs that do, the SLA verdict, and
    whether the method is the cheapest compliant one."""
    unit = str(agg["cost_unit"].iloc[0]) if len(agg) else ""
    out = pd.DataFrame(index=agg.index)
    for col, name in (("dataset", "dataset"), ("feedback_model", "feedback model"),
                      ("feedback_rate", "feedback rate"), ("alpha_setting", "alpha setting")):
        if _several(agg, col):
            out[name] = agg[col]
    out["benchmark"] = agg["benchmark"]
    out["alpha (%)"] = (100 * agg["alpha"]).round(1)
    out["method"] = agg["method"].astype(str) + np.where(agg.get("reference", False), " (ref)", "")
    out[f"cost mean ({unit})"] = agg["cost_mean"]
    out[f"cost std ({unit})"] = agg["cost_std"]
    out["satisfaction mean (%)"] = (100 * agg["satisfaction_mean"]).round(2)
    out["satisfaction std (%)"] = (100 * agg["satisfaction_std"]).round(2)
    out["seeds ≥ alpha"] = [f"{int(m)}/{int(n)}" for m, n in zip(agg["seeds_met"], agg["seeds"])]
    # what the count says about the share of runs meeting alpha (18 of 20: 68-99%)
    out["runs ≥ alpha, 95% CI (%)"] = [f"{100 * lo:.0f}-{100 * hi:.0f}"
                                       for lo, hi in zip(agg["met_rate_low"], agg["met_rate_high"])]
    out["SLA"] = np.where(agg["sla_met"], "met", "missed")
    out["cheapest"] = agg["cheapest"].astype(bool)
    return out.reset_index(drop=True)


def _header(column: str, value: Any) -> str:
    label = SWEEP_LABELS.get(column, column)
    text = f"{value:g}" if isinstance(value, (int, float, np.number)) and not isinstance(value, bool) else str(value)
    return f"{label} {text}"


def pivot_table(agg: pd.DataFrame, column: str, metric: str = PIVOT_METRICS[0],
                benchmark: str | None = None) -> pd.DataFrame:
    """One table for a whole sweep: rows = methods (and feedback model or rate when those
    vary too), columns = the values of ``column``, cells = ``metric`` (one of
    :data:`PIVOT_METRICS`). ``benchmark`` None averages over benchmarks (costs and
    satisfaction: mean of the per-benchmark means; seeds ≥ alpha: summed); a name keeps
    that benchmark only. Replaces one table per setting (20 tables for 5 rates x 4
    benchmarks) with one."""
    if column not in agg.columns:
        raise ValueError(f"the results have no column {column!r} to pivot on")
    if metric not in PIVOT_METRICS:
        raise ValueError(f"metric must be one of {', '.join(PIVOT_METRICS)}, got {metric!r}")
    sel = agg if benchmark is None else agg[agg["benchmark"] == benchmark]
    if sel.empty:
        raise ValueError(f"no results for benchmark {benchmark!r}")
    rows = ["method"] + [k for k in _PIVOT_ROW_KEYS if k != column and _several(sel, k)]
    cells = sel.groupby(rows + [column], sort=False, dropna=False).agg(
        satisfaction=("satisfaction_mean", "mean"), cost=("cost_mean", "mean"),
        met=("seeds_met", "sum"), seeds=("seeds", "sum"))
    unit = str(sel["cost_unit"].iloc[0])
    if metric == "satisfaction and cost":
        values = [f"{100 * s:.1f}% · {c:.3g} {unit}" for s, c in zip(cells["satisfaction"], cells["cost"])]
    elif metric == "satisfaction (%)":
        values = list((100 * cells["satisfaction"]).round(1))
    elif metric == "operating cost":
        values = list(cells["cost"])
    else:
        values = [f"{int(m)}/{int(n)}" for m, n in zip(cells["met"], cells["seeds"])]
    long = cells.index.to_frame(index=False).assign(value=values)
    swept = list(dict.fromkeys(sel[column]))
    if all(isinstance(v, (int, float, np.number)) for v in swept):
        swept = sorted(swept)
    wide = long.pivot(index=rows, columns=column, values="value")
    order = list(dict.fromkeys(map(tuple, long[rows].itertuples(index=False, name=None))))
    first = {m: i for i, m in enumerate(dict.fromkeys(o[0] for o in order))}
    order.sort(key=lambda o: first[o[0]])  # a method's rows together (stable: axis order kept)
    wide = wide.reindex(index=pd.MultiIndex.from_tuples(order, names=rows) if len(rows) > 1
                        else pd.Index([o[0] for o in order], name="method"), columns=swept)
    wide.columns = [_header(column, v) for v in swept]
    if metric in ("satisfaction and cost", "seeds ≥ alpha"):
        wide = wide.fillna("–")
    return wide.reset_index().rename(columns={k: k.replace("_", " ") for k in rows})
