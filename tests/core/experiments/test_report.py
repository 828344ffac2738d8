"""Reports: Markdown Table 2, result files, the CLI's compare, and the dashboard's
comparison table, sweep pivot and Markdown export."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slarouter_core import experiments as E
from slarouter_core.data import write_parquet
from tests.conftest import make_frame


def test_reports_written(tmp_path, rows):
    out = E.write_results(rows, tmp_path / "r.parquet")
    back = pd.read_parquet(out)
    pd.testing.assert_frame_equal(back, rows)
    E.write_results(rows, tmp_path / "r.csv")
    assert len(pd.read_csv(tmp_path / "r.csv")) == len(rows)
    text = E.write_report(rows, tmp_path / "t.md", tmp_path / "t.csv")
    assert (tmp_path / "t.md").read_text() == text
    agg = pd.read_csv(tmp_path / "t.csv")
    assert set(agg["benchmark"]) == {"alpha_bench", "beta_bench"} and "cheapest" in agg.columns
    with pytest.raises(ValueError, match="must end in"):
        E.write_results(rows, tmp_path / "r.xlsx")


def test_cli_compare(tmp_path, capsys):
    from slarouter_core.cli import main

    path = write_parquet(make_frame(n=200, seed=3), tmp_path / "d.parquet")
    rc = main(["compare", "--data", str(path), "--encoder", "hashing", "--cache-dir", str(tmp_path / "cache"),
               "--seeds", "1", "2", "--methods", "oracle", "carrot", "slarouter:V=0.001",
               "--out", str(tmp_path / "rows.csv"), "--markdown", str(tmp_path / "t.md"),
               "--table-csv", str(tmp_path / "t.csv")])
    assert rc == 0
    rows = pd.read_csv(tmp_path / "rows.csv")
    assert len(rows) == 2 * 2 * 3 and set(rows["seed"]) == {1, 2}
    assert "alpha_bench" in (tmp_path / "t.md").read_text()
    assert "operating cost (MJ)" in capsys.readouterr().out
    rc = main(["compare", "--data", str(path), "--encoder", "hashing", "--cache-dir", str(tmp_path / "cache"),
               "--methods", "bogus"])
    assert rc == 2 and "unknown method" in capsys.readouterr().err


def sweep_agg() -> pd.DataFrame:
    """Two methods x two benchmarks x three feedback rates, with known numbers."""
    rows = []
    for rate in (0.5, 0.1, 1.0):  # out of order: the pivot sorts numeric columns
        for bench, alpha in (("a", 0.7), ("b", 0.8)):
            for method, sat, cost in (("fast", 0.6, 1.0), ("slow", 0.9, 4.0)):
                for seed in (1, 2):
                    rows.append(dict(dataset="d", benchmark=bench, feedback_rate=rate, feedback_model="iid",
                                     method=method, method_key="single", seed=seed, alpha=alpha,
                                     satisfaction=sat + rate / 10 + (0.01 if bench == "b" else 0.0),
                                     operating_cost=cost * (1 + rate) + seed / 100, cost_unit="MJ",
                                     post_convergence_satisfaction=np.nan, training_cost=0.0))
    return E.aggregate(pd.DataFrame(rows))


def test_a_sweep_is_one_pivot_table():
    agg = sweep_agg()
    assert len(agg) == 3 * 2 * 2  # format_table would print one table per rate and benchmark: 6
    sat = E.pivot_table(agg, "feedback_rate", "satisfaction (%)")
    assert list(sat.columns) == ["method", "feedback rate 0.1", "feedback rate 0.5", "feedback rate 1"]
    assert list(sat["method"]) == ["fast", "slow"]
    # mean over the two benchmarks of the per-benchmark means: (0.61 + 0.62) / 2 at rate 0.1
    assert sat.loc[0, "feedback rate 0.1"] == pytest.approx(61.5)
    cost = E.pivot_table(agg, "feedback_rate", "operating cost", benchmark="a")
    assert cost.loc[1, "feedback rate 1"] == pytest.approx(4.0 * 2 + 0.015)
    met = E.pivot_table(agg, "feedback_rate", "seeds ≥ alpha")
    # "slow" meets alpha on both benchmarks and seeds; "fast" only on a (0.6 + 1/10 >= 0.7) at rate 1
    assert met.set_index("method").loc["slow"].tolist() == ["4/4"] * 3
    assert met.set_index("method").loc["fast"].tolist() == ["0/4", "0/4", "2/4"]
    both = E.pivot_table(agg, "feedback_rate")
    assert both.loc[1, "feedback rate 0.1"] == "91.5% · 4.42 MJ"


def test_the_pivot_keeps_other_varying_axes_as_rows():
    agg = sweep_agg()
    two = pd.concat([agg, agg.assign(feedback_model="negative", satisfaction_mean=agg["satisfaction_mean"] - 0.1)])
    by_rate = E.pivot_table(two, "feedback_rate", "satisfaction (%)")
    assert list(by_rate.columns[:2]) == ["method", "feedback model"] and len(by_rate) == 4
    assert by_rate[["method", "feedback model"]].values.tolist() == [
        ["fast", "iid"], ["fast", "negative"], ["slow", "iid"], ["slow", "negative"]]
    by_model = E.pivot_table(two[two["feedback_rate"] == 0.1], "feedback_model", "satisfaction (%)")
    assert list(by_model.columns) == ["method", "feedback iid", "feedback negative"]
    assert by_model.loc[0, "feedback iid"] - by_model.loc[0, "feedback negative"] == pytest.approx(10.0)


def test_a_missing_cell_and_bad_pivot_requests():
    agg = sweep_agg()
    part = agg[~((agg["method"] == "fast") & (agg["feedback_rate"] == 1.0))]
    assert E.pivot_table(part, "feedback_rate").loc[0, "feedback rate 1"] == "–"
    assert np.isnan(E.pivot_table(part, "feedback_rate", "operating cost").loc[0, "feedback rate 1"])
    with pytest.raises(ValueError, match="no column 'V'"):
        E.pivot_table(agg, "V")
    with pytest.raises(ValueError, match="metric must be one of"):
        E.pivot_table(agg, "feedback_rate", "accuracy")
    with pytest.raises(ValueError, match="no results for benchmark 'z'"):
        E.pivot_table(agg, "feedback_rate", benchmark="z")


def test_comparison_table_and_its_markdown(rows):
    agg = E.aggregate(rows)
    table = E.comparison_table(agg)
    assert len(table) == len(agg) and "feedback model" not in table.columns  # one model: no column
    assert table["seeds ≥ alpha"].tolist() == [f"{m}/2" for m in agg["seeds_met"]]
    # each row's interval is the one of its own count (2 seeds say little: 2/2 is 16-100)
    ci = {f"{m}/2": "{:.0f}-{:.0f}".format(*(100 * v for v in E.met_rate_interval(m, 2))) for m in range(3)}
    assert table["runs ≥ alpha, 95% CI (%)"].tolist() == [ci[k] for k in table["seeds ≥ alpha"]]
    assert ci["2/2"] == "16-100"
    assert table["cheapest"].tolist() == agg["cheapest"].tolist()
    assert (table["SLA"] == "met").tolist() == agg["sla_met"].tolist()
    assert {"oracle (ref)", "static mixture (ref)"} <= set(table["method"])
    text = E.markdown_table(table)
    lines = text.splitlines()
    assert len(lines) == 2 + len(table) and lines[0].startswith("| benchmark | alpha (%) | method |")
    assert all(line.count("|") == len(table.columns) + 1 for line in lines)
    cheapest = table[table["cheapest"]]
    for _, r in cheapest.iterrows():
        assert any(f"| {r['method']} |" in line and line.endswith("| met | yes |") for line in lines)


def test_markdown_cells():
    frame = pd.DataFrame({"a": [1.23456789, np.nan], "b": ["x|y", "z"], "c": [True, False]})
    assert E.markdown_table(frame).splitlines()[2:] == ["| 1.235 | x\\|y | yes |", "| – | z |  |"]


def test_report_text_is_the_written_report(rows, tmp_path):
    assert E.report_text(E.aggregate(rows)) == E.write_report(rows, tmp_path / "r.md")
    assert "90%" in E.SEEDS_MET_NOTE and "18 of 20" in E.SEEDS_MET_NOTE
    assert "never the cheapest" in E.CHEAPEST_NOTE
