"""The zoo as tables and a picture: long tables from 2 to 20 models, accuracy against cost
on a log axis per benchmark, and the static-mixture frontier drawn from the LP."""

from __future__ import annotations

import json

import numpy as np
import pytest

from slarouter_core.baselines import static_mixture_lp
from slarouter_core.data import from_frame
from slarouter_core.live.charts import REFERENCE_COLORS, model_colors
from slarouter_core.live.tables import (FRONTIER, benchmark_long_table, mixture_frontier, zoo_chart,
                                        zoo_chart_frame)
from tests.conftest import make_frame

from .zoo_frames import dollar_zoo


@pytest.fixture(scope="module")
def zoo11():
    return from_frame(dollar_zoo(11), cost="cost_usd")


@pytest.mark.parametrize("n_models", [2, 11, 20])
def test_the_long_table_has_five_columns_whatever_the_zoo(n_models):
    data = from_frame(dollar_zoo(n_models, n=400, benchmarks=4), cost="cost_usd")
    table = benchmark_long_table(data)
    assert list(table.columns) == ["benchmark", "model", "rows", "accuracy", "cost/request", "mean cost (USD)"]
    assert len(table) == (4 + 1) * n_models
    last = table[table["benchmark"] == "(all)"]
    assert list(last["model"]) == list(data.models)  # cost order
    assert last["accuracy"].to_numpy() == pytest.approx(data.solved.mean(axis=0))
    assert last["mean cost (USD)"].to_numpy() == pytest.approx(data.costs.mean(axis=0))
    assert all(("$" in v or "¢" in v) and "e-" not in v for v in table["cost/request"])


def test_the_frontier_is_the_cheapest_static_mix_for_each_target():
    rng = np.random.default_rng(1)
    for _ in range(20):
        m = int(rng.integers(2, 12))
        acc = rng.uniform(0.2, 0.95, m)
        cost = np.geomspace(1e-4, 1e-1, m) * rng.uniform(0.5, 2.0, m)
        f_cost, f_acc = mixture_frontier(acc, cost)
        cheapest = int(np.argmin(cost))
        assert f_acc[0] == pytest.approx(acc[cheapest]) and f_acc[-1] == pytest.approx(acc.max())
        assert np.all(np.diff(f_acc) > 0) and np.all(np.diff(f_cost) >= -1e-12)  # dearer as it climbs
        # every point is the LP's own answer, also between the kinks where it is interpolated
        for a, c in zip(f_acc, f_cost):
            assert c == pytest.approx(static_mixture_lp(acc, cost, float(a))[1], rel=1e-7, abs=1e-12)
        # and no single model lies below it: a model is itself a (one-model) mix
        for j in range(m):
            if acc[cheapest] <= acc[j]:
                assert cost[j] >= np.interp(acc[j], f_acc, f_cost) - 1e-12


def test_a_zoo_whose_cheapest_model_is_best_has_a_one_point_frontier():
    f_cost, f_acc = mixture_frontier(np.array([0.9, 0.5]), np.array([1.0, 5.0]))
    assert list(f_acc) == [0.9] and list(f_cost) == [1.0]


def test_the_chart_of_an_11_model_dollar_zoo(zoo11):
    frame, spec = zoo_chart(zoo11)
    json.dumps(spec)  # plain JSON for Vega-Lite
    panels = zoo11.benchmark_names + ["(all)"]
    assert spec["facet"]["field"] == "benchmark" and spec["facet"]["sort"] == panels
    assert set(frame["benchmark"]) == set(panels)
    models = frame[frame["kind"] == "model"]
    assert len(models) == 11 * len(panels)
    mine = models[models["benchmark"] == "(all)"]
    assert list(mine["series"]) == list(zoo11.models)
    assert mine["cost"].to_numpy() == pytest.approx(zoo11.costs.mean(axis=0))
    assert mine["accuracy"].to_numpy() == pytest.approx(zoo11.solved.mean(axis=0))
    layers = spec["spec"]["layer"]
    x = layers[0]["encoding"]["x"]
    assert x["scale"] == {"type": "log"} and x["title"] == "USD/request (log scale)"
    # single models in their own hues on every chart, the frontier in the static mixture's colour
    colour = layers[1]["encoding"]["color"]
    assert colour["scale"]["domain"] == list(zoo11.models) + [FRONTIER]
    assert colour["scale"]["range"] == model_colors(zoo11.models) + [REFERENCE_COLORS["static mixture"]]
    assert colour["legend"]["labelLimit"] == 0  # long model names are not cut
    assert len(layers) == 2  # 11 names beside their points would overlap: tooltips instead
    assert {"field": "series", "title": "model", "type": "nominal"} in layers[1]["encoding"]["tooltip"]


def test_small_zoos_get_names_beside_their_points_and_one_panel_without_facets():
    data = from_frame(make_frame(n=90))
    frame, spec = zoo_chart(data, per_benchmark=False, legend=False)
    assert "facet" not in spec and set(frame["benchmark"]) == {"(all)"}
    assert spec["layer"][-1]["mark"]["type"] == "text"
    assert spec["layer"][1]["encoding"]["color"]["legend"] is None
    _, bare = zoo_chart(data, per_benchmark=False, labels=False)
    assert [layer["mark"]["type"] for layer in bare["layer"]] == ["line", "point"]


def test_a_model_that_costs_nothing_makes_the_axis_linear_and_says_so():
    frame = make_frame(n=60)
    frame["small_energy_joules"] = 0.0
    data = from_frame(frame)
    _, spec = zoo_chart(data)
    x = spec["spec"]["layer"][0]["encoding"]["x"]
    assert x["scale"].get("type") != "log" and "linear" in x["title"]


def test_one_benchmark_is_one_panel(zoo11):
    data = zoo11.select(["bench_3"])
    frame = zoo_chart_frame(data)
    assert set(frame["benchmark"]) == {"bench_3"}  # under its own name, once
    assert set(benchmark_long_table(data)["benchmark"]) == {"bench_3"}
