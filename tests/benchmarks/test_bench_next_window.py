"""The next-window benchmark: each run's second SLA window serves requests its first did
not show, and each window's row is its own."""

import numpy as np
import pytest

from slarouter_core.data import from_frame
from slarouter_core.synthetic import generate_demo_frame

from ._scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("bench_next_window")


def test_the_next_window_serves_requests_the_first_did_not_show(bench):
    first = from_frame(generate_demo_frame(40, 0), cost="energy_joules")
    both = bench.joined(first, generate_demo_frame(40, 1))
    assert both.n_requests == 80 and both.frame["doc_id"].is_unique
    assert both.texts[:40] == first.texts
    order = bench.window_order(80, 40, seed=3)
    assert sorted(order[:40]) == list(range(40)) and sorted(order[40:]) == list(range(40, 80))
    assert not np.array_equal(order[:40], np.arange(40))  # shuffled within its window
    halves = bench.window_order(81, None, seed=3)  # a random split: two equal windows, no request twice
    assert len(halves) == 80 and len(set(halves)) == 80
    assert not np.array_equal(np.sort(halves[:40]), np.arange(40))
    assert np.array_equal(bench.window_order(81, None, seed=3), halves)  # seeded
    with pytest.raises(ValueError, match="equally long"):
        bench.window_order(80, 30, seed=0)


def test_each_window_gets_its_own_row_and_warnings(bench, capsys, monkeypatch):
    seen = []
    real = bench.one_run
    monkeypatch.setattr(bench, "one_run", lambda *a: seen.append(out := real(*a)) or out)
    assert bench.main(["--scenarios", "demo", "--seeds", "1", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "| demo (mixed) | first (3,000) |" in out and "| demo (mixed) | next (3,000) |" in out
    assert "| demo (mixed) + judge | next (3,000) |" in out
    for windows in seen:
        assert len(windows) == 2
        for sat, cost, lcb, first, fallback in windows:
            assert 0.5 < sat < 1 and cost > 0.5 and lcb < sat and 0 <= fallback <= 1
            assert first is None or 0 <= first < 3000  # a warning counted from its own window's start


def test_the_window_length_is_the_benchmarks_own(bench, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--set", "sla_window=100", "--scenarios", "demo", "--seeds", "1"])
    assert exit_.value.code == 2
    assert "sla_window is this benchmark's own" in capsys.readouterr().err
