"""The live run's watchdog: when a run believed running has stalled (defect 9)."""

from __future__ import annotations

import pytest

from slarouter_core.live.watchdog import STALL_MIN_S, STALL_TICKS, Progress, check, stall_after, stall_note, stalled


def test_a_running_run_that_serves_nothing_for_long_enough_has_stalled():
    p = Progress(at=100.0, served=0)
    assert stall_after(0.3) == STALL_MIN_S and stall_after(2.0) == STALL_TICKS * 2.0
    assert not stalled(p, 0, 100.0 + STALL_MIN_S - 0.1, 0.3, running=True)
    assert stalled(p, 0, 100.0 + STALL_MIN_S + 0.1, 0.3, running=True)
    assert not stalled(p, 0, 100.0 + 15.0, 2.0, running=True)  # 10 ticks of 2 s have not passed
    # not stalled: it served meanwhile, it is paused, it has finished, or it was never started
    assert not stalled(p, 200, 1000.0, 0.3, running=True)
    assert not stalled(p, 0, 1000.0, 0.3, running=False)
    assert not stalled(p, 0, 1000.0, 0.3, running=True, done=True)
    assert not stalled(None, 0, 1000.0, 0.3, running=True)


def test_the_stall_note_says_what_to_do():
    p = Progress(5.0, 400)
    note = stall_note(p, 65.0)
    assert "60 s" in note and "400" in note and "Pause" in note
    with pytest.raises(ValueError):
        Progress(0.0, -1)


def test_the_pages_check_restarts_the_clock_and_says_so_only_once_stalled():
    p = Progress(100.0, 7)
    assert check(p, 7, 101.0, 0.3, running=True) == (p, None)
    progress, note = check(p, 7, 200.0, 0.3, running=True)
    assert progress == Progress(200.0, 7) and note == stall_note(p, 200.0)
    assert check(None, 0, 200.0, 0.3, running=True) == (None, None)
