"""The warnings benchmark: each warn_z's row gives a stream's misses warned before half and
its false alarms as bench_honest_sla counts them, and the median first warnings of its runs."""

import pytest

from ._scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("bench_warnings")


def test_a_row_gives_the_counts_and_the_median_first_warnings(bench):
    row = {"met": 2, "n": 5, "cost": 1.234, "warned": 1, "missed": 3, "false_alarms": 1,
           "firsts": [(True, 100), (True, 1500), (True, None), (False, 40), (False, None)]}
    line = bench.warning_row("s", 0.5, row)
    # the counts are bench_honest_sla's own (there the miss warned at request 1,500 of 3,000
    # is not before half); the medians over the runs warned at all
    assert line == "| s | 0.5 | 2/5 | 1.23x | 1/3 | 800 | 1/2 | 40 |"


def test_each_warn_z_gets_its_row_on_the_same_streams(bench, capsys):
    assert bench.main(["--scenarios", "demo", "--seeds", "1", "--jobs", "1", "--warn-z", "1.6449", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "| demo (mixed) | 1.6449 | " in out and "| demo (mixed) | 0.5 | " in out


def test_a_warn_z_the_policy_refuses_is_refused_first(bench, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--warn-z", "-1", "--scenarios", "demo", "--seeds", "1"])
    assert exit_.value.code == 2
    assert "warn_z" in capsys.readouterr().err


def test_other_settings_apply_to_every_row_but_warn_z_is_the_axis(bench, capsys):
    assert bench.main(["--scenarios", "demo", "--seeds", "1", "--jobs", "1", "--warn-z", "1.6449",
                       "--set", "warn_after=64"]) == 0
    assert "contextual defaults but warn_z, warn_after=64" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--set", "warn_z=1", "--scenarios", "demo", "--seeds", "1"])
    assert exit_.value.code == 2
    assert "warn_z is this benchmark's own axis" in capsys.readouterr().err
