"""The frame: opens on the demo data, sidebar contents, settings in the URL, separate sessions."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from slarouter_core.data import load_parquet

from .conftest import APP, open_app


def sidebar_text(at) -> str:
    return " ".join(m.value for m in at.sidebar.markdown) + " " + " ".join(c.value for c in at.sidebar.caption)


def test_opens_on_the_demo_data_with_the_zoo_in_cost_order():
    at = open_app()
    assert at.title[0].value == "Data"
    text = sidebar_text(at)
    assert "built-in demo" in text and "SYNTHETIC" in text and "3,000 requests" in text
    demo = load_parquet(Path(APP).parent / "data" / "demo.parquet")
    zoo = at.sidebar.table[0].value
    assert list(zoo["model"]) == list(demo.models)
    assert list(demo.costs.mean(axis=0)) == sorted(demo.costs.mean(axis=0))  # cheapest first
    # shown in human units: "1.23 kJ" rather than 1234.5
    assert all(v.endswith((" J", " kJ", " MJ")) for v in zoo["cost/request"])


def test_the_page_icon_is_an_image_served_by_the_app_not_a_font_cdn_icon(monkeypatch):
    """A `:material/...` favicon makes every browser fetch it from fonts.gstatic.com (and an
    emoji from a CDN too): the icon must be an image, which Streamlit serves itself."""
    import streamlit as st
    from PIL import Image

    seen = {}
    real = st.set_page_config

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(st, "set_page_config", spy)
    open_app()
    icon = seen["page_icon"]
    assert isinstance(icon, Image.Image) and icon.size == (32, 32)
    assert len(np.unique(np.asarray(icon).reshape(-1, 4), axis=0)) > 1  # drawn, not blank



def test_each_old_short_url_is_a_file_that_opens_its_page_with_the_links_settings():
    """``/live`` etc. are files in ``pages/`` (Streamlit's classic mode, a fresh server's
    first requests, knows only those) that forward to their page, settings kept."""
    from pages._frame import _PAGE_TABLE, OLD_URLS

    for script, title, _, old in _PAGE_TABLE:
        assert (Path(APP).parent / OLD_URLS[old]).is_file()
        at = open_app(OLD_URLS[old], seed="7")
        assert [t.value for t in at.title][:1] == [title]
        assert at.query_params["seed"] == "7" and at.session_state.run_settings.seed == 7


def test_every_page_draws_the_whole_frame_itself():
    """AppTest runs a switched-to page in Streamlit's classic ``pages/`` mode, on its own
    (as a fresh server's first request does): each page still has the five links, the
    dataset sidebar (Service: its own note instead) and the link's settings in the URL."""
    from pages._frame import PAGES

    for script, title, _ in PAGES:
        at = open_app(script, seed="7")
        assert at.title[0].value == title
        links = [e.proto.label for e in at.sidebar.get("page_link")]
        assert links == [t for _, t, _ in PAGES], script
        text = sidebar_text(at)
        if title == "Service":
            assert "the service's own" in text and "### Dataset" not in text
        else:
            assert "built-in demo" in text and "seed = 7" in text, script
        assert at.query_params["seed"] == "7", script  # sync_url ran at the page's end


def test_settings_come_from_and_go_to_the_url():
    at = open_app("pages/live_run.py", alpha="0.65", seed="7", tick="50", rate="0.4")
    s = at.session_state.run_settings
    assert (s.alpha, s.seed, s.per_tick, s.feedback_rate) == (0.65, 7, 50, 0.4)
    assert at.number_input(key="w_alpha").value == 0.65
    assert "alpha = **0.650**" in sidebar_text(at)
    at.number_input(key="w_seed").set_value(9).run()
    assert at.query_params["seed"] == "9"
    assert "seed = 9" in sidebar_text(at)


def test_bad_url_settings_are_explained_not_fatal():
    at = open_app(alpha="2", seed="x")
    warnings = " ".join(w.value for w in at.warning)
    assert "alpha" in warnings and "seed" in warnings
    assert at.session_state.run_settings.alpha is None


def test_two_sessions_never_share_a_run():
    a = open_app("pages/live_run.py")
    b = open_app("pages/live_run.py")
    a.button(key="w_step").click().run()
    b.run()
    assert a.session_state.live is not b.session_state.live
    assert a.session_state.live.sim.router is not b.session_state.live.sim.router
    assert a.session_state.live.t == 200 and b.session_state.live.t == 0


def test_a_link_to_a_file_without_the_links_cost_opens_with_a_cost_the_file_has(tmp_path):
    from slarouter_core.data import write_parquet
    from tests.conftest import make_frame

    frame = make_frame(n=40).drop(columns=["small_energy_joules", "medium_energy_joules", "large_energy_joules"])
    path = write_parquet(frame, tmp_path / "ms.parquet")
    at = open_app(src="path", path=str(path))
    assert at.session_state.data_spec.path == str(path)
    assert at.session_state.data_spec.cost == "latency_ms"
    note = " ".join(w.value for w in at.warning)
    assert "has no cost 'energy_joules': using 'latency_ms' (ms) instead" in note
    assert "40 requests" in sidebar_text(at)


def test_the_landing_page_points_to_live_run_and_start():
    """Issue 23, defect 11: a newcomer on ``/`` is told where to go first."""
    at = open_app()
    text = " ".join(m.value for m in at.main.markdown)
    assert "Live run" in text and "**Start**" in text
    assert [link.proto.page for link in at.main.get("page_link")] == ["live_run"]
