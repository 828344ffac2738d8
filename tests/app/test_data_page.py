"""Data page: sources, bad inputs explained as text next to the value in use, a file's
cost metrics found before loading, models never dropped without a word, big zoos."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from slarouter_core.data import write_parquet
from tests.conftest import make_frame
from tests.core.live.zoo_frames import dollar_zoo

from .conftest import open_app


def errors(at) -> str:
    return " ".join(e.value for e in at.error)


def successes(at) -> str:
    return " ".join(s.value for s in at.success)


def warnings(at) -> str:
    return " ".join(w.value for w in at.warning)


def sidebar_text(at) -> str:
    return " ".join(m.value for m in at.sidebar.markdown) + " " + " ".join(c.value for c in at.sidebar.caption)


def parquet_bytes(frame: pd.DataFrame, tmp_path, name: str = "f.parquet") -> bytes:
    return write_parquet(frame, tmp_path / name).read_bytes()


def upload(at, name: str, payload: bytes):
    at.radio(key="w_source").set_value("upload").run()
    at.file_uploader[0].upload(name, payload).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def dollars_only(n: int = 40) -> pd.DataFrame:
    frame = make_frame(n=n).drop(columns=[f"{m}_energy_joules" for m in ("small", "medium", "large")])
    for k, m in enumerate(("small", "medium", "large")):
        frame[f"{m}_cost_usd"] = 10.0 ** (k - 4)
    return frame


# -- bad inputs ---------------------------------------------------------------------------
def test_bad_parquet_upload_names_the_column_and_keeps_the_data(tmp_path):
    frame = make_frame(n=30)
    frame.loc[4, "medium_energy_joules"] = -5.0
    frame = frame.drop(columns=["large_solved"]).assign(large_solved=[2] + [0] * 29)
    at = upload(open_app(), "bad.parquet", parquet_bytes(frame, tmp_path))
    text = errors(at)
    assert "medium_energy_joules" in text and "negative" in text and "row 4" in text
    assert "large_solved" in text and "binary" in text
    assert "Still in use: **built-in demo**" in text  # what runs instead, said as text
    assert at.session_state.data_spec.source == "demo"
    assert at.file_uploader[0].value is None  # the refused file does not stay in the box as if in use


def test_bad_messplus_csv_upload_is_explained():
    at = upload(open_app(), "logs.csv", b"doc_id,input_text\n1,hello\n")
    text = errors(at)
    assert "benchmark_name" in text and "label_" in text and "logs.csv" in text


def test_not_a_parquet_file_is_explained():
    at = upload(open_app(), "x.parquet", b"this is not parquet")
    assert "could not be read as parquet" in errors(at)


def test_any_file_type_reaches_the_loader_which_says_why_it_is_refused():
    """The uploader used to refuse a .txt file in the browser (red, the reason in a
    tooltip) while the old data ran on: the loader now says why, as text."""
    at = upload(open_app(), "results.txt", b"doc_id,benchmark\n")
    text = errors(at)
    assert "results.txt is not a parquet file" in text and "Still in use" in text


def test_upload_errors_name_the_users_file_not_the_servers_copy():
    at = upload(open_app(), "my results.parquet", b"not parquet at all")
    text = errors(at)
    assert "my results.parquet" in text
    assert "slarouter-uploads" not in text and ".parquet" in text


def test_a_vanished_upload_is_named_by_its_own_name(tmp_path):
    """The fallback note when the session's file cannot be loaded any more named the
    server's copy (a hash under the temporary folder), not the file the user uploaded."""
    at = upload(open_app(), "mine.parquet", parquet_bytes(make_frame(n=40), tmp_path))
    stored = Path(at.session_state.data_spec.path)
    stored.unlink()
    at.run()
    note = warnings(at)
    assert "Could not load mine.parquet" in note and "mine.parquet" in note.split("Could not load", 1)[1]
    assert "slarouter-uploads" not in note and stored.parent.name not in note
    assert at.session_state.data_spec.source == "demo"


def test_a_refused_cost_change_shows_the_cost_in_use_and_why(tmp_path):
    frame = make_frame(n=40)
    frame.loc[3, "large_latency_ms"] = float("nan")  # latency is listed but cannot be used
    at = upload(open_app(), "holes.parquet", parquet_bytes(frame, tmp_path))
    assert at.session_state.data_spec.cost == "energy_joules"
    at.selectbox(key="w_cost").set_value("latency_ms").run()
    assert not at.exception
    text = errors(at)
    assert "large_latency_ms" in text and "missing or infinite" in text
    assert "Still in use: **holes.parquet** with cost energy_joules (J)" in text
    assert at.selectbox(key="w_cost").value == "energy_joules"  # the widget shows the value in use
    assert at.session_state.data_spec.cost == "energy_joules"
    assert "cost **energy_joules (J)**" in at.markdown[0].value  # and so does the page's first line


# -- good inputs ----------------------------------------------------------------------------
def test_good_upload_becomes_the_dataset(tmp_path):
    at = upload(open_app(), "mine.parquet", parquet_bytes(make_frame(n=40), tmp_path))
    assert not at.error
    assert at.session_state.data_spec.source == "upload"
    assert "Loaded **mine.parquet** with cost **energy_joules (J)**" in successes(at)
    zoo = at.sidebar.table[0].value
    assert list(zoo["model"]) == ["small", "medium", "large"]
    assert "40 requests" in sidebar_text(at)
    assert "**mine.parquet**" in sidebar_text(at)  # the user's name, not the copy's
    assert "**In use:** mine.parquet" in at.markdown[0].value


def test_an_upload_without_energy_loads_with_a_cost_it_has_and_says_which(tmp_path):
    at = upload(open_app(), "usd.parquet", parquet_bytes(dollars_only(), tmp_path))
    assert not at.error, errors(at)
    assert at.session_state.data_spec.cost == "latency_ms"  # no energy_joules: the file's first metric
    said = successes(at)
    assert "with cost **latency_ms (ms)** (energy_joules is not in this file)" in said
    assert "latency_ms (ms), cost_usd (USD)" in said
    assert at.selectbox(key="w_cost").options == ["latency_ms (ms)", "cost_usd (USD)"]
    at.selectbox(key="w_cost").set_value("cost_usd").run()
    assert at.session_state.data_spec.cost == "cost_usd" and not at.error
    assert "cost: cost_usd (USD)" in sidebar_text(at)


def test_a_path_shows_its_metrics_before_loading_and_keeps_the_current_choice(tmp_path):
    frame = dollars_only(50)
    path = write_parquet(frame, tmp_path / "usd.parquet")
    at = open_app()
    at.selectbox(key="w_cost").set_value("latency_ms").run()  # the current choice, which the file has
    at.radio(key="w_source").set_value("path").run()
    at.text_input(key="w_path").set_value(str(path)).run()
    shown = " ".join(c.value for c in at.caption)
    assert "Costs in this file: latency_ms (ms), cost_usd (USD). It will load with **latency_ms**" in shown
    assert at.session_state.data_spec.source == "demo"  # nothing loaded yet
    at.button(key="w_load_path").click().run()
    assert at.session_state.data_spec.path == str(path) and at.session_state.data_spec.cost == "latency_ms"
    assert "Loaded" in successes(at) and "50 requests" in sidebar_text(at)


def test_a_model_without_its_solved_column_is_named_not_dropped_silently(tmp_path):
    frame = make_frame(n=40).drop(columns=["medium_solved"])
    at = upload(open_app(), "partial.parquet", parquet_bytes(frame, tmp_path))
    page = warnings(at)
    assert "'medium'" in page and "medium_solved" in page and "left out" in page
    assert "medium_solved" in sidebar_text(at)  # said on every page, in the sidebar
    assert list(at.sidebar.table[0].value["model"]) == ["small", "large"]


def test_path_on_the_server(tmp_path):
    path = write_parquet(make_frame(n=50), tmp_path / "server.parquet")
    at = open_app()
    at.radio(key="w_source").set_value("path").run()
    at.text_input(key="w_path").set_value(str(tmp_path / "missing.parquet"))
    at.button(key="w_load_path").click().run()
    assert "not found" in errors(at) and "Still in use: **built-in demo**" in errors(at)
    at.text_input(key="w_path").set_value(str(path))
    at.button(key="w_load_path").click().run()
    assert not at.error
    assert at.session_state.data_spec.path == str(path)
    assert "50 requests" in sidebar_text(at)


def test_cost_and_benchmarks_reach_the_core():
    at = open_app()
    at.selectbox(key="w_cost").set_value("latency_ms").run()
    assert at.session_state.data_spec.cost == "latency_ms"
    zoo = at.sidebar.table[0].value
    assert all(v.endswith(("ms", " s", "min", " h")) for v in zoo["cost/request"])
    table = at.dataframe[0].value
    assert list(table.columns)[:5] == ["benchmark", "model", "rows", "accuracy", "cost/request"]
    # latencies in human units (ms, s, min, h), never "6.079e+06 ms"
    shown = list(zoo["cost/request"]) + list(table["cost/request"])
    assert all(v.split()[-1] in ("ms", "s", "min", "h") and "e+" not in v for v in shown), shown
    at.multiselect(key="w_bench").set_value(["coding"]).run()
    assert at.session_state.data_spec.benchmarks == ("coding",)
    table = at.dataframe[0].value
    assert set(table["benchmark"]) == {"coding"} and set(table["rows"]) == {801}
    # the Live run streams only those rows, costed in ms
    at.switch_page("pages/live_run.py")
    at.run()
    live = at.session_state.live
    assert set(live.data.benchmarks) == {"coding"} and live.data.cost_metric == "latency_ms"


# -- a large zoo ----------------------------------------------------------------------------
def test_an_11_model_dollar_zoo_reads_as_a_picture_and_long_tables(tmp_path):
    at = upload(open_app(), "zoo11.parquet", parquet_bytes(dollar_zoo(11), tmp_path))
    assert not at.error, errors(at)
    data_spec = at.session_state.data_spec
    assert data_spec.cost == "cost_usd" or data_spec.cost == "latency_ms"
    at.selectbox(key="w_cost").set_value("cost_usd").run()
    # the page: one panel per benchmark and one for all, on a log cost axis, with the frontier
    charts = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    page_chart = next(c for c in charts if "facet" in c)
    assert len(page_chart["spec"]["layer"]) >= 2
    assert page_chart["spec"]["layer"][0]["encoding"]["x"]["scale"] == {"type": "log"}
    # the per-benchmark table is long: five columns however many models
    table = at.dataframe[0].value
    assert len(table.columns) == 6 and len(table) == (8 + 1) * 11
    # the sidebar: the picture for all requests, and a zoo table whose numbers are never cut
    side_chart = json.loads(at.sidebar.get("vega_lite_chart")[0].proto.spec)
    assert "facet" not in side_chart
    zoo = at.sidebar.table[0].value  # a static table: drawn at once, long names wrap
    assert len(zoo) == 11 and list(zoo.columns) == ["model", "cost/request", "acc."]
    # dollars, never cents, under a header with no unit of its own
    assert all(v.startswith("$") and "¢" not in v and "e-" not in v for v in zoo["cost/request"])


def test_encoder_choice_and_embedding_progress():
    at = open_app()
    at.radio(key="w_encoder").set_value("hashing").run()
    assert at.session_state.data_spec.encoder == "hashing"
    at.button(key="w_embed").click().run()
    assert "3,000 embeddings" in " ".join(s.value for s in at.success)
    at.radio(key="w_encoder").set_value("minilm+layers=2,4,6").run()
    assert at.session_state.data_spec.encoder == "minilm+layers=2,4,6"
    assert "encoder: minilm+layers=2,4,6" in at.markdown[0].value


def test_an_encoder_that_is_not_on_disk_is_refused_on_the_data_page_with_the_reason():
    at = open_app()
    at.radio(key="w_encoder").set_value("other (hf:...)").run()
    at.text_input(key="w_encoder_hf").set_value("hf:/nonexistent/model").run()
    assert not at.exception
    text = errors(at)
    assert "not available" in text and "Still in use: encoder **hashing**" in text
    assert at.session_state.data_spec.encoder == "hashing"
    assert "encoder: hashing" in at.markdown[0].value


def test_unavailable_encoder_is_explained():
    at = open_app("pages/live_run.py", enc="hf:/nonexistent/model")
    assert not at.exception
    assert "not available" in errors(at)
