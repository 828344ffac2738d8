"""Defect 9 in AppTest: Start right after quick setting changes serves at once, and a run
believed running that served nothing for long is said to have stalled and goes on."""

from __future__ import annotations

import math
import re
import time

from slarouter_core.live.watchdog import Progress

from .conftest import open_app

PAGE = "pages/live_run.py"


def test_start_in_the_same_rerun_as_quick_setting_changes_serves_at_once():
    at = open_app(PAGE, tick="100")
    # the changes and Start arrive together: their callbacks run in Start's rerun
    at.slider(key="w_rate").set_value(0.5)
    at.number_input(key="w_seed").set_value(9)
    at.number_input(key="w_alpha").set_value(0.7)
    at.button(key="w_start").click().run()
    live = at.session_state.live
    assert at.session_state.live_running and live.t == 100
    assert (live.sim.config.seed, live.sim.config.feedback_rate) == (9, 0.5)
    # and again while it runs: the new run keeps running and serves in the same rerun
    at.number_input(key="w_c").set_value(0.2)
    at.slider(key="w_rate").set_value(0.4).run()
    assert at.session_state.live_running and at.session_state.live.t == 100
    assert not any("stalled" in w.value for w in at.warning)


def test_a_started_run_that_served_nothing_for_long_says_so_and_goes_on():
    at = open_app(PAGE, tick="100")
    at.button(key="w_start").click().run()
    served = at.session_state.live.t
    assert not any("stalled" in w.value for w in at.warning)
    # the browser's timer sent nothing for a minute (what defect 9 looked like)
    before = time.monotonic()
    at.session_state.live_progress = Progress(before - 60, served)
    at.run()
    took = time.monotonic() - before  # the rerun's own time adds to the 60 s said (a loaded CI machine)
    said = [w.value for w in at.warning if "stalled" in w.value]
    assert len(said) == 1 and "Pause" in said[0]
    quiet = re.search(r"served nothing for (\d+) s", said[0])
    assert quiet and 60 <= int(quiet.group(1)) <= 60 + math.ceil(took)
    assert at.session_state.live_running and at.session_state.live.t == served + 100  # it goes on
    at.run()  # said once, not on every rerun
    assert not any("stalled" in w.value for w in at.warning)
    # a paused run is not stalled, however long it waits
    at.button(key="w_pause").click().run()
    at.session_state.live_progress = Progress(time.monotonic() - 600, at.session_state.live.t)
    at.run()
    assert not any("stalled" in w.value for w in at.warning)
