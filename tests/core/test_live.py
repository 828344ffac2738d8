"""The dashboard's UI-free helpers: URL settings, live run frames, hand-feedback sessions."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from slarouter_core.data import from_frame, midpoint_alpha
from slarouter_core.embedding_cache import embed_texts
from slarouter_core.live import (BELIEF_KINDS, DataSpec, HandRouters, HandSession, LiveRun, RunSettings,
                                 belief_series, describe_reset, display_scale, settings_change,
                                 settings_from_query, settings_json, settings_to_query, zoo_table)
from slarouter_core.router import Decision
from slarouter_core.simulator import Simulation, simulate
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
    # the default router (contextual) takes none of the sidebar's c and V settings
    assert cfg.alpha == midpoint_alpha(data) and not hasattr(cfg.settings, "V") and not hasattr(cfg.settings, "c")
    assert RunSettings(mode="paper").router_config(data).V is None
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
    assert set(charts) == {"queue", "cost", "satisfaction", "belief", "ratio", "events"}
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
    hand = HandSession(data, emb, RunSettings(mode="paper", alpha=0.7))
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
    hand = HandSession(data, emb, RunSettings(mode="paper"))
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
    hand = HandSession(data, emb, RunSettings(mode="paper", feedback_rate=1.0), auto_feedback=auto)
    hand.next_from_stream()
    hand.next_from_stream()  # skipped: only the simulated user can answer these two
    hand.serve_auto(30)
    assert hand.router.n_feedback == (32 if auto else 0)  # two skipped + 30 served


def test_background_traffic_matches_the_simulator(small):
    data, emb = small
    settings = RunSettings(alpha=0.65, seed=11, mode="paper")
    hand = HandSession(data, emb, settings, auto_feedback=True)
    hand.serve_auto(200)
    live = LiveRun(data, emb, settings)
    live.step(200)
    assert hand.q == pytest.approx(live.sim.router.q)
    assert hand.router.n_feedback == live.sim.router.n_feedback


@pytest.mark.parametrize("learn_all", [True, False])
def test_learning_from_every_thumbs_moves_the_estimates(small, learn_all):
    data, emb = small
    hand = HandSession(data, emb, RunSettings(mode="paper", c=0.0), learn_from_all=learn_all)
    hand.serve_auto(1)  # step 1 always explores; with c = 0 nothing explores afterwards
    req = hand.next_from_stream()
    assert not req.decision.explored
    hand.answer(0)
    moved = not np.allclose(req.shat_after, req.decision.shat)
    assert moved == learn_all == req.trained


def test_typed_requests_are_checked(small):
    data, emb = small
    hand = HandSession(data, emb, RunSettings(mode="paper"))
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
    hand = HandSession(data, emb, RunSettings(mode="paper"))
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
    paper = HandSession(data, emb, RunSettings(mode="paper", alpha=0.75))
    assert "predictor after" not in paper.explanation(paper.next_from_stream()).columns


def test_why_names_the_contextual_fallbacks_choice_by_price():
    """The contextual fallback may serve another model than its scores' lowest (the
    model that repays a shortfall at least cost, or the draw's best model left when a dear
    one is thinned): the page says so, not "lowest score"."""
    d = Decision(t=9, model=0, explored=False, p_explore=0.0, shat=np.array([0.9, 0.95]),
                 costs=np.array([1.0, 10.0]), q=1e9, v=1.0, alpha=0.8, repaid=True)
    assert int(np.argmin(d.scores)) == 1
    assert HandSession.why(SimpleNamespace(decision=d)) == "fallback by price (cheapest repayment or a thinned draw)"
    assert HandSession.why(SimpleNamespace(decision=replace(d, repaid=False))) == "lowest score"


# -- settings changed from a widget ------------------------------------------------------------
def test_a_change_outside_the_limits_is_named_and_not_applied(small):
    data, _ = small
    run = RunSettings(alpha=0.7, c=0.2)
    new, problems = settings_change(run, {"alpha": 1.5, "c": 0.4}, data)
    assert new == RunSettings(alpha=0.7, c=0.4)  # the good change goes through
    assert problems == {"alpha": "alpha = 1.5 is above the highest allowed value (0.999); keeping alpha = 0.7."}
    _, problems = settings_change(RunSettings(), {"alpha": 0.0001}, data)
    assert problems["alpha"].startswith("alpha = 0.0001 is below the lowest allowed value (0.001); keeping alpha = ")
    assert "(midpoint)" in problems["alpha"]


def test_a_change_the_simulation_rejects_is_named_too(small):
    data, _ = small
    run = RunSettings(feedback_rate=0.5)
    new, problems = settings_change(run, {"feedback_model": "bursty"}, data)
    assert new == run and "bursty feedback" in problems["feedback_model"]
    assert problems["feedback_model"].endswith("keeping feedback model = iid.")


def test_new_routers_make_the_first_one_the_mode():
    new, problems = settings_change(RunSettings(), {"routers": ("guarded", "paper")})
    assert not problems and (new.routers, new.mode) == (("guarded", "paper"), "guarded")


def test_a_reset_says_which_setting_changed_and_why():
    text = describe_reset(RunSettings(seed=42), RunSettings(seed=8))
    assert text.startswith("The seed changed (seed 42 -> 8): the run was reset and starts again")
    assert "request order and the feedback plan" in text
    assert describe_reset(RunSettings(per_tick=10), RunSettings(per_tick=99)) is None
    text = describe_reset(RunSettings(), RunSettings(alpha=0.7, c=0.3))
    assert text.startswith("Settings changed (alpha midpoint -> 0.7; c 0.1 -> 0.3)")
    # a setting is named by its declared label, the one its validation errors use
    text = describe_reset(RunSettings(feedback_rate=0.2), RunSettings(feedback_rate=0.5, mode="paper"))
    assert text.startswith("Settings changed (feedback rate 0.2 -> 0.5; router mode ")


# -- the belief chart ---------------------------------------------------------------------------
def test_belief_uses_the_queue_values_and_the_estimate_where_they_are_missing():
    arrays = {"s_used": np.array([1.0, np.nan, 0.0, np.nan]), "shat_served": np.array([0.5, 0.6, 0.7, 0.2]),
              "satisfied": np.array([1, 0, 0, 1], np.int8)}
    believed, real = belief_series(arrays)
    np.testing.assert_allclose(believed, [1.0, 0.8, 1.6 / 3, 0.45])
    np.testing.assert_allclose(real, [1.0, 0.5, 1 / 3, 0.5])


@pytest.mark.parametrize("fb_model", ["iid", "delayed"])
def test_belief_chart_ends_at_each_routers_running_means(small, fb_model):
    data, emb = small
    live = LiveRun(data, emb, RunSettings(alpha=0.7, feedback_rate=0.5, feedback_model=fb_model),
                   routers=["paper", "contextual"])
    live.step(300)
    frame = {c.key: c for c in live.charts(max_points=60)}["belief"].frame
    for mode in live.routers:
        a = live.sims[mode].arrays()
        used = np.where(np.isfinite(a["s_used"]), a["s_used"], a["shat_served"])
        mine = frame[(frame["series"] == mode) & (frame["t"] == 300)].set_index("kind")["value"]
        assert mine[BELIEF_KINDS[0]] == pytest.approx(used.mean(), rel=1e-5)
        assert mine["real"] == pytest.approx(a["satisfied"].mean(), rel=1e-5)
        assert (frame["series"] == mode).sum() <= 2 * 60


# -- hand feedback: feedback models and several routers -------------------------------------------
@pytest.mark.parametrize("fb_model", ["negative", "drift", "bursty"])
def test_hand_simulated_users_follow_the_simulators_plan(small, fb_model):
    data, emb = small
    settings = RunSettings(alpha=0.65, feedback_rate=0.2, seed=4, feedback_model=fb_model)
    hand = HandSession(data, emb, settings)
    sim = Simulation(data, emb, settings.simulation_config(data))
    np.testing.assert_array_equal(hand.order, sim.order)
    np.testing.assert_array_equal(hand.plan, sim.feedback_plan)
    hand.serve_auto(150)
    sim.step(150)
    assert hand.q == pytest.approx(sim.router.decision_queue())
    assert hand.n_feedback == hand.router.n_feedback == sim.router.n_feedback


def test_hand_delayed_feedback_arrives_late_as_in_the_simulator(small):
    data, emb = small
    settings = RunSettings(alpha=0.65, feedback_rate=0.5, seed=2, feedback_model="delayed")
    hand = HandSession(data, emb, settings)
    sim = Simulation(data, emb, settings.simulation_config(data))
    hand.serve_auto(40)
    assert hand.n_feedback == 0  # every verdict is 50 requests late
    hand.serve_auto(160)
    sim.step(200)
    assert hand.router.n_feedback == sim.router.n_feedback > 0
    assert hand.q == pytest.approx(sim.router.decision_queue())
    # a skipped stream request's verdict is on its way, not applied at once
    req = hand.next_from_stream()
    hand.next_from_stream()
    if hand.plan[req.stream_pos, req.decision.model] >= 0:
        assert "on its way" in req.source


def test_several_routers_get_the_same_request_and_one_verdict_goes_to_the_judged_answer(small):
    data, emb = small
    hand = HandRouters(data, emb, RunSettings(alpha=0.75, feedback_rate=0.0), routers=("paper", "guarded",
                                                                                          "contextual"))
    assert hand.routers == ("paper", "guarded", "contextual")
    hand.serve_auto(30)
    for _ in range(80):
        rnd = hand.next_from_stream()
        assert len({r.row for r in rnd.requests.values()}) == 1 and len({r.id for r in rnd.requests.values()}) == 1
        if len(rnd.answers()) > 1:
            break
        hand.answer(1)
        assert set(rnd.judged) == set(hand.routers)  # the same answer for all: each got the verdict
    assert len(rnd.answers()) > 1
    with pytest.raises(ValueError, match="different models"):
        hand.answer(0)
    judged = hand.routers[-1]
    before = {m: s.n_feedback for m, s in hand.sessions.items()}
    hand.answer(0, router=judged)
    model = rnd.requests[judged].decision.model
    assert rnd.judged == tuple(m for m in hand.routers if rnd.requests[m].decision.model == model)
    for m, s in hand.sessions.items():
        assert s.n_feedback == before[m] + (m in rnd.judged)  # rate 0: no automatic verdicts
        assert rnd.requests[m].answered
    with pytest.raises(ValueError, match="no open request"):
        hand.answer(1, router=judged)
    hist = hand.history_frame()
    assert list(hist["router"][-3:]) == ["paper", "guarded", "contextual"]
    assert hist.groupby("id").size().eq(3).all()
    q = hand.q_chart().frame
    assert set(q["series"]) == set(hand.routers)
    assert (q["kind"] == "your verdict").sum() == sum(len(r.judged) for r in hand.rounds if r.feedback is not None)


def test_typed_request_reaches_every_router_and_has_no_logged_answer(small):
    data, emb = small
    hand = HandRouters(data, emb, RunSettings(), routers=("paper", "contextual"))
    with pytest.raises(ValueError, match="width"):
        hand.route_text("hello", np.zeros(3))
    assert hand.current is None and all(s.current is None for s in hand.sessions.values())
    rnd = hand.route_text("hello there", emb[0])
    for mode, req in rnd.requests.items():
        assert req.logged is None and req.router == mode
        assert hand.sessions[mode].logged_outcome(req).startswith("Typed request: there is no logged answer")
    stream = hand.next_from_stream().requests["paper"]
    assert stream.logged == data.solved[stream.row, stream.decision.model]
    assert hand.sessions["paper"].logged_outcome(stream).startswith("Logged outcome: in the data, ")


def test_estimate_bars_before_and_after_a_verdict(small):
    data, emb = small
    hand = HandSession(data, emb, RunSettings(mode="paper", c=0.0))
    hand.serve_auto(1)
    req = hand.next_from_stream()
    np.testing.assert_allclose(req.shat_before, req.decision.shat)  # paper mode: the predictor's output
    assert set(hand.shat_chart(req).frame["when"]) == {"before"}
    hand.answer(0)
    frame = hand.shat_chart(req).frame
    np.testing.assert_allclose(frame.loc[frame["when"] == "after", "shat"], req.shat_after)
    assert list(frame.loc[frame["when"] == "before", "model"]) == list(data.models)


def test_the_session_q_chart_has_a_frame_before_any_request(small):
    """No bare axes with "0.000000" ticks before the first request: fixed domains."""
    data, emb = small
    hand = HandRouters(data, emb, RunSettings(), routers=("paper",))
    layer = hand.q_chart().spec["layer"][0]["encoding"]
    assert layer["x"]["scale"]["domain"] == [0, 10] and layer["y"]["scale"]["domain"] == [0.0, 1.0]
    hand.serve_auto(50)
    layer = hand.q_chart().spec["layer"][0]["encoding"]
    assert layer["x"]["scale"]["domain"][1] >= 50


def test_the_decision_table_names_a_policys_own_score_multiplier(small):
    """Contextual's ``q`` is its price for satisfaction, not Algorithm 1's queue: the
    table says so (paper's column keeps Q)."""
    data, emb = small
    hand = HandSession(data, emb, RunSettings(mode="contextual", feedback_rate=0.5, seed=1))
    table = hand.explanation(hand.next_from_stream())
    assert "price*(alpha-shat)" in table.columns and "Q*(alpha-shat)" not in table.columns
