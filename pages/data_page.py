"""Data: choose the dataset (demo, server path, upload), cost column, benchmarks, encoder.

Every change is tried in a widget callback before the page is drawn: when it is refused,
the data in use stays, the widget shows the value in use again, and the reason is written
on the page (never only in a tooltip); when it is accepted, the page says what was loaded.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import streamlit as st

from pages import _frame
from pages import _shared as sh
from slarouter_core.data import DataValidationError, choose_cost, unit_of
from slarouter_core.encoders import EncoderUnavailableError
from slarouter_core.importers import file_cost_metrics
from slarouter_core.live import ENCODER_CHOICES, DataSpec
from slarouter_core.live.tables import benchmark_long_table

OTHER_ENCODER = "other (hf:...)"
SOURCE_LABELS = {"demo": "Built-in demo (synthetic)", "path": "A path on the server",
                 "upload": "Upload a file"}
LOAD_ERRORS = (DataValidationError, ValueError, OSError)


# -- actions (widget callbacks) --------------------------------------------------------------
def notify(kind: str, lines: list[str], where: str) -> None:
    """Keep the outcome of the last action for the page to write next to ``where``."""
    st.session_state.data_notice = {"kind": kind, "lines": lines, "where": where}


def metric_list(metrics: list[str]) -> str:
    return ", ".join(f"{m} ({unit_of(m)})" for m in metrics) or "none"


def try_load(candidate: DataSpec, where: str) -> bool:
    """Switch to ``candidate`` if it loads; otherwise say why and keep the data in use."""
    try:
        sh.load_data(candidate)
    except LOAD_ERRORS as exc:
        in_use = sh.data_spec()
        notify("error", sh.problem_lines(exc)
               + [f"Still in use: **{sh.display_name(in_use)}** with cost {in_use.cost} ({unit_of(in_use.cost)})."],
               where)
        return False
    sh.set_data_spec(candidate)
    return True


def load_file(candidate: DataSpec, where: str) -> None:
    """Load a file with a cost it has (the current choice, else energy_joules, else its
    first metric) and say which one, and which the file offers."""
    try:
        metrics = file_cost_metrics(sh.source_path(candidate))
    except LOAD_ERRORS:
        try_load(candidate, where)  # names the problem as loading would
        return
    cost = choose_cost(metrics, candidate.cost)
    if try_load(replace(candidate, cost=cost, benchmarks=()), where):
        why = "" if cost == candidate.cost else f" ({candidate.cost} is not in this file)"
        notify("success", [f"Loaded **{sh.display_name(candidate)}** with cost **{cost} ({unit_of(cost)})**{why}.",
                           f"Costs in this file: {metric_list(metrics)}."], where)


def use_demo() -> None:
    load_file(replace(DataSpec(), encoder=sh.data_spec().encoder), "demo")


def load_path() -> None:
    path = st.session_state.get("w_path", "").strip()
    if not path:
        notify("error", ["Type a path first (a .parquet file, a MESS+ .csv/.json/.jsonl file or a folder)."], "path")
        return
    spec = sh.data_spec()
    load_file(DataSpec(source="path", path=path, cost=spec.cost, encoder=spec.encoder), "path")


def load_upload() -> None:
    up = st.session_state.get(upload_key())
    if up is None:
        return
    target = sh.save_upload(up.name, up.getvalue())
    spec = sh.data_spec()
    load_file(DataSpec(source="upload", path=str(target), cost=spec.cost, encoder=spec.encoder), "upload")
    if st.session_state.get("data_notice", {}).get("kind") == "error":  # a refused file leaves the box
        st.session_state.upload_round = st.session_state.get("upload_round", 0) + 1


def upload_key() -> str:
    return f"w_upload_{st.session_state.get('upload_round', 0)}"


def change_cost() -> None:
    spec = sh.data_spec()
    if try_load(replace(spec, cost=st.session_state.w_cost), "cost"):
        st.session_state.pop("data_notice", None)


def change_benchmarks() -> None:
    spec = sh.data_spec()
    names = all_benchmarks(spec)
    chosen = st.session_state.w_bench
    picked = tuple(b for b in names if b in chosen) if chosen and len(chosen) < len(names) else ()
    if try_load(replace(spec, benchmarks=picked), "cost"):
        st.session_state.pop("data_notice", None)


def all_benchmarks(spec: DataSpec) -> list[str]:
    try:
        return sh.load_data(replace(spec, benchmarks=())).benchmark_names
    except LOAD_ERRORS:
        return list(spec.benchmarks)


def change_encoder_choice() -> None:
    choice = st.session_state.w_encoder
    if choice in ENCODER_CHOICES:
        sh.set_data_spec(replace(sh.data_spec(), encoder=choice))
        st.session_state.pop("data_notice", None)


def change_encoder_spec() -> None:
    """An encoder typed by hand is loaded at once: one that is not on disk is refused here,
    with the reason, rather than accepted and failing later on another page."""
    enc = st.session_state.w_encoder_hf.strip()
    if enc in ("", "hf:"):
        return
    try:
        sh.encoder(enc)
    except EncoderUnavailableError as exc:
        notify("error", [str(exc), f"Still in use: encoder **{sh.data_spec().encoder}**."], "encoder")
        return
    sh.set_data_spec(replace(sh.data_spec(), encoder=enc))
    st.session_state.pop("data_notice", None)


def show_notice(where: str) -> None:
    """The outcome of the last action, as text on the page, next to the widget it is about."""
    note = st.session_state.get("data_notice")
    if note and note["where"] == where:
        text = "\n".join(f"- {line}" for line in note["lines"])
        if note["kind"] == "error":
            st.error("This could not be used:\n\n" + text)
        else:
            st.success(text)


# -- the page ---------------------------------------------------------------------------------
_frame.open_page("pages/data_page.py")
st.title("Data")
data = sh.current_data()
spec = sh.data_spec()
bench_text = ", ".join(spec.benchmarks) if spec.benchmarks else f"all {len(all_benchmarks(spec))}"
st.markdown(f"**In use:** {sh.display_name(spec)}" + (" · :orange-badge[SYNTHETIC]" if data.synthetic else "")
            + f" · {data.n_requests:,} requests · {data.n_models} models · cost **{data.cost_metric} "
            f"({data.cost_unit})** · benchmarks: {bench_text} · encoder: {spec.encoder}")
with st.container(border=True, key="data_start_here"):
    st.markdown("**New here?** The data below is ready to use. Open **Live run** and press **Start**: the "
                "contextual router and the paper's rule serve the same requests side by side, and the page says "
                "which one holds the SLA and at what cost.")
    st.page_link("pages/live_run.py", label="Go to Live run", icon="▶")

st.subheader("Source")
source = st.radio("Where the data comes from", list(SOURCE_LABELS), format_func=SOURCE_LABELS.get,
                  index=list(SOURCE_LABELS).index(spec.source), horizontal=True, key="w_source")
if source == "demo":
    st.caption("3,000 short synthetic requests, 4 models with energy (J), latency (ms) and tokens. "
               "Labelled SYNTHETIC everywhere: not real model logs.")
    if spec.source != "demo":
        st.button("Use the demo data", type="primary", on_click=use_demo)
    show_notice("demo")
elif source == "path":
    st.caption("A canonical `.parquet` file, or MESS+ logs: a `.csv`/`.json`/`.jsonl` file or a folder of them.")
    if "w_path" not in st.session_state:
        st.session_state.w_path = spec.path if spec.source == "path" else ""
    typed = st.text_input("Path on the server", key="w_path").strip()
    if typed:
        try:
            found = file_cost_metrics(Path(typed).expanduser())
            st.caption(f"Costs in this file: {metric_list(found)}. It will load with "
                       f"**{choose_cost(found, spec.cost)}**.")
        except LOAD_ERRORS as exc:
            st.caption(" ".join(sh.problem_lines(exc)))
    st.button("Load", type="primary", key="w_load_path", on_click=load_path)
    show_notice("path")
else:
    st.caption("Canonical parquet (schema in the README), or MESS+ CSV/JSON converted by the importer. "
               "Any file is accepted here and checked by the loader, which says what is wrong with it. "
               "Files are parsed as data only (never unpickled).")
    st.file_uploader("File", key=upload_key(), on_change=load_upload)
    show_notice("upload")

data = sh.current_data()
spec = sh.data_spec()
meta = data.metadata
if data.synthetic:
    st.warning("SYNTHETIC demo data: generated by `slarouter_core.synthetic`, not real model logs.")
for w in data.warnings:
    st.warning(w)
if isinstance(meta.get("import_report"), dict):
    rep = meta["import_report"]
    st.caption(f"MESS+ import: {rep.get('files')} file(s), {rep.get('rows_read')} rows read, "
               f"{rep.get('duplicates_dropped')} duplicate(s) dropped, {rep.get('rows')} rows kept.")

st.subheader("Cost and benchmarks")
left, right = st.columns(2)
metrics = data.cost_metrics
# the widgets always show the values in use: a refused change is undone, its reason written below
st.session_state.w_cost = data.cost_metric if data.cost_metric in metrics else metrics[0]
left.selectbox("Routing cost (per-model metric)", metrics, format_func=lambda m: f"{m} ({unit_of(m)})",
               key="w_cost", on_change=change_cost)
st.session_state.w_bench = list(spec.benchmarks)
right.multiselect("Benchmarks (empty: all)", all_benchmarks(spec), key="w_bench", on_change=change_benchmarks)
show_notice("cost")

st.subheader(f"The zoo: accuracy against cost ({data.n_requests:,} requests)")
st.caption("Each dot is a model (one colour per model on every chart). The green line is the static mixture: for each "
           "accuracy target, the cheapest mix of models that ignores the request text. A router that reads "
           "the text earns its keep by landing above and to the left of it.")
frame, spec_chart = sh.zoo_picture(spec)
st.vega_lite_chart(frame, spec_chart, width="content")
table = benchmark_long_table(data)
cost_col = f"mean cost ({data.cost_unit})"
st.dataframe(table, hide_index=True, width="stretch", height=min(36 * (len(table) + 1), 460),
             column_order=["benchmark", "model", "rows", "accuracy", "cost/request"],
             column_config={"accuracy": st.column_config.NumberColumn(format="%.3f"),
                            "cost/request": st.column_config.TextColumn(f"mean cost/request ({data.cost_unit})")})

st.subheader("Text encoder")
known = list(ENCODER_CHOICES)
options = known + [OTHER_ENCODER]
st.radio("Encoder for the request embeddings", options,
         index=options.index(spec.encoder if spec.encoder in known else OTHER_ENCODER), horizontal=True,
         key="w_encoder", on_change=change_encoder_choice,
         help="minilm: all-MiniLM-L6-v2, packaged, runs offline (a few seconds for the demo). "
              "minilm+layers=2,4,6: the same model with its layers 2, 4 and 6 pooled, which routed the demo "
              "and Llama-3 a little cheaper (STUDIES.md, 'Several layers of the same MiniLM'). "
              "hashing: instant word-hashing features. hf:<id or path>: any encoder already on disk "
              "(add +layers=i,j,... to pool several of its layers).")
if st.session_state.w_encoder == OTHER_ENCODER:
    st.text_input("Encoder spec (press Enter to use it)", value=spec.encoder if spec.encoder not in known else "hf:",
                  key="w_encoder_hf", on_change=change_encoder_spec)
show_notice("encoder")
st.caption("Embeddings are computed once per dataset and encoder, then cached on disk and in memory.")
if st.button("Compute embeddings now", key="w_embed"):
    emb = sh.embeddings(data)
    if emb is not None:
        st.success(f"{emb.shape[0]:,} embeddings of width {emb.shape[1]} ready ({spec.encoder}).")

_frame.close_page("pages/data_page.py")
