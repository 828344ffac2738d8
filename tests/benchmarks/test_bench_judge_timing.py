"""The judge-and-thumbs timing benchmark: each rule the certificate relies on, kept and
broken, on streams whose truth is known."""

import pytest

from ._scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("bench_judge_timing")


def cells(out: str, row: str) -> list[tuple[float, float]]:
    """(error in points, share of bounds above the truth in %) per text model of a row."""
    line = next(l for l in out.splitlines() if l.startswith(f"| {row} |"))
    return [(float(c.split(" ± ")[0]), float(c.rsplit(", ", 1)[1].rstrip("%")))
            for c in line.strip("| ").split(" | ")[1:]]


def test_the_rules_keep_the_estimate_on_the_truth_and_breaking_them_does_not(bench, capsys):
    assert bench.main(["--runs", "40"]) == 0
    out = capsys.readouterr().out
    late = f"judge drawn whatever the thumbs, thumbs {bench.DELAY} requests late"
    calibrated = "the same, and the judge reads the other rated answers to calibrate itself, thumbs "
    for row in ("judge drawn whatever the thumbs, thumbs with their request", late,
                calibrated + "with their request", calibrated + f"{bench.DELAY} requests late"):
        assert all(abs(err) < 1.5 for err, _ in cells(out, row)), row
    # the judge reading every rated answer: 15 points off, one way or the other
    over, under = cells(out, "judge reads every rated answer and the budget of the rest, thumbs with their request")
    assert over[0] > 10 and over[1] > 50 and under[0] < -10
    # late thumbs taken as given with their request: the cautious text model's bound fails
    over, under = cells(out, late + ", taken as given with their request")
    assert under[0] > 2.5 and under[1] > 15 and over[0] < -2.5


def test_bad_arguments_are_refused(bench, capsys):
    for args, needle in ((["--runs", "1"], "--runs"), (["--budget", "0"], "--budget")):
        with pytest.raises(SystemExit) as exit_:
            bench.main(args)
        assert exit_.value.code == 2 and needle in capsys.readouterr().err
