from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from slarouter_core.data import (DataValidationError, choose_cost, cost_metrics_of, from_frame, load_parquet,
                                 models_without_outcomes, parquet_cost_metrics, write_parquet)
from tests.conftest import make_frame


def problems_of(frame, **kw) -> str:
    with pytest.raises(DataValidationError) as info:
        from_frame(frame, **kw)
    return " ".join(info.value.problems)


def test_models_discovered_and_ordered_by_mean_cost():
    frame = make_frame()
    frame = frame[[c for c in frame.columns if not c.startswith("medium")]]  # 2 models
    shuffled = frame.rename(columns=lambda c: c.replace("small", "zz").replace("large", "aa"))
    data = from_frame(shuffled)
    assert data.models == ("zz", "aa")  # zz is the cheap one
    assert np.all(data.costs[:, 0] < data.costs[:, 1])
    assert data.cost_unit == "J"


def test_cost_metric_is_selectable_with_unit():
    frame = make_frame()
    for m, price in (("small", 3.0), ("medium", 1.0), ("large", 2.0)):
        frame[f"{m}_cost_usd"] = price
    data = from_frame(frame, cost="cost_usd")
    assert data.models == ("medium", "large", "small")
    assert data.cost_unit == "USD"
    assert "latency_ms" in data.cost_metrics and "cost_usd" in data.cost_metrics
    assert from_frame(frame, cost="latency_ms").cost_unit == "ms"


@pytest.mark.parametrize("mutate, needle", [
    (lambda f: f.drop(columns=["input_text"]), "input_text"),
    (lambda f: f[[c for c in f.columns if not c.endswith("_solved")]], "No models"),
    (lambda f: f[[c for c in f.columns if not c.startswith(("medium", "large"))]], "Only one model"),
    (lambda f: f.assign(small_solved=f["small_solved"].replace(1, 2)), "binary"),
    (lambda f: f.assign(small_solved=f["small_solved"].astype(float).where(f.index != 3)), "missing"),
    (lambda f: f.assign(large_energy_joules=f["large_energy_joules"].where(f.index != 5)), "large_energy_joules"),
    (lambda f: f.assign(medium_energy_joules=-f["medium_energy_joules"]), "negative"),
    (lambda f: f.assign(medium_energy_joules="cheap"), "numeric"),
    (lambda f: f.assign(input_text=f["input_text"].where(f.index != 2, "   ")), "empty"),
    (lambda f: f.assign(doc_id=0, benchmark="x"), "duplicate"),
    (lambda f: f.iloc[0:0], "no rows"),
])
def test_validation_names_the_problem(mutate, needle):
    assert needle.lower() in problems_of(mutate(make_frame())).lower()


def test_missing_cost_column_lists_available_metrics():
    msg = problems_of(make_frame(), cost="cost_usd")
    assert "small_cost_usd" in msg and "energy_joules" in msg


def test_optional_columns_may_be_absent_and_arrays_are_read_only():
    frame = make_frame().drop(columns=[c for c in make_frame().columns if c.endswith("latency_ms")])
    data = from_frame(frame)
    with pytest.raises(ValueError):
        data.costs[0, 0] = 1.0
    assert data.n_requests == len(frame)


def test_select_unknown_benchmark(tmp_path):
    data = from_frame(make_frame())
    assert data.select(["alpha_bench"]).n_requests == 30
    with pytest.raises(DataValidationError, match="nope"):
        data.select(["nope"])


def test_without_leaves_out_the_named_benchmarks_and_rejects_unknown_ones():
    data = from_frame(make_frame())
    rest = data.without(["alpha_bench"])
    assert "alpha_bench" not in rest.benchmark_names and rest.n_requests == data.n_requests - 30
    with pytest.raises(DataValidationError, match="nope"):  # a typo never keeps a benchmark silently
        data.without(["alpha_bench", "nope"])
    with pytest.raises(DataValidationError, match="No benchmark"):
        data.without(data.benchmark_names)


def test_take_serves_the_rows_named_in_that_order_and_refuses_bad_ones():
    data = from_frame(make_frame())
    rows = [5, 0, 59, 7]
    part = data.take(rows)
    assert part.n_requests == 4 and part.models == data.models
    assert part.texts == [data.texts[i] for i in rows]
    np.testing.assert_array_equal(part.solved, data.solved[rows])
    np.testing.assert_array_equal(part.costs, data.costs[rows])
    assert list(part.frame.index) == [0, 1, 2, 3]
    for bad, message in (([1, 1], "twice"), ([60], r"\[0, 60\)"), ([-1], r"\[0, 60\)"), ([0.5], "integer"),
                         ([[0, 1]], "1-D")):
        with pytest.raises(DataValidationError, match=message):
            data.take(bad)
    assert data.take([]).n_requests == 0


def test_parquet_round_trip_and_bad_files(tmp_path):
    p = write_parquet(make_frame(), tmp_path / "ok.parquet", metadata={"synthetic": True})
    data = load_parquet(p)
    assert data.synthetic and data.n_requests == 60
    garbage = tmp_path / "bad.parquet"
    garbage.write_bytes(b"this is not parquet at all" * 10)
    with pytest.raises(DataValidationError, match="parquet"):
        load_parquet(garbage)
    csv = tmp_path / "data.csv"
    make_frame().to_csv(csv)
    with pytest.raises(DataValidationError, match="not a parquet"):
        load_parquet(csv)
    with pytest.raises(DataValidationError, match="not found"):
        load_parquet(tmp_path / "missing.parquet")
    # duplicate column names survive in parquet; they must be refused
    t = pa.table([pa.array([1]), pa.array(["b"]), pa.array(["q"]), pa.array([1]), pa.array([1])],
                 names=["doc_id", "benchmark", "input_text", "a_solved", "a_solved"])
    pq.write_table(t, tmp_path / "dup.parquet")
    with pytest.raises(DataValidationError, match="Duplicate column"):
        load_parquet(tmp_path / "dup.parquet")
    assert data.n_requests == 60  # the earlier object is untouched


def test_demo_data_is_synthetic_and_valid():
    from pathlib import Path
    data = load_parquet(Path(__file__).resolve().parents[2] / "data" / "demo.parquet")
    assert data.synthetic and data.n_models == 4 and 2500 <= data.n_requests <= 3500
    acc = data.solved.mean(axis=0)
    assert np.all(np.diff(acc) > 0)  # dearer models are better on the demo


@pytest.mark.parametrize("big", [1e308, 1e307])
def test_costs_whose_sums_overflow_are_rejected(big):
    frame = make_frame(n=60)
    frame.loc[[3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22], "large_energy_joules"] = big
    with pytest.raises(DataValidationError, match=r"large_energy_joules sums past the largest float"):
        from_frame(frame)


def test_costs_that_overflow_only_across_models_are_rejected():
    frame = make_frame(n=4)
    frame["small_energy_joules"] = [1e308, 0, 0, 0]
    frame["medium_energy_joules"] = [0, 1e308, 0, 0]
    frame["large_energy_joules"] = [0, 0, 1e308, 1e308 / 2]
    with pytest.raises(DataValidationError, match="sum past the largest float"):
        from_frame(frame)


# -- a file's cost metrics, found before loading it ----------------------------------------
def dollars_only(n: int = 40):
    frame = make_frame(n=n).drop(columns=[f"{m}_energy_joules" for m in ("small", "medium", "large")])
    for k, m in enumerate(("small", "medium", "large")):
        frame[f"{m}_cost_usd"] = 10.0 ** (k - 4)
    return frame


def test_cost_metrics_are_read_from_the_schema_before_loading(tmp_path):
    p = write_parquet(dollars_only(), tmp_path / "usd.parquet")
    assert parquet_cost_metrics(p) == ["latency_ms", "cost_usd"]
    assert cost_metrics_of(dollars_only()) == ["latency_ms", "cost_usd"]
    with pytest.raises(DataValidationError, match="energy_joules"):  # the old default does not load it
        load_parquet(p)
    data = load_parquet(p, cost=choose_cost(parquet_cost_metrics(p), "energy_joules"))
    assert data.cost_metric == "latency_ms" and data.n_requests == 40
    garbage = tmp_path / "bad.parquet"
    garbage.write_bytes(b"no parquet here")
    with pytest.raises(DataValidationError, match="could not be read as parquet"):
        parquet_cost_metrics(garbage)
    with pytest.raises(DataValidationError, match="not found"):
        parquet_cost_metrics(tmp_path / "missing.parquet")


@pytest.mark.parametrize("available, preferred, chosen", [
    (["energy_joules", "latency_ms", "cost_usd"], "cost_usd", "cost_usd"),      # the current choice
    (["latency_ms", "energy_joules"], "cost_usd", "energy_joules"),             # else the default
    (["latency_ms", "cost_usd"], "energy_joules", "latency_ms"),                # else the first
    ([], "cost_usd", "cost_usd"),                                               # none: loading says why
])
def test_choose_cost(available, preferred, chosen):
    assert choose_cost(available, preferred) == chosen


# -- a model without outcomes is never dropped without a word ------------------------------
def test_a_model_without_its_solved_column_is_named_in_a_warning():
    frame = make_frame(models=("small", "medium", "large", "huge")).drop(columns=["medium_solved"])
    data = from_frame(frame)
    assert data.models == ("small", "large", "huge")
    assert len(data.warnings) == 1
    w = data.warnings[0]
    assert "'medium'" in w and "medium_solved" in w and "medium_energy_joules" in w and "left out" in w
    assert data.select(["alpha_bench"]).warnings == data.warnings  # it travels with the data
    assert data.with_cost("latency_ms").warnings == data.warnings


def test_too_few_models_left_is_an_error_that_names_the_missing_column():
    msg = problems_of(make_frame().drop(columns=["medium_solved", "large_solved"]))
    assert "Only one model" in msg and "medium_solved" in msg and "large_solved" in msg
    msg = problems_of(make_frame().drop(columns=["small_solved", "medium_solved", "large_solved"]))
    assert "No models" in msg and "small_solved" in msg


def test_models_without_outcomes_tells_models_apart_from_their_prefixes():
    frame = make_frame(models=("small", "small_v2", "large")).drop(columns=["small_v2_solved"])
    assert models_without_outcomes(frame, ["small", "large"]) == {
        "small_v2": ["small_v2_energy_joules", "small_v2_latency_ms"]}
    assert models_without_outcomes(make_frame(), ["small", "medium", "large"]) == {}
    assert from_frame(make_frame()).warnings == ()
