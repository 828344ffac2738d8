"""Experiments: methods x seeds per benchmark (the paper's Table 2), V and feedback sweeps."""

from __future__ import annotations

import streamlit as st

from pages import _shared as sh
from slarouter_core.experiments import (PRESETS, Dataset, GridConfig, MethodSpec, aggregate, format_overview,
                                        format_table, run_grid)
from slarouter_core.live import comparison_chart, parse_numbers, settings_method_params, sweep_charts
from slarouter_core.simulator import PAPER_SEEDS

st.title("Experiments")
st.caption("Every method runs on each benchmark's own seeded stream (same order and feedback plan for all "
           "methods); offline methods (CARROT, Causal) train on a seeded history split, whose cost is added. "
           "Alpha per benchmark: the sidebar's alpha, or the midpoint of that benchmark.")
ss = st.session_state
data = sh.current_data()
spec = sh.data_spec()
run = sh.run_settings()

MINE = "mine"
LABELS = {MINE: "SLARouter (sidebar settings)", **{k: (v.label or k) for k, v in PRESETS.items()}}
LABELS["single"] = "each model alone"


def method_specs(keys: list[str]) -> tuple[MethodSpec, ...]:
    out = []
    for k in keys:
        if k == MINE:
            out.append(MethodSpec("slarouter", settings_method_params(run), label=LABELS[MINE]))
        else:
            out.append(PRESETS[k])
    return tuple(out)


def run_with_progress(config: GridConfig, label: str):
    emb = sh.embeddings(data)
    if emb is None:
        return None
    bar = st.progress(0.0, text=f"{label}: starting")

    def progress(done: int, total: int) -> None:
        bar.progress(done / max(total, 1), text=f"{label}: {done}/{total} runs")

    try:
        rows = run_grid(Dataset("data", data, emb), config, progress=progress)
    except ValueError as exc:
        bar.empty()
        st.error(f"The runs could not start: {exc}")
        return None
    bar.empty()
    return rows


def seeds_box(key: str):
    text = st.text_input("Seeds (comma separated)", value=", ".join(map(str, PAPER_SEEDS)), key=key)
    try:
        return parse_numbers(text, "seed", integer=True, low=0)
    except ValueError as exc:
        st.error(str(exc))
        return None


alpha = run.alpha if run.alpha is not None else "midpoint"
tab_cmp, tab_v, tab_rate = st.tabs(["Comparison", "V sweep", "Feedback-rate sweep"])

with tab_cmp:
    keys = st.multiselect("Methods", list(LABELS), default=["single", "static_mixture", "oracle", "messplus", MINE],
                          format_func=LABELS.get, key="w_exp_methods")
    seeds = seeds_box("w_exp_seeds")
    st.caption(f"{len(data.benchmark_names)} benchmark(s) · feedback rate {run.feedback_rate:g} · "
               f"alpha {'midpoint per benchmark' if run.alpha is None else f'{run.alpha:.3f}'}")
    if st.button("Run comparison", type="primary", key="w_exp_run", disabled=not keys or seeds is None):
        cfg = GridConfig(methods=method_specs(keys), seeds=seeds, feedback_rates=(run.feedback_rate,), alpha=alpha)
        rows = run_with_progress(cfg, "Comparison")
        if rows is not None:
            ss.exp_rows = rows
    rows = ss.get("exp_rows")
    if rows is not None:
        agg = aggregate(rows)
        overview, per_bench = format_overview(agg), format_table(agg)
        report = "## Overview\n\n" + overview + "\n\n## Per benchmark\n\n" + per_bench + "\n"
        st.markdown("#### Overview\n\n" + overview)
        frame, chart = comparison_chart(agg, data.models)
        st.vega_lite_chart(frame, chart)
        st.markdown("#### Per benchmark (the paper's Table 2)\n\n" + per_bench)
        d1, d2, d3 = st.columns(3)
        d1.download_button("Runs (CSV)", rows.to_csv(index=False), "slarouter_runs.csv", "text/csv",
                           on_click="ignore", key="w_exp_dl_rows")
        d2.download_button("Table (CSV)", agg.to_csv(index=False), "slarouter_table.csv", "text/csv",
                           on_click="ignore", key="w_exp_dl_agg")
        d3.download_button("Report (Markdown)", report, "slarouter_report.md", "text/markdown",
                           on_click="ignore", key="w_exp_dl_md")

with tab_v:
    st.caption("SLARouter with a fixed V per value (c and alpha from the sidebar settings).")
    v_text = st.text_input(f"V values (per {data.cost_unit})", value="1e-6, 1e-5, 1e-4, 1e-3, 1e-2", key="w_vs_values")
    v_seeds = seeds_box("w_vs_seeds")
    try:
        v_values = parse_numbers(v_text, "V", low=1e-15)
    except ValueError as exc:
        st.error(str(exc))
        v_values = None
    if st.button("Run V sweep", type="primary", key="w_vs_run", disabled=v_values is None or v_seeds is None):
        specs = tuple(MethodSpec("slarouter", {"V": v, "c": float(run.c)}, label=f"V={v:g}") for v in v_values)
        rows = run_with_progress(GridConfig(methods=specs, seeds=v_seeds, feedback_rates=(run.feedback_rate,),
                                            alpha=alpha), "V sweep")
        if rows is not None:
            ss.vs_rows = rows
    rows = ss.get("vs_rows")
    if rows is not None:
        agg = aggregate(rows)
        agg["V"] = agg["method"].str.slice(2).astype(float)
        agg["series"] = "SLARouter (fixed V)"
        for col, (frame, chart) in zip(st.columns(2), sweep_charts(agg, "V", "V (log scale)", log=True,
                                                                   models=data.models)):
            col.vega_lite_chart(frame, chart, width="stretch")
        st.markdown(format_table(agg))
        st.download_button("V sweep runs (CSV)", rows.to_csv(index=False), "slarouter_v_sweep.csv", "text/csv",
                           on_click="ignore", key="w_vs_dl")

with tab_rate:
    r_keys = st.multiselect("Methods", list(LABELS), default=["messplus", MINE], format_func=LABELS.get,
                            key="w_rs_methods")
    r_text = st.text_input("Feedback rates", value="0.05, 0.1, 0.2, 0.5, 1", key="w_rs_values")
    r_seeds = seeds_box("w_rs_seeds")
    try:
        rates = parse_numbers(r_text, "feedback rate", low=0.0, high=1.0)
    except ValueError as exc:
        st.error(str(exc))
        rates = None
    if st.button("Run feedback-rate sweep", type="primary", key="w_rs_run",
                 disabled=not r_keys or rates is None or r_seeds is None):
        rows = run_with_progress(GridConfig(methods=method_specs(r_keys), seeds=r_seeds, feedback_rates=rates,
                                            alpha=alpha), "Feedback-rate sweep")
        if rows is not None:
            ss.rs_rows = rows
    rows = ss.get("rs_rows")
    if rows is not None:
        agg = aggregate(rows)
        for col, (frame, chart) in zip(st.columns(2), sweep_charts(agg, "feedback_rate", "feedback rate",
                                                                   models=data.models)):
            col.vega_lite_chart(frame, chart, width="stretch")
        st.markdown(format_table(agg))
        st.download_button("Feedback-rate sweep runs (CSV)", rows.to_csv(index=False), "slarouter_rate_sweep.csv",
                           "text/csv", on_click="ignore", key="w_rs_dl")
