"""Feedback by hand: the decision is explained; a thumbs-down raises Q; auto feedback off."""

from __future__ import annotations

from .conftest import open_app

PAGE = "pages/feedback_by_hand.py"


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_thumbs_down_raises_q():
    at = open_app(PAGE, alpha="0.7")
    at.button(key="w_bg").click().run()
    at.button(key="w_next").click().run()
    hand = at.session_state.hand
    q_before = hand.current.decision.q
    assert float(metric(at, "Queue Q")) == round(q_before, 4) or abs(float(metric(at, "Queue Q")) - q_before) < 1e-3
    table = at.dataframe[0].value
    assert list(table.columns[:6]) == ["model", "shat", "cost (J)", "V*C", "Q*(alpha-shat)", "score"]
    assert len(at.feedback) == 1
    at.feedback[0].set_value(0).run()
    q_after = at.session_state.hand.q
    assert q_after > q_before
    assert abs(q_after - (q_before + 0.7)) < 1e-9
    assert abs(float(metric(at, "Queue Q")) - q_after) < 1e-3
    assert "Recorded thumbs down" in at.success[0].value
    assert "shat after" in at.dataframe[0].value.columns
    hist = at.dataframe[1].value
    assert list(hist["your_feedback"]) == ["down"]


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
    assert at.session_state.hand.router.n_feedback == 0
    at.feedback[0].set_value(0).run()
    assert at.session_state.hand.router.n_feedback == 1
    at.toggle(key="w_auto").set_value(True).run()
    at.button(key="w_bg").click().run()
    assert at.session_state.hand.router.n_feedback == 101


def test_typed_request_is_routed():
    at = open_app(PAGE)
    at.button(key="w_route_typed").click().run()
    assert "empty" in at.error[0].value
    at.text_area(key="w_typed").set_value("Prove rigorously that the orbit of a molecule is a cell.")
    at.button(key="w_route_typed").click().run()
    cur = at.session_state.hand.current
    assert cur.source == "typed" and cur.benchmark == "(typed)"
    at.feedback[0].set_value(1).run()
    assert at.session_state.hand.history_frame()["your_feedback"].tolist() == ["up"]
