"""Grid configuration and planning: shape, parameter axes, alpha per benchmark, inputs."""

from __future__ import annotations

import numpy as np
import pytest

from slarouter_core import experiments as E
from slarouter_core.data import midpoint_alpha

from .conftest import FAST, make_dataset


def test_grid_shape_and_tidy_rows(toy, rows):
    n_methods = len(FAST) - 1 + toy.data.n_models  # "single" expands per model
    assert len(rows) == 2 * 2 * n_methods  # benchmarks x seeds x methods
    for col in E.ROW_COLUMNS:
        assert col in rows.columns
    assert {f"calls_{m}" for m in toy.data.models} <= set(rows.columns)
    np.testing.assert_allclose(rows[[f"calls_{m}" for m in toy.data.models]].sum(axis=1), 1.0)
    # operating cost = stream cost + training cost; only offline methods pay training
    np.testing.assert_allclose(rows["operating_cost"], rows["stream_cost"] + rows["training_cost"])
    offline = rows["method_key"].isin(["carrot", "causal"])
    assert (rows.loc[offline, "training_cost"] > 0).all()
    assert (rows.loc[~offline, "training_cost"] == 0).all()
    assert set(rows["method"]) >= {"small only", "large only", "SLARouter (fixed V)", "SLARouter (data-driven V)"}


def test_alpha_rule_and_common_stream(toy, rows):
    for b, block in rows.groupby("benchmark"):
        # alpha: midpoint of the two dearest models' accuracy on the FULL benchmark
        assert (block["alpha"] == midpoint_alpha(toy.data.select([b]))).all()
        n = int((toy.data.benchmarks == b).sum())
        assert (block["n_history"] == round(0.2 * n)).all()
        assert (block["n_stream"] + block["n_history"] == n).all()


def test_parameter_axes(toy):
    cfg = E.GridConfig(methods=(E.MethodSpec("slarouter", {"V": 1e-3}), E.MethodSpec("slarouter", {"V": 1e-6}),
                                E.MethodSpec("carrot", {"mu": 0.0}), E.MethodSpec("carrot", {"mu": 1.0})),
                       seeds=(42,), feedback_rates=(0.1, 0.5), benchmarks=("beta_bench",))
    rows = E.run_grid(toy, cfg)
    assert len(rows) == 2 * 4
    assert set(rows["method"]) == {"slarouter(V=0.001)", "slarouter(V=1e-06)", "carrot(mu=0.0)", "carrot(mu=1.0)"}
    assert set(rows["feedback_rate"]) == {0.1, 0.5}
    fixed = rows[rows["method"] == "slarouter(V=0.001)"]
    assert (fixed["final_v"] == 1e-3).all()
    c0 = rows[rows["method"] == "carrot(mu=0.0)"].set_index("feedback_rate")
    c1 = rows[rows["method"] == "carrot(mu=1.0)"].set_index("feedback_rate")
    assert (c1["stream_cost"] < c0["stream_cost"]).all()
    # feedback reaches SLARouter: more feedback, more observed labels
    fb = fixed.set_index("feedback_rate")["feedback"]
    assert fb[0.5] > fb[0.1]


def test_two_datasets_in_one_grid():
    a, b = make_dataset(seed=0, name="A"), make_dataset(n=180, seed=1, name="B")
    rows = E.run_grid([a, b], E.GridConfig(methods=(E.PRESETS["oracle"],), seeds=(1,),
                                           exclude_benchmarks=("beta_bench",)))
    assert rows[["dataset", "benchmark"]].values.tolist() == [["A", "alpha_bench"], ["B", "alpha_bench"]]
    with pytest.raises(ValueError, match="unique"):
        E.run_grid([a, a], E.GridConfig(methods=(E.PRESETS["oracle"],), seeds=(1,)))


def test_bad_grid_inputs(toy):
    with pytest.raises(ValueError, match="feedback rates"):
        E.GridConfig(feedback_rates=(1.5,))
    with pytest.raises(ValueError, match="alpha"):
        E.GridConfig(alpha="high")
    with pytest.raises(ValueError, match="seeds"):
        E.GridConfig(seeds=(-1,))
    with pytest.raises(ValueError, match="Unknown benchmark"):
        E.run_grid(toy, E.GridConfig(benchmarks=("nope",)))
    with pytest.raises(ValueError, match="backend"):
        E.run_grid(toy, E.GridConfig(methods=(E.PRESETS["oracle"],), seeds=(1,)), backend="spark")
    with pytest.raises(ValueError, match="bad SLARouter parameter"):
        E.run_grid(toy, E.GridConfig(methods=(E.MethodSpec("slarouter", {"Vee": 1}),), seeds=(1,)))
    with pytest.raises(ValueError, match="bad parameters for carrot"):
        E.run_grid(toy, E.GridConfig(methods=(E.MethodSpec("carrot", {"muu": 1}),), seeds=(1,)))


def test_v_has_its_own_column(toy, rows):
    fixed = rows[rows["method"] == "SLARouter (fixed V)"]
    assert (fixed["V"] == 1e-5).all()
    assert rows[rows["method"] != "SLARouter (fixed V)"]["V"].isna().all()
    agg = E.aggregate(rows).set_index(["benchmark", "method"])
    assert agg.loc[("alpha_bench", "SLARouter (fixed V)"), "V"] == 1e-5
