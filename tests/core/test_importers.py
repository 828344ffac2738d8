from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from slarouter_core.data import DataValidationError
from slarouter_core.importers import file_cost_metrics, import_messplus, load_messplus

COUNTS = {"arc_challenge": 1172, "arc_easy": 2000, "boolq": 3270, "logiqa": 651,
          "mmlu_abstract_algebra": 100, "piqa": 1838, "sciq": 1000, "social_iqa": 1954,
          "winogrande": 1267}


def test_shared_messplus_data(shared_data):
    data = load_messplus(shared_data)
    assert data.n_requests == 13252
    assert data.models == ("small", "medium", "large")
    counts = data.frame["benchmark"].value_counts().to_dict()
    assert counts == COUNTS
    raw = pd.read_csv(sorted((shared_data / "arc_challenge").glob("*.csv"))[0]).iloc[0]
    row = data.frame[(data.frame.benchmark == "arc_challenge") & (data.frame.doc_id == raw["doc_id"])].iloc[0]
    assert row["large_latency_ms"] == pytest.approx(raw["inference_time_large"] * 1000)
    assert row["small_solved"] == raw["label_small"]


def records(labels, n=5, dup=True):
    recs = []
    for i in range(n):
        r = {"doc_id": i, "input_text": f"q{i}", "benchmark_name": "b"}
        for k, lab in enumerate(labels):
            r.update({f"label_{lab}": float(i % 2), f"energy_consumption_{lab}": 10.0 * (k + 1),
                      f"inference_time_{lab}": 0.5})
        recs.append(r)
    return recs + (recs[:2] if dup else [])


def test_json_records_any_labels_and_dedup(tmp_path):
    labels = ["xsmall", "small", "medium", "large"]
    (tmp_path / "a.json").write_text(json.dumps(records(labels)))
    frame, report = import_messplus(tmp_path)
    assert report["rows"] == 5 and report["duplicates_dropped"] == 2
    data = load_messplus(tmp_path / "a.json")
    assert data.models == tuple(labels)
    assert np.allclose(data.frame["xsmall_latency_ms"], 500.0)


@pytest.mark.parametrize("payload, needle", [
    ('{"oops": ', "could not be read"),
    ('[1, 2, 3]', "list of records"),
    (json.dumps([{"doc_id": 1, "input_text": "q", "benchmark_name": "b"}]), "label_"),
    (json.dumps([{"doc_id": 1, "input_text": "q", "benchmark_name": "b", "label_a": 1.0,
                  "inference_time_a": 1.0}]), "energy_consumption_a"),
])
def test_bad_messplus_inputs(tmp_path, payload, needle):
    f = tmp_path / "x.json"
    f.write_text(payload)
    with pytest.raises(DataValidationError, match=needle):
        import_messplus(f)


def test_disagreeing_label_sets(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(records(["s", "l"])))
    (tmp_path / "b.json").write_text(json.dumps(records(["s", "m", "l"])))
    with pytest.raises(DataValidationError, match="disagree"):
        import_messplus(tmp_path)


# -- hardening (issue 11) -------------------------------------------------------------------

@pytest.mark.parametrize("bad", [None, float("nan"), "  "])
def test_null_or_nan_benchmark_name_is_a_clear_error(tmp_path, bad):
    recs = records(["a", "b"], dup=False)
    recs[3]["benchmark_name"] = bad
    f = tmp_path / "x.json"
    f.write_text(json.dumps(recs).replace("NaN", "NaN"))
    with pytest.raises(DataValidationError, match=r"benchmark_name has 1 empty or null value.*row 3"):
        import_messplus(f)
    csv = tmp_path / "x.csv"
    pd.DataFrame.from_records(recs).to_csv(csv, index=False)
    with pytest.raises(DataValidationError, match=r"benchmark_name has 1 empty or null"):
        import_messplus(csv)


def test_a_label_that_is_not_a_number_is_a_wrong_type_not_a_missing_value(tmp_path):
    recs = records(["a", "b"], dup=False)
    recs[2]["label_a"] = "yes"
    recs[4]["energy_consumption_b"] = "lots"
    (tmp_path / "x.json").write_text(json.dumps(recs))
    with pytest.raises(DataValidationError) as exc:
        load_messplus(tmp_path / "x.json")
    msg = " ".join(exc.value.problems)
    assert "label_a has 1 non-numeric value(s) (first at row 2: 'yes'): use 0 or 1" in msg
    assert "energy_consumption_b has 1 non-numeric" in msg and "'lots'" in msg
    assert "missing" not in msg


def test_hidden_files_and_folders_are_not_read(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.json").write_text(json.dumps(records(["a", "b"], dup=False)))
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.json").write_text("this is not json at all")
    (tmp_path / "b" / ".backup.json").write_text(json.dumps(records(["a", "b", "c"], dup=False)))
    frame, report = import_messplus(tmp_path)
    assert report["files"] == 1 and report["rows"] == 5


def test_dropped_conflicting_duplicates_are_reported_as_a_warning(tmp_path):
    recs = records(["a", "b"], dup=False)
    conflict = dict(recs[1], label_a=1.0 - recs[1]["label_a"])
    (tmp_path / "x.json").write_text(json.dumps(recs + [conflict, dict(recs[2])]))
    data = load_messplus(tmp_path)
    assert data.n_requests == 5
    assert any("dropped 2 duplicate" in w and "1 of them conflicted" in w for w in data.warnings), data.warnings
    assert data.metadata["import_report"]["conflicting_duplicates_dropped"] == 1
    assert load_messplus(tmp_path).select(["b"]).warnings == data.warnings


def test_file_cost_metrics_before_loading(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(records(["s", "l"])))
    assert file_cost_metrics(tmp_path) == ["energy_joules", "latency_ms"]
    assert file_cost_metrics(tmp_path / "a.json") == ["energy_joules", "latency_ms"]
    with pytest.raises(DataValidationError, match="not found"):
        file_cost_metrics(tmp_path / "nothing.csv")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataValidationError, match="No .csv"):
        file_cost_metrics(empty)


def test_a_messplus_model_without_labels_is_an_error_that_names_it(tmp_path):
    recs = records(["small", "large"], dup=False)
    for r in recs:
        del r["label_large"]
    (tmp_path / "x.json").write_text(json.dumps(recs))
    with pytest.raises(DataValidationError) as info:
        load_messplus(tmp_path / "x.json")
    text = " ".join(info.value.problems)
    assert "'large'" in text and "label_large" in text and "energy_consumption_large" in text
