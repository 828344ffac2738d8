"""The honest-SLA benchmark script: a user's own encoder is taken, a missing one refused."""

import pytest

from ._scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("bench_honest_sla")


@pytest.mark.parametrize("encoder, message", [("zzz", "Unknown encoder 'zzz'"),
                                               ("hf:/nonexistent/encoder", "is not available")])
def test_a_missing_encoder_is_refused_before_any_stream_runs(bench, capsys, encoder, message):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--encoder", encoder, "--seeds", "1", "--scenarios", "demo"])
    assert exit_.value.code == 2
    out = capsys.readouterr()
    assert message in out.err
    assert "| demo" not in out.out  # nothing ran


def test_the_encoder_named_is_the_one_the_router_reads(bench, capsys, monkeypatch):
    used = []
    real = bench.embed_texts
    monkeypatch.setattr(bench, "embed_texts", lambda texts, spec: used.append(spec) or real(texts, spec))
    assert bench.main(["--encoder", "hashing:64", "--seeds", "2", "--scenarios", "demo",
                       "--modes", "contextual", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert used == ["hashing:64"]
    assert "encoder hashing:64" in out.splitlines()[0]
    assert "| demo (mixed) | contextual |" in out and "| demo (mixed) + judge | contextual |" in out


def test_first_seed_runs_the_seeds_it_names(bench, capsys, monkeypatch):
    ran = []
    real = bench.one_run
    monkeypatch.setattr(bench, "one_run", lambda data, X, mode, alpha, seed, *rest: ran.append(seed)
                        or real(data, X, mode, alpha, seed, *rest))
    assert bench.main(["--first-seed", "20", "--seeds", "2", "--scenarios", "demo", "--modes", "contextual",
                       "--jobs", "1"]) == 0
    assert sorted(set(ran)) == [20, 21]
    assert "seeds 20-21" in capsys.readouterr().out.splitlines()[0]


def test_set_changes_the_contextual_routers_settings_and_refuses_bad_ones(bench, capsys, monkeypatch):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--set", "no_such_setting=1", "--seeds", "1", "--scenarios", "demo"])
    assert exit_.value.code == 2
    assert "unknown router setting 'no_such_setting'" in capsys.readouterr().err
    seen = []
    real = bench.one_run
    monkeypatch.setattr(bench, "one_run", lambda data, X, mode, alpha, seed, fb, cost, settings:
                        seen.append((mode, settings)) or real(data, X, mode, alpha, seed, fb, cost, settings))
    assert bench.main(["--set", "c_shared=1", "--set", "delta=0.1", "--seeds", "1", "--scenarios", "demo",
                       "--jobs", "1"]) == 0
    assert seen and all(s == ("contextual", {"c_shared": 1, "delta": 0.1}) for s in seen)
    assert "its settings changed" in capsys.readouterr().out


def test_misses_lists_each_missed_seed_with_its_bound_and_warning(bench, capsys, monkeypatch):
    # seed 1 misses (70% against alpha 80%) and warned at request 40; seed 0 meets it
    fake = {0: (0.85, 1.0, 1.0, 0.0, 0.82, None), 1: (0.70, 0.5, 0.5, 0.0, 0.66, 40)}
    monkeypatch.setattr(bench, "one_run", lambda data, X, mode, alpha, seed, *rest: fake[seed])
    monkeypatch.setattr(bench, "midpoint_alpha", lambda data: 0.8)
    assert bench.main(["--seeds", "2", "--scenarios", "demo", "--modes", "contextual", "--jobs", "1",
                       "--misses"]) == 0
    out = capsys.readouterr().out
    assert "missed seeds, demo (mixed), contextual (alpha 80.0%):" in out
    line = [l for l in out.splitlines() if l.strip().startswith("seed 1:")]
    assert len(line) == 2  # without and with the judge
    assert "70.00% (-10.00 points)" in line[0] and "own LCB 66.00%" in line[0]
    assert "first warned at request 40" in line[0]
    assert "seed 0:" not in out


def test_rows_give_the_share_of_runs_meeting_alpha_with_its_interval(bench, capsys, monkeypatch):
    # seeds 0-35 meet alpha (85% against 80%), seeds 36-39 miss it: 36 of 40
    monkeypatch.setattr(bench, "one_run", lambda data, X, mode, alpha, seed, *rest:
                        (0.85 if seed < 36 else 0.70, 1.0, 1.0, 0.0, 0.81, None))
    monkeypatch.setattr(bench, "midpoint_alpha", lambda data: 0.8)
    assert bench.main(["--seeds", "40", "--scenarios", "demo", "--modes", "contextual", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    lo, hi = bench.met_rate_interval(36, 40)
    share = f"90% ({100 * lo:.0f}-{100 * hi:.0f}%), passes 18/20 {100 * bench.chance_to_meet(0.9):.0f}% of the time"
    row = [line for line in out.splitlines() if line.startswith("| demo (mixed) | contextual |")][0]
    assert f"| 36/40 | yes | {share} |" in row
    assert "share of runs >= alpha (95% CI)" in out
