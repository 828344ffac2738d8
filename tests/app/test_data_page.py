"""Data page: sources, bad inputs explained, cost and benchmark choice reach the core."""

from __future__ import annotations

import pandas as pd

from slarouter_core.data import write_parquet
from tests.conftest import make_frame

from .conftest import open_app


def errors(at) -> str:
    return " ".join(e.value for e in at.error)


def parquet_bytes(frame: pd.DataFrame, tmp_path) -> bytes:
    return write_parquet(frame, tmp_path / "f.parquet").read_bytes()


def test_bad_parquet_upload_names_the_column_and_keeps_the_data(tmp_path):
    at = open_app()
    at.radio(key="w_source").set_value("upload").run()
    frame = make_frame(n=30)
    frame.loc[4, "medium_energy_joules"] = -5.0
    frame = frame.drop(columns=["large_solved"]).assign(large_solved=[2] + [0] * 29)
    at.file_uploader[0].upload("bad.parquet", parquet_bytes(frame, tmp_path)).run()
    assert not at.exception
    text = errors(at)
    assert "medium_energy_joules" in text and "negative" in text and "row 4" in text
    assert "large_solved" in text and "binary" in text
    assert "unchanged" in " ".join(i.value for i in at.info)
    assert at.session_state.data_spec.source == "demo"


def test_bad_messplus_csv_upload_is_explained():
    at = open_app()
    at.radio(key="w_source").set_value("upload").run()
    at.file_uploader[0].upload("logs.csv", b"doc_id,input_text\n1,hello\n").run()
    assert not at.exception
    text = errors(at)
    assert "benchmark_name" in text and "label_" in text


def test_not_a_parquet_file_is_explained():
    at = open_app()
    at.radio(key="w_source").set_value("upload").run()
    at.file_uploader[0].upload("x.parquet", b"this is not parquet").run()
    assert not at.exception
    assert "could not be read as parquet" in errors(at)


def test_upload_errors_name_the_users_file_not_the_servers_copy():
    at = open_app()
    at.radio(key="w_source").set_value("upload").run()
    at.file_uploader[0].upload("my results.parquet", b"not parquet at all").run()
    text = errors(at)
    assert "my results.parquet" in text
    assert "slarouter-uploads" not in text and ".parquet" in text


def test_good_upload_becomes_the_dataset(tmp_path):
    at = open_app()
    at.radio(key="w_source").set_value("upload").run()
    at.file_uploader[0].upload("mine.parquet", parquet_bytes(make_frame(n=40), tmp_path)).run()
    assert not at.exception and not at.error
    assert at.session_state.data_spec.source == "upload"
    zoo = at.sidebar.dataframe[0].value
    assert list(zoo["model"]) == ["small", "medium", "large"]
    assert "40 requests" in " ".join(c.value for c in at.sidebar.caption)
    assert "**mine.parquet**" in " ".join(m.value for m in at.sidebar.markdown)  # the user's name, not the copy's


def test_path_on_the_server(tmp_path):
    path = write_parquet(make_frame(n=50), tmp_path / "server.parquet")
    at = open_app()
    at.radio(key="w_source").set_value("path").run()
    at.text_input(key="w_path").set_value(str(tmp_path / "missing.parquet"))
    at.button(key="w_load_path").click().run()
    assert "not found" in errors(at)
    at.text_input(key="w_path").set_value(str(path))
    at.button(key="w_load_path").click().run()
    assert not at.error
    assert at.session_state.data_spec.path == str(path)
    assert "50 requests" in " ".join(c.value for c in at.sidebar.caption)


def test_cost_and_benchmarks_reach_the_core():
    at = open_app()
    at.selectbox(key="w_cost").set_value("latency_ms").run()
    assert at.session_state.data_spec.cost == "latency_ms"
    zoo = at.sidebar.dataframe[0].value
    assert "mean cost (ms)" in zoo.columns
    table = at.dataframe[0].value
    assert "large-70b mean cost (ms)" in table.columns
    # latencies in human units (ms, s, min, h), never "6.079e+06 ms"
    shown = list(zoo["cost/request"]) + list(table["large-70b mean cost (ms)"])
    assert all(v.split()[-1] in ("ms", "s", "min", "h") and "e+" not in v for v in shown), shown
    at.multiselect(key="w_bench").set_value(["coding"]).run()
    assert at.session_state.data_spec.benchmarks == ("coding",)
    table = at.dataframe[0].value
    assert list(table["benchmark"]) == ["coding", "(all)"]
    assert list(table["rows"]) == [801, 801]
    # the Live run streams only those rows, costed in ms
    at.switch_page("pages/live_run.py")
    at.run()
    live = at.session_state.live
    assert set(live.data.benchmarks) == {"coding"} and live.data.cost_metric == "latency_ms"


def test_encoder_choice_and_embedding_progress():
    at = open_app()
    at.radio(key="w_encoder").set_value("hashing").run()
    assert at.session_state.data_spec.encoder == "hashing"
    at.button(key="w_embed").click().run()
    assert "3,000 embeddings" in " ".join(s.value for s in at.success)


def test_unavailable_encoder_is_explained():
    at = open_app("pages/live_run.py", enc="hf:/nonexistent/model")
    assert not at.exception
    assert "not available" in errors(at)
