"""Feedback by hand: the decision is explained, the judged answer's logged outcome is shown,
a thumbs-down raises Q, the estimates and Q are drawn, several routers see the same request."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from slarouter_core.simulator import stream_plan_full

from .conftest import open_app
from slarouter_core.live.charts import title_text

PAGE = "pages/feedback_by_hand.py"


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def charts(at) -> dict:
    return {title_text(json.loads(c.proto.spec)).split(" (")[0]: c for c in at.main.get("vega_lite_chart")}


def chart_rows(chart) -> list[dict]:
    return pa.ipc.open_stream(chart.proto.data.data).read_all().to_pylist()


def test_thumbs_down_raises_q():
    at = open_app(PAGE, mode="paper", alpha="0.7")
    at.button(key="w_bg").click().run()
    at.button(key="w_next").click().run()
    hand = at.session_state.hand
    req = hand.current.requests["paper"]
    q_before = req.decision.q
    assert abs(float(metric(at, "Queue Q (paper)")) - q_before) < 1e-3
    table = at.dataframe[0].value
    assert list(table.columns[:6]) == ["model", "shat", "cost (J)", "V*C", "Q*(alpha-shat)", "score"]
    assert len(at.feedback) == 1
    at.feedback[0].set_value(0).run()
    q_after = at.session_state.hand.primary.q
    assert abs(q_after - (q_before + 0.7)) < 1e-9
    assert abs(float(metric(at, "Queue Q (paper)")) - q_after) < 1e-3
    assert "Recorded thumbs down for paper" in at.success[0].value
    assert "shat after" in at.dataframe[0].value.columns
    hist = at.dataframe[1].value
    assert list(hist["your_feedback"]) == ["down"] and list(hist["router"]) == ["paper"]


def test_the_logged_outcome_of_the_served_answer_is_shown():
    at = open_app(PAGE, mode="paper")
    at.button(key="w_next").click().run()
    hand = at.session_state.hand
    req = hand.current.requests["paper"]
    model = hand.data.models[req.decision.model]
    solved = int(hand.data.solved[req.row, req.decision.model])
    word = "solved this request" if solved else "did not solve this request"
    said = " ".join(c.value for c in at.caption) + " ".join(m.value for m in at.markdown)
    assert f"Logged outcome: in the data, {model} {word}" in said
    assert "**Was this answer good?** The answer of **" + model in said
    assert at.dataframe[1].value["logged_outcome"].tolist() == ["solved" if solved else "not solved"]


def test_each_request_has_its_own_thumbs():
    at = open_app(PAGE)
    at.button(key="w_next").click().run()
    first = at.session_state.hand.current.id
    at.feedback[0].set_value(1).run()
    at.button(key="w_next").click().run()
    assert at.session_state.hand.current.id == first + 1
    assert at.feedback[0].value is None  # a fresh widget for the new request
    assert at.feedback[0].key == f"fb_{first + 1}"


def test_automatic_feedback_off_means_only_you_give_feedback():
    at = open_app(PAGE, rate="1")
    at.toggle(key="w_auto").set_value(False).run()
    at.button(key="w_bg").click().run()
    at.button(key="w_next").click().run()
    at.button(key="w_next").click().run()  # skips one
    assert at.session_state.hand.primary.n_feedback == 0
    at.feedback[0].set_value(0).run()
    assert at.session_state.hand.primary.n_feedback == 1
    at.toggle(key="w_auto").set_value(True).run()
    at.button(key="w_bg").click().run()
    assert at.session_state.hand.primary.n_feedback == 101
    assert at.session_state.hand.primary.router.n_feedback == 101


def test_typed_request_is_routed_and_says_it_has_no_logged_answer():
    at = open_app(PAGE, mode="paper")
    at.button(key="w_route_typed").click().run()
    assert "empty" in at.error[0].value
    at.text_area(key="w_typed").set_value("Prove rigorously that the orbit of a molecule is a cell.")
    at.button(key="w_route_typed").click().run()
    req = at.session_state.hand.current.requests["paper"]
    assert req.source == "typed" and req.benchmark == "(typed)" and req.logged is None
    assert any("Typed request: there is no logged answer" in c.value for c in at.caption)
    at.feedback[0].set_value(1).run()
    assert at.session_state.hand.history_frame()["your_feedback"].tolist() == ["up"]


def test_estimates_before_and_after_and_the_queue_are_drawn():
    at = open_app(PAGE, mode="paper", alpha="0.7", c="0")
    at.button(key="w_bg").click().run()
    at.button(key="w_next").click().run()
    bars = chart_rows(charts(at)["paper: shat before and after your verdict"])
    assert {r["when"] for r in bars} == {"before"}
    at.feedback[0].set_value(0).run()
    req = at.session_state.hand.current.requests["paper"]
    bars = chart_rows(charts(at)["paper: shat before and after your verdict"])
    after = [r["shat"] for r in bars if r["when"] == "after"]
    before = [r["shat"] for r in bars if r["when"] == "before"]
    np.testing.assert_allclose(after, req.shat_after)
    np.testing.assert_allclose(before, req.shat_before)
    assert not np.allclose(after, before)  # learning from every thumbs (on by default) moved them
    q_rows = chart_rows(charts(at)["Queue Q over this session"])
    verdicts = [r for r in q_rows if r["kind"] == "your verdict"]
    assert len(verdicts) == 1 and verdicts[0]["t"] == 101 and abs(verdicts[0]["value"] - req.q_after) < 1e-9
    assert max(r["t"] for r in q_rows if r["kind"] == "queue") == 101


def test_several_routers_decide_the_same_request_and_you_judge_one_answer():
    at = open_app(PAGE, alpha="0.75")
    at.multiselect(key="w_hand_routers").set_value(["paper", "guarded", "contextual"]).run()
    hand = at.session_state.hand
    assert hand.routers == ("paper", "guarded", "contextual")
    at.button(key="w_bg").click().run()
    for _ in range(40):  # until the routers disagree on a request
        at.button(key="w_next").click().run()
        cur = at.session_state.hand.current
        if len(cur.answers()) > 1:
            break
    assert len(cur.answers()) > 1
    assert len({r.row for r in cur.requests.values()}) == 1  # one request, three decisions
    said = " ".join(m.value for m in at.markdown)
    for mode, req in cur.requests.items():  # each router's box names the model it served, in full
        assert f"**{mode}** serves **{hand.data.models[req.decision.model]}**" in said
    radio = at.radio(key=f"judge_{cur.id}")
    pick = radio.options[-1]
    judged_router = next(m for m in cur.requests if m in pick.split("served by ")[1])
    radio.set_value(judged_router).run()
    fed = {m: s.n_feedback for m, s in at.session_state.hand.sessions.items()}
    at.feedback[0].set_value(1).run()
    cur = at.session_state.hand.current
    model = cur.requests[judged_router].decision.model
    assert set(cur.judged) == {m for m, r in cur.requests.items() if r.decision.model == model}
    for m, r in cur.requests.items():
        assert (r.feedback == 1) == (m in cur.judged)
        if m in cur.judged:
            assert at.session_state.hand.sessions[m].n_feedback == fed[m] + 1
    hist = at.session_state.hand.history_frame()
    last = hist[hist["id"] == cur.id]
    assert list(last["router"]) == ["paper", "guarded", "contextual"]
    assert sorted(last.loc[last["your_feedback"] == "up", "router"]) == sorted(cur.judged)


def test_the_non_iid_feedback_models_drive_the_simulated_users():
    at = open_app(PAGE, rate="0.5")
    box = at.selectbox(key="w_hand_fbmodel")
    assert set(box.options) >= {"iid", "bursty", "negative", "delayed", "drift"}
    box.set_value("negative").run()
    assert at.session_state.run_settings.feedback_model == "negative"
    hand = at.session_state.hand.primary
    data = hand.data
    sim = at.session_state.run_settings.simulation_config(data)
    order, plan, _ = stream_plan_full(data.n_requests, data.solved, 0.5, 42, True, sim.feedback)
    np.testing.assert_array_equal(hand.plan, plan.feedback)
    # a bursty model cannot give feedback on half the requests: said, and the box goes back
    at.selectbox(key="w_hand_fbmodel").set_value("bursty").run()
    assert "Not applied" in at.error[0].value and "bursty" in at.error[0].value
    assert at.selectbox(key="w_hand_fbmodel").value == "negative"
    assert at.session_state.run_settings.feedback_model == "negative"


def test_the_shat_bars_show_the_shat_the_table_shows_where_the_policy_decides_with_its_own():
    """Issue 23: with contextual the "before" bars sat at 50% while the table's shat
    differed. Both were right but unlike: the bars were its predictor's estimate (a prior
    of 50% before any feedback), the table the values it decided with (drawn from that
    posterior). The chart now also draws those, and the page says why they differ."""
    at = open_app(PAGE, mode="contextual", alpha="0.7")
    at.multiselect(key="w_hand_routers").set_value(["contextual", "paper"]).run()
    at.button(key="w_next").click().run()
    cur = at.session_state.hand.current
    req = cur.requests["contextual"]
    assert not np.allclose(req.decision.shat, req.shat_before)  # the case the user saw
    rows = chart_rows(charts(at)["contextual: the shat it decided with, and its predictor's estimate"])
    table = at.dataframe[0].value
    decided = [r["shat"] for r in rows if r["when"] == "decided with"]
    np.testing.assert_allclose(decided, table["shat"])  # the table's values, model by model
    np.testing.assert_allclose([r["shat"] for r in rows if r["when"] == "predictor before"], req.shat_before)
    notes = [c.value for c in at.main.caption if "does not decide with its predictor's estimate" in c.value]
    assert len(notes) == 1 and notes[0].startswith("contextual")
    # paper decides with its predictor's output: the two bars, no note
    paper = chart_rows(charts(at)["paper: shat before and after your verdict"])
    assert {r["when"] for r in paper} == {"before"}
    np.testing.assert_allclose([r["shat"] for r in paper], cur.requests["paper"].decision.shat)


def test_the_history_shows_nine_columns_that_fit_and_keeps_the_rest():
    """Issue 23: the 14-column history scrolled sideways at 1400 px: nine columns with short
    headers (full names as help) fit the page; the rest are in an expander and the CSV."""
    from slarouter_core.live.hand import HISTORY_COLUMNS
    from slarouter_core.live.tables import MAIN_WIDTH

    at = open_app(PAGE, mode="paper")
    at.button(key="w_next").click().run()
    at.feedback[0].set_value(0).run()
    shown = at.dataframe[1]
    assert len(shown.value.columns) == 9 and list(shown.value["your_feedback"]) == ["down"]
    config = json.loads(shown.proto.columns)
    assert config["your_feedback"]["label"] == "you" and config["your_feedback"]["help"] == "your_feedback"
    assert sum(c.get("width", 0) for c in config.values()) <= MAIN_WIDTH  # the index is hidden
    rest = at.dataframe[2].value
    assert set(shown.value.columns) | set(rest.columns) == set(HISTORY_COLUMNS)
    csv = at.session_state.hand.history_csv().decode().splitlines()[0].split(",")
    assert csv == HISTORY_COLUMNS


def test_the_at_risk_settings_of_live_run_reach_the_contextual_router_here_and_restart_it():
    at = open_app(PAGE, warnz="0.5")  # the sidebar's router is contextual
    hand = at.session_state.hand
    assert hand.routers == ("contextual",)
    assert (hand.primary.router.policy.config.warn_z, hand.primary.router.policy.config.warn_after) == (0.5, 0)
    at.button(key="w_next").click().run()
    assert at.session_state.hand.primary.position == 1
    at.switch_page("pages/live_run.py").run()
    at.sidebar.number_input(key="w_warnafter").set_value(64).run()
    at.switch_page(PAGE).run()
    hand = at.session_state.hand
    assert hand.primary.position == 0  # a new at-risk test: a new session, as for any router setting
    assert (hand.primary.router.policy.config.warn_z, hand.primary.router.policy.config.warn_after) == (0.5, 64)


def test_a_live_run_setting_the_routers_here_do_not_read_keeps_the_session():
    at = open_app(PAGE)  # the contextual router alone: c is the paper's rule's
    at.button(key="w_next").click().run()
    hand = at.session_state.hand
    at.switch_page("pages/live_run.py").run()
    at.number_input(key="w_c").set_value(0.3).run()
    at.switch_page(PAGE).run()
    assert at.session_state.hand is hand and hand.primary.position == 1
    at.multiselect(key="w_hand_routers").set_value(["contextual", "paper"]).run()
    hand = at.session_state.hand
    assert hand.routers == ("contextual", "paper") and hand.primary.position == 0
    assert hand.sessions["paper"].router.config.c == 0.3  # kept for the router that reads it
