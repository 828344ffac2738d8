"""The dashboard's UI-free helpers: URL settings, live run frames, hand-feedback sessions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from slarouter_core.data import from_frame, midpoint_alpha
from slarouter_core.encoders import embed_texts
from slarouter_core.live import (DataSpec, HandSession, LazyEncoder, LiveRun, RunSettings, benchmark_table,
                                 display_scale, settings_from_query, settings_json, settings_to_query,
                                 zoo_table)
from slarouter_core.simulator import simulate
from tests.conftest import make_frame


@pytest.fixture(scope="module")
def small():
    data = from_frame(make_frame(n=400, seed=3))
    emb = embed_texts(data.texts, "hashing:64")
    return data, emb


# -- settings -------------------------------------------------------------------------------
def test_default_settings_make_an_empty_query():
    assert settings_to_query(DataSpec(), RunSettings()) == {}


def test_settings_round_trip_through_the_url():
    d = DataSpec(source="path", path="/tmp/x.parquet", cost="latency_ms", benchmarks=("a", "b"), encoder="hashing")
    r = RunSettings(alpha=0.71, c=0.3, fixed_v=True, V=2.5e-6, q_max=12.0, eps=0.01, feedback_rate=0.35,
                    seed=7, per_tick=333, feedback_model="negative", mode="guarded")
    q = settings_to_query(d, r)
    assert all(isinstance(v, str) for v in q.values())
    d2, r2, problems = settings_from_query(q)
    assert (d2, r2, problems) == (d, r, [])


def test_bad_url_parameters_are_named_and_replaced_by_defaults():
    d, r, problems = settings_from_query({"alpha": "1.5", "seed": "abc", "tick": "0", "c": "0.2"})
    assert r == RunSettings(c=0.2)
    text = " ".join(problems)
    assert "alpha" in text and "seed" in text and "tick" in text
    assert len(problems) == 3


@pytest.mark.parametrize("kw", [{"alpha": 1.0}, {"alpha": 0.0}, {"c": -1.0}, {"V": 0.0}, {"feedback_rate": 1.2},
                                {"seed": -1}, {"per_tick": 0}, {"q_max": float("nan")}, {"alpha": True},
                                {"mode": "fast"}])
def test_run_settings_reject_bad_values(kw):
    with pytest.raises(ValueError):
        RunSettings(**kw)


def test_data_spec_needs_a_path_for_files():
    with pytest.raises(ValueError, match="path"):
        DataSpec(source="path", path=" ")


def test_router_config_follows_settings(small):
    data, _ = small
    cfg = RunSettings().router_config(data)
    assert cfg.alpha == midpoint_alpha(data) and cfg.V is None
    cfg = RunSettings(alpha=0.6, fixed_v=True, V=3e-4, c=0.5, mode="guarded").router_config(data)
    assert (cfg.alpha, cfg.V, cfg.c, cfg.mode) == (0.6, 3e-4, 0.5, "guarded")


def test_settings_json_holds_the_resolved_router(small):
    data, _ = small
    doc = json.loads(settings_json(DataSpec(), RunSettings(seed=9), data))
    assert doc["run"]["seed"] == 9
    assert doc["simulation"]["router"]["alpha"] == midpoint_alpha(data)


def test_zoo_table_is_in_cost_order_with_unit(small):
    data, _ = small
    z = zoo_table(data)
    col = f"mean cost ({data.cost_unit})"
    assert list(z["model"]) == list(data.models)
    assert np.all(np.diff(z[col].to_numpy()) >= 0)


def test_benchmark_table_has_one_row_per_benchmark(small):
    data, _ = small
    table = benchmark_table(data)
    assert list(table["benchmark"]) == data.benchmark_names + ["(all)"]
    assert table["rows"].iloc[-1] == data.n_requests
    for j, m in enumerate(data.models):
        assert table[f"{m} accuracy"].iloc[-1] == pytest.approx(data.solved[:, j].mean())
        assert table[f"{m} mean cost (J)"].iloc[-1] == pytest.approx(data.costs[:, j].mean())


# -- live run -------------------------------------------------------------------------------
def test_ticks_give_the_same_numbers_as_one_full_run(small):
    data, emb = small
    settings = RunSettings(alpha=0.7, per_tick=37, seed=5)
    live = LiveRun(data, emb, settings)
    while not live.done:
        live.step()
    full = simulate(data, emb, settings.simulation_config(data))
    a, b = live.sim.arrays(), full.arrays()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_charts_are_thinned_and_end_at_the_latest_values(small):
    data, emb = small
    live = LiveRun(data, emb, RunSettings(alpha=0.7, feedback_rate=0.5))
    live.step(350)
    charts = {c.key: c for c in live.charts(max_points=50)}
    assert set(charts) == {"queue", "cost", "satisfaction", "ratio", "events"}
    for key in ("queue", "cost", "satisfaction", "ratio"):
        per_series = charts[key].frame.groupby("series", observed=True).size()
        assert per_series.max() <= 50
        assert charts[key].frame["t"].max() == 350
    a = live.sim.arrays()
    q = charts["queue"].frame
    assert q["value"].iloc[-1] == pytest.approx(a["q"][-1], rel=1e-6)
    cost = charts["cost"].frame
    last = cost[cost["t"] == 350].set_index("series")["value"]
    scale, unit = display_scale(data.cost_unit)
    assert (scale, unit) == (1e6, "MJ")  # joules are drawn in MJ
    assert last["SLARouter"] == pytest.approx(a["cost"].sum() / scale, rel=1e-5)
    # each single-model line is what that model alone would have cost on the same requests
    for j, m in enumerate(data.models):
        assert last[f"only {m}"] == pytest.approx(data.costs[a["row"], j].sum() / scale, rel=1e-5)
    sat = charts["satisfaction"].frame
    assert sat["value"].iloc[-1] == pytest.approx(a["satisfied"].mean(), rel=1e-6)
    ratio = charts["ratio"].frame
    # stacked bands: each model's band is its share of the window; the top band ends at 1
    top = ratio[ratio["series"] == data.models[-1]]["value"].to_numpy()
    np.testing.assert_allclose(top, 1.0, rtol=1e-5)
    share = (ratio["value"] - ratio["lo"]).groupby(ratio["series"], observed=True)
    last_window = a["model"][-200:]
    for j, m in enumerate(data.models):
        assert share.get_group(m).iloc[-1] == pytest.approx(np.mean(last_window == j), abs=1e-6)
    ev = charts["events"].frame
    explored_at = set(np.flatnonzero(a["explored"]) + 1)
    assert set(ev.loc[ev["event"] == "exploration", "t"]) <= explored_at
    assert ev.groupby("event", observed=True).size().max() <= 25
    # the run's own series get the full budget, smooth reference series a share of it
    per = cost.groupby("series", observed=True).size()
    assert per["SLARouter"] == 50 and per[f"only {data.models[0]}"] <= 7


def test_headline_reports_the_run_so_far(small):
    data, emb = small
    live = LiveRun(data, emb, RunSettings(alpha=0.6))
    assert live.headline()["served"] == 0
    live.step(120)
    h = live.headline()
    s = live.sim.summary()
    assert h["served"] == 120 and h["total"] == data.n_requests
    assert h["satisfaction"] == s.satisfaction
    assert h["sla"] == ("met" if s.satisfaction >= 0.6 else "missed")
    assert h["q"] == s.final_q


def test_trace_csv_has_every_request(small):
    data, emb = small
    live = LiveRun(data, emb, RunSettings())
    live.step(123)
    lines = live.trace_csv().decode().strip().splitlines()
    assert len(lines) == 124 and lines[0].startswith("t,row,doc_id")


# -- feedback by hand -----------------------------------------------------------------------
def test_thumbs_down_raises_q_by_alpha_and_up_lowers_it(small):
    data, emb = small
    hand = HandSession(data, emb, RunSettings(alpha=0.7))
    hand.serve_auto(50)
    req = hand.next_from_stream()
    q0 = req.decision.q
    assert req.q_before == q0  # paper mode: the queue the decision used
    hand.answer(0)
    assert req.q_after == pytest.approx(q0 + 0.7)
    assert hand.q == req.q_after
    req2 = hand.next_from_stream()
    hand.answer(1)
    assert req2.q_after == pytest.approx(max(0.0, req2.decision.q + 0.7 - 1.0))
    assert [r.feedback for r in hand.history] == [0, 1]


def test_answer_needs_an_open_request(small):
    data, emb = small
    hand = HandSession(data, emb, RunSettings())
    with pytest.raises(ValueError, match="no open request"):
        hand.answer(1)
    hand.next_from_stream()
    with pytest.raises(ValueError, match="1 .up. or 0"):
        hand.answer(2)
    hand.answer(1)
    with pytest.raises(ValueError, match="no open request"):
        hand.answer(0)


@pytest.mark.parametrize("auto", [True, False])
def test_automatic_feedback_can_be_switched_off(small, auto):
    data, emb = small
    hand = HandSession(data, emb, RunSettings(feedback_rate=1.0), auto_feedback=auto)
    hand.next_from_stream()
    hand.next_from_stream()  # skipped: only the simulated user can answer these two
    hand.serve_auto(30)
    assert hand.router.n_feedback == (32 if auto else 0)  # two skipped + 30 served


def test_background_traffic_matches_the_simulator(small):
    data, emb = small
    settings = RunSettings(alpha=0.65, seed=11)
    hand = HandSession(data, emb, settings, auto_feedback=True)
    hand.serve_auto(200)
    live = LiveRun(data, emb, settings)
    live.step(200)
    assert hand.q == pytest.approx(live.sim.router.q)
    assert hand.router.n_feedback == live.sim.router.n_feedback


@pytest.mark.parametrize("learn_all", [True, False])
def test_learning_from_every_thumbs_moves_the_estimates(small, learn_all):
    data, emb = small
    hand = HandSession(data, emb, RunSettings(c=0.0), learn_from_all=learn_all)
    hand.serve_auto(1)  # step 1 always explores; with c = 0 nothing explores afterwards
    req = hand.next_from_stream()
    assert not req.decision.explored
    hand.answer(0)
    moved = not np.allclose(req.shat_after, req.decision.shat)
    assert moved == learn_all == req.trained


def test_typed_requests_are_checked(small):
    data, emb = small
    hand = HandSession(data, emb, RunSettings())
    with pytest.raises(ValueError, match="empty"):
        hand.route_text("  ", emb[0])
    with pytest.raises(ValueError, match="width"):
        hand.route_text("hello", np.zeros(3))
    req = hand.route_text("hello there", emb[0])
    np.testing.assert_allclose(req.decision.costs, data.costs.mean(axis=0))
    hand.answer(0)
    hist = hand.history_frame()
    assert list(hist["source"]) == ["typed"] and list(hist["your_feedback"]) == ["down"]
    assert hand.history_csv().decode().count("\n") == 2


def test_explanation_scores_are_the_router_terms(small):
    data, emb = small
    hand = HandSession(data, emb, RunSettings())
    hand.serve_auto(40)
    req = hand.next_from_stream()
    table = hand.explanation(req)
    d = req.decision
    np.testing.assert_allclose(table["V*C"], d.v * d.costs)
    np.testing.assert_allclose(table["Q*(alpha-shat)"], d.q * (d.alpha - d.shat))
    np.testing.assert_allclose(table["score"], table["V*C"] + table["Q*(alpha-shat)"])
    if not d.explored:
        assert int(np.argmin(table["score"])) == d.model
    assert table["chosen"].astype(bool).sum() == 1


def test_lazy_encoder_serves_the_cache_without_loading_the_model(tmp_path):
    from slarouter_core.encoders import EmbeddingCache, get_encoder

    loads = []

    def loader():
        loads.append(1)
        return get_encoder("minilm")

    texts = ["Quick check: the sum and the ratio.", "Prove rigorously that the orbit is a cell."]
    cache = EmbeddingCache(tmp_path)
    lazy = LazyEncoder("minilm", loader)
    assert not lazy.loaded and lazy.dim == 384
    first = cache.embed(texts, lazy)  # not cached yet: loads the model once
    assert loads == [1]
    again = LazyEncoder("minilm", loader)
    np.testing.assert_array_equal(cache.embed(texts, again), first)
    assert loads == [1] and not again.loaded
    assert again.cache_id() == get_encoder("minilm").cache_id()


def test_hand_feedback_with_the_guarded_router(small):
    data, emb = small
    hand = HandSession(data, emb, RunSettings(alpha=0.7, mode="guarded"))
    hand.serve_auto(60)
    req = hand.next_from_stream()
    # the Q shown beside the decision table is the one in its Q*(alpha - shat) column
    assert req.q_before == pytest.approx(req.decision.q)
    np.testing.assert_allclose(hand.explanation(req)["Q*(alpha-shat)"],
                               req.decision.q * (req.decision.alpha - req.decision.shat), rtol=1e-6)
    hand.answer(0)
    assert hand.router.config.mode == "guarded"
    assert req.q_after > req.q_before


def test_why_names_the_guard_escalation(small):
    data, emb = small
    hand = HandSession(data, emb, RunSettings(alpha=0.75, mode="guarded"))
    hand.serve_auto(50)
    seen = set()
    for _ in range(60):
        req = hand.next_from_stream()
        d = req.decision
        why = hand.why(req)
        seen.add(why)
        expected = "explored" if d.explored else ("escalated (guard)" if d.escalated else "lowest score")
        assert why == expected
        assert hand.explanation(req)["chosen"].iloc[d.model] == why
        hand.answer(0)
    assert "escalated (guard)" in seen
    paper = HandSession(data, emb, RunSettings(alpha=0.75))
    assert "predictor after" not in paper.explanation(paper.next_from_stream()).columns
