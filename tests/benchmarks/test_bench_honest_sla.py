"""The honest-SLA benchmark script: a user's own encoder is taken, a missing one refused."""

import numpy as np
import pytest

from ._scripts import load_script

#: a fake run's ``where_the_cost_went`` for the demo's four models (a mode without write-offs)
SPEND = (np.full(4, 0.25), np.full(4, 0.25), None, None, None)


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
    assert "| meets alpha at <= 1.10x | demo (mixed) |" in out  # the goals close the run


def test_judge_budget_has_the_judge_read_that_share_of_requests(bench, capsys):
    """``--judge-budget 0.25``: the judge rows read a quarter of the requests, rated or not
    (the rated ones calibrate it), and the other rated answers to calibrate it (not with
    ``--no-judge-calibrate``), are named for it, and are left out of the scorecard's judge
    goals, which are for a judge on every request; a budget outside (0, 1] is refused
    before any stream runs."""
    assert bench.main(["--seeds", "2", "--scenarios", "demo", "--modes", "contextual", "--jobs", "1",
                       "--judge-budget", "0.25"]) == 0
    out = capsys.readouterr().out
    assert "| demo (mixed) + judge on 25% of requests | contextual |" in out
    line = next(row for row in out.splitlines() if row.startswith("| demo (mixed) | ") and "x to " in row)
    calls = float(line.split("|")[2])
    assert 0.32 < calls < 0.48  # a quarter of the requests, whatever their thumbs, and the other rated ones
    assert bench.main(["--seeds", "2", "--scenarios", "demo", "--modes", "contextual", "--jobs", "1", "--judge-only",
                       "--judge-budget", "0.25", "--no-judge-calibrate"]) == 0
    row = next(r for r in capsys.readouterr().out.splitlines()
               if r.startswith("| demo (mixed) + judge on 25% of requests, no calibration reads | contextual |"))
    cells = row.split("|")
    assert 0.0 < float(cells[10].strip().rstrip("x")) < float(line.split("|")[3].strip().rstrip("x")) * 0.32
    assert "| meets alpha at <= 1.00x |" not in out and "| meets alpha at <= 1.10x | demo (mixed) |" in out
    for bad in ("0", "1.5"):
        with pytest.raises(SystemExit) as exit_:
            bench.main(["--judge-budget", bad, "--seeds", "1", "--scenarios", "demo"])
        assert exit_.value.code == 2 and "--judge-budget must be in (0, 1]" in capsys.readouterr().err


def test_delay_has_the_thumbs_come_late_and_keeps_those_rows_off_the_scorecard(bench, capsys):
    assert bench.main(["--seeds", "2", "--scenarios", "demo", "--modes", "contextual", "--jobs", "1",
                       "--delay", "20"]) == 0
    out = capsys.readouterr().out
    assert "| demo (mixed) + thumbs 20 requests late | contextual |" in out
    assert "| demo (mixed) + judge + thumbs 20 requests late | contextual |" in out
    assert "| meets alpha at <= 1.10x |" not in out and "| meets alpha at <= 1.00x |" not in out
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--delay", "-1", "--seeds", "1", "--scenarios", "demo"])
    assert exit_.value.code == 2 and "--delay must be >= 0" in capsys.readouterr().err


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
    out = capsys.readouterr().out
    assert "its settings changed" in out
    assert "the contextual settings above" in out and "defaults only" not in out  # the heading says which


def test_judge_only_runs_the_judge_rows_alone_and_judge_all_gives_every_stream_one(bench, capsys, monkeypatch):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--judge-only", "--seeds", "1", "--scenarios", "zoos"])
    assert exit_.value.code == 2
    assert "none of these scenarios has a judge row" in capsys.readouterr().err
    fills = []
    real = bench.one_run
    monkeypatch.setattr(bench, "one_run", lambda data, X, mode, alpha, seed, fb, *rest:
                        fills.append(fb.judge_fill is not None) or real(data, X, mode, alpha, seed, fb, *rest))
    assert bench.main(["--judge-only", "--seeds", "1", "--scenarios", "demo", "zoos", "--modes", "contextual",
                       "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert fills == [True]
    assert "| demo (mixed) + judge | contextual |" in out and "| demo (mixed) | contextual |" not in out
    assert "11-model zoo" not in out and "break-even" not in out
    fills.clear()
    assert bench.main(["--judge-only", "--judge-all", "--seeds", "1", "--scenarios", "zoos", "--modes", "contextual",
                       "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert fills == [True, True]
    assert "| 11-model zoo 0 + judge | contextual |" in out and "| 11-model zoo 2 + judge | contextual |" in out


def test_misses_lists_each_missed_seed_with_its_bound_and_warning(bench, capsys, monkeypatch):
    # seed 1 misses (70% against alpha 80%) and warned at request 40; seed 0 meets it
    # (no ending for the best model: as a mode without a write-off test reports)
    fake = {0: (0.85, 1.0, 1.0, 0.0, 0.82, None, (0.7, None), 0.84, SPEND, None, None),
            1: (0.70, 0.5, 0.5, 0.0, 0.66, 40, (0.2, None), 0.68, SPEND, None, None)}
    monkeypatch.setattr(bench, "one_run", lambda data, X, mode, alpha, seed, *rest: fake[seed])
    monkeypatch.setattr(bench, "midpoint_alpha", lambda data: 0.8)
    assert bench.main(["--seeds", "2", "--scenarios", "demo", "--modes", "contextual", "--jobs", "1",
                       "--misses"]) == 0
    out = capsys.readouterr().out
    assert "missed seeds, demo (mixed), contextual (alpha 80.0%; most accurate model large-70b, 86.9%):" in out
    line = [l for l in out.splitlines() if l.strip().startswith("seed 1:")]
    assert len(line) == 2  # without and with the judge
    assert "70.00% (-10.00 points)" in line[0] and "own LCB 66.00%" in line[0]
    assert "first warned at request 40" in line[0]
    assert "seed 0:" not in out


def test_rows_give_the_share_of_runs_meeting_alpha_with_its_interval(bench, capsys, monkeypatch):
    # seeds 0-35 meet alpha (85% against 80%), seeds 36-39 miss it: 36 of 40
    monkeypatch.setattr(bench, "one_run", lambda data, X, mode, alpha, seed, *rest:
                        (0.85 if seed < 36 else 0.70, 1.0, 1.0, 0.0, 0.81, None, (0.5, None), 0.83, SPEND, None, None))
    monkeypatch.setattr(bench, "midpoint_alpha", lambda data: 0.8)
    assert bench.main(["--seeds", "40", "--scenarios", "demo", "--modes", "contextual", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    lo, hi = bench.met_rate_interval(36, 40)
    share = f"90% ({100 * lo:.0f}-{100 * hi:.0f}%), passes 18/20 {100 * bench.chance_to_meet(0.9):.0f}% of the time"
    row = [line for line in out.splitlines() if line.startswith("| demo (mixed) | contextual |")][0]
    assert f"| 36/40 | yes | {share} |" in row
    rows = bench.run("zoo", bench.synthetic(4, 200, 0), None, 0.8, range(3), ["contextual"], False, 1)
    assert rows[0]["margin"] == pytest.approx(0.02)  # the mean of each run's estimate less its bound
    assert "share of runs >= alpha (95% CI)" in out


def test_misses_say_whether_the_router_locked_in_on_a_worse_model(bench, capsys, monkeypatch):
    # seed 1 locked in with the best model written off (the fallback served the 32B on 70% of
    # requests, the best model written off for 60% of the stream); seed 3 locked in with it a
    # contender (the fallback on the 32B for 50% of requests, the best model never written
    # off: the 32B read as good); seed 2 ended at its margin (the fallback elsewhere for 10%)
    levels = (np.full(4, 0.25), np.full(4, 0.25), np.zeros(4), np.array([0.3, 0.5, 0.81, 0.79]),
              np.array([10, 20, 900, 400]))
    fake = {0: (0.85, 1.0, 1.0, 0.0, 0.82, None, (0.7, (0.0, 0.0, False, 0.8, 90, 3)), 0.84, SPEND, None, None),
            1: (0.70, 0.5, 0.5, 0.0, 0.66, 40, (0.05, (0.7, 0.6, True, 0.42, 7, 2)), 0.68, SPEND, None, None),
            2: (0.79, 0.9, 0.9, 0.0, 0.77, None, (0.65, (0.1, 0.05, False, 0.83, 80, 3)), 0.79, SPEND, None, None),
            3: (0.78, 0.8, 0.8, 0.0, 0.76, 900, (0.45, (0.5, 0.02, False, 0.79, 400, 2)), 0.78, levels)}
    monkeypatch.setattr(bench, "one_run", lambda data, X, mode, alpha, seed, *rest: fake[seed])
    monkeypatch.setattr(bench, "midpoint_alpha", lambda data: 0.8)
    assert bench.main(["--seeds", "4", "--scenarios", "demo", "--modes", "contextual", "--jobs", "1",
                       "--misses"]) == 0
    out = capsys.readouterr().out.split("+ judge")[0]  # the thumbs-only table's lines
    best = "large-70b"  # the demo's most accurate model
    assert f"most accurate model {best}, 86.9%" in out
    seed1 = [line for line in out.splitlines() if line.strip().startswith("seed 1:")][0]
    assert (f"{best} served 5% of requests, the fallback on another model for 70% of requests, {best} "
            f"written off for 60%, written off at the end (level 42.0% on 7 request-blind thumbs; the fallback "
            f"on medium-32b)") in seed1  # a run that reports no levels names the model alone
    seed2 = [line for line in out.splitlines() if line.strip().startswith("seed 2:")][0]
    assert seed2.endswith(f"the fallback on another model for 10% of requests, {best} written off for 5%, "
                          "a contender at the end (level 83.0% on 80 request-blind thumbs)")
    seed3 = [line for line in out.splitlines() if line.strip().startswith("seed 3:")][0]
    assert seed3.endswith(f"{best} written off for 2%, a contender at the end (level 79.0% on 400 request-blind "
                          "thumbs; the fallback on medium-32b, level 81.0% on 900 request-blind thumbs)")
    assert ("2 of 3 misses had the fallback on another model for 25% of requests or more (locked in: 1 with "
            f"{best} written off for 25% of the stream or more, 1 with it a contender the fallback passed over); "
            "1 at the limit of the margin") in out


def test_a_run_reports_its_most_accurate_models_fate_and_routes_as_one_simulation(bench):
    from slarouter_core.feedback import FeedbackConfig
    from slarouter_core.policies.text_model import PRICE_CAP
    from slarouter_core.router import RouterConfig
    from slarouter_core.simulator import Simulation, SimulationConfig, simulate

    data = bench.synthetic(4, 200, 0)
    X = np.random.default_rng(0).standard_normal((data.n_requests, 8)).astype(np.float32)
    alpha = bench.midpoint_alpha(data)
    sat, cost, stream, calls, lcb, first, (share, fate), estimate, spend, kinds, timeline = bench.one_run(
        data, X, "contextual", alpha, 3, FeedbackConfig(), 0.0, {})
    # stepping in chunks to watch the best model routes exactly as one call
    sim = simulate(data, X, SimulationConfig(RouterConfig(alpha=alpha, mode="contextual"), feedback_rate=0.2,
                                             seed=3, feedback=FeedbackConfig()))
    a = sim.arrays()
    assert sat == float(a["satisfied"].mean()) and stream == float(a["cost"].mean())
    # the router's own estimate at the end, above its bound by the bound's width
    cert = sim.router.policy.cert
    assert estimate == cert.estimate() and estimate - lcb == pytest.approx(cert.width(cert.var) / cert.t)
    best = int(np.argmax(data.solved.mean(0)))
    assert share == float(np.mean(a["model"] == best))
    misled, off, at_end, level, thumbs, believed = fate
    pol = sim.router.policy
    assert 0.0 <= off <= 1.0 and at_end == (not pol.may_be_best()[best])
    # "the fallback on another model": the requests it served (no price reached the target,
    # not exploring) on another model than the most accurate, read step by step
    again = Simulation(data, X, SimulationConfig(RouterConfig(alpha=alpha, mode="contextual"), feedback_rate=0.2,
                                                 seed=3, feedback=FeedbackConfig()))
    capped = []
    while not again.done:
        again.step(1)
        capped.append(again.router.policy.lam >= PRICE_CAP)
    by_fallback = np.array(capped) & ~a["explored"]
    assert by_fallback.any() and (a["model"][by_fallback] != best).any()
    assert misled == float(np.mean(by_fallback & (a["model"] != best)))
    # each step by kind (exploration, fallback, plan) and model: steps, satisfied, cost, and
    # the steps and satisfied steps of the first tenth
    explored = a["explored"].astype(bool)
    first = np.arange(data.n_requests) < len(np.array_split(np.arange(data.n_requests), bench.TENTHS)[0])
    for k, mask in enumerate((explored, by_fallback, ~explored & ~np.array(capped))):
        for m in range(data.n_models):
            at = mask & (a["model"] == m)
            assert kinds[k, m] == pytest.approx((at.sum(), a["satisfied"][at].sum(), a["cost"][at].sum(),
                                                 (at & first).sum(), a["satisfied"][at & first].sum()))
    assert kinds[..., 0].sum() == data.n_requests and kinds[..., 3].sum() == first.sum()
    # by tenths of the stream: the fallback's and exploration's shares, satisfaction, cost
    for k, part in enumerate(np.array_split(np.arange(data.n_requests), bench.TENTHS)):
        assert timeline[k] == pytest.approx((by_fallback[part].mean(), explored[part].mean(),
                                             a["satisfied"][part].mean(), a["cost"][part].sum()))
    assert timeline[0, 0] > timeline[-1, 0]  # the fallback serves less once the plan has learned
    assert level == float(pol.blind_posterior()[0][best]) and thumbs == int(pol.blind_cnt[best])
    # where the run's cost went, per model: its requests, its cost, and the write-off watch
    served, spent, off_all, levels, thumbs_all = spend
    assert served == pytest.approx(np.bincount(a["model"], minlength=data.n_models) / len(a["model"]))
    assert spent == pytest.approx(np.bincount(a["model"], weights=a["cost"], minlength=data.n_models)
                                  / a["cost"].sum())
    assert off_all[best] == off and ((off_all > 0) == (off_all >= 0.01)).all() and off_all.max() <= 1.0
    assert levels == pytest.approx(pol.blind_posterior()[0]) and (thumbs_all == pol.blind_cnt).all()
    assert believed == pol.fallback_model() and 0 <= believed < data.n_models
    # a mode without a write-off test says nothing about it
    paper = bench.one_run(data, X, "paper", alpha, 3, FeedbackConfig(), 0.0, {})
    assert paper[6][1] is None and paper[8][2:] == (None, None, None) and paper[8][1].sum() == pytest.approx(1.0)
    assert paper[9] is None  # nor of kinds of steps


def test_under_the_per_request_fallback_no_one_model_is_reported_as_the_fallbacks(bench, capsys, monkeypatch):
    """``--ablate fallback`` serves each request its own best-predicted model: a run never
    counts as "the fallback on another model", and a miss says the fallback was per request."""
    from slarouter_core.feedback import FeedbackConfig

    data = bench.synthetic(4, 200, 0)
    X = np.random.default_rng(0).standard_normal((data.n_requests, 8)).astype(np.float32)
    alpha = bench.midpoint_alpha(data)
    share, fate = bench.one_run(data, X, "contextual", alpha, 3, FeedbackConfig(), 0.0, {"fallback": "request"})[6]
    misled, believed = fate[0], fate[5]
    assert misled == 0.0 and believed is None
    fake = {0: (0.70, 0.5, 0.5, 0.0, 0.66, 40, (0.05, (0.0, 0.6, True, 0.42, 7, None)), 0.68, SPEND, None, None)}
    monkeypatch.setattr(bench, "one_run", lambda data, X, mode, alpha, seed, *rest: fake[seed])
    monkeypatch.setattr(bench, "midpoint_alpha", lambda data: 0.8)
    assert bench.main(["--seeds", "1", "--scenarios", "demo", "--modes", "contextual", "--jobs", "1",
                       "--misses"]) == 0
    seed0 = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("seed 0:")][0]
    assert seed0.endswith("(level 42.0% on 7 request-blind thumbs; the fallback per request)")


def test_fresh_zoos_run_only_when_named_and_are_not_the_tuned_ones(bench):
    """``--scenarios fresh`` checks the defaults on zoos no earlier figure was drawn from: a
    plain run leaves them out, and none is one of the ``zoos`` or ``unseen`` streams."""
    assert "fresh" in bench.SCENARIOS and "fresh" not in bench.DEFAULT_SCENARIOS
    fresh = bench.build_streams(["fresh"])
    tuned = bench.build_streams(["zoos", "unseen"])
    assert len(fresh) == 8 and all(0.0 < s[2] < 1.0 and s[0].startswith("fresh ") for s in fresh)
    seen = [s[1].solved.tobytes() for s in tuned]
    assert all(s[1].solved.tobytes() not in seen for s in fresh)


def test_dearest_names_the_model_that_took_the_cost_and_the_mixtures_models_fate(bench, capsys, monkeypatch):
    from slarouter_core.baselines import static_mixture_lp

    demo = bench.build_streams(["demo"])[0][1]
    idx = {name: i for i, name in enumerate(demo.models)}
    big, mid = idx["large-70b"], idx["medium-32b"]
    weights, mix, _ = static_mixture_lp(demo.solved.mean(0), demo.costs.mean(0), 0.8)
    assert weights[big] > 0 and weights[mid] > 0  # the demo's mixture at 80%: the 32B and the 70B

    def spend(top: int, off_mid: float) -> tuple:
        served, spent = np.full(4, 0.1), np.full(4, 0.05)
        served[top], spent[top] = 0.7, 0.85
        off = np.zeros(4)
        off[mid] = off_mid
        return served, spent, off, np.full(4, 0.3), np.full(4, 3)

    # seed 1 the dearest (3x the stream's cost), seed 2 next; seed 0 not among the 2 dearest
    fake = {0: (0.85, 1.0 * mix, 1.0, 0.0, 0.82, None, (0.7, None), 0.84, spend(big, 0.0), None, None),
            1: (0.82, 3.0 * mix, 3.0, 0.0, 0.81, None, (0.7, None), 0.84, spend(big, 0.6), None, None),
            2: (0.83, 2.0 * mix, 2.0, 0.0, 0.81, None, (0.7, None), 0.84, spend(mid, 0.0), None, None)}
    monkeypatch.setattr(bench, "one_run", lambda data, X, mode, alpha, seed, *rest: fake[seed])
    monkeypatch.setattr(bench, "midpoint_alpha", lambda data: 0.8)
    assert bench.main(["--seeds", "3", "--scenarios", "demo", "--modes", "contextual", "--jobs", "1",
                       "--dearest", "2"]) == 0
    out = capsys.readouterr().out.split("+ judge")[0]  # the thumbs-only table's lines
    assert (f"dearest runs, demo (mixed), contextual (alpha 80.0%; mean 2.00x; the static mixture: "
            f"medium-32b {100 * weights[mid]:.0f}%, large-70b {100 * weights[big]:.0f}%):") in out
    lines = [line.strip() for line in out.splitlines() if line.strip().startswith("seed ")]
    unit = demo.costs.mean(0) / mix
    assert lines[0] == (f"seed 1: 3.00x, 82.00% (+2.00 points); large-70b ({unit[big]:.2f}x a request) took 85% "
                        f"of the cost on 70% of requests; the mixture's medium-32b ({unit[mid]:.2f}x) 10%, written "
                        "off for 60% of the stream, level 30.0% on 3 request-blind thumbs at the end")
    assert lines[1].startswith("seed 2: 2.00x") and f"medium-32b ({unit[mid]:.2f}x a request) took 85%" in lines[1]
    assert "the mixture's large-70b" in lines[1] and len(lines) == 2
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--dearest", "-1", "--seeds", "1", "--scenarios", "demo"])
    assert exit_.value.code == 2 and "--dearest must be >= 0" in capsys.readouterr().err


def _main_on_fakes(bench, monkeypatch, fake: dict, option: str) -> None:
    """The script on the demo's contextual mode, seeds 0 and 1, each run ``fake[seed]`` (alpha 80%)."""
    monkeypatch.setattr(bench, "one_run", lambda data, X, mode, alpha, seed, *rest: fake[seed])
    monkeypatch.setattr(bench, "midpoint_alpha", lambda data: 0.8)
    assert bench.main(["--seeds", "2", "--scenarios", "demo", "--modes", "contextual", "--jobs", "1", option]) == 0


def test_by_model_prints_each_kind_of_steps_models_with_their_share_of_the_cost(bench, capsys, monkeypatch):
    """``--by-model``: per kind of step and model, the mean steps a run, their satisfaction and
    their cost over the static mixture's cost per request; a model a kind served on fewer
    than half a step a run is left out, and a mode without kinds prints nothing."""
    from slarouter_core.baselines import static_mixture_lp

    demo = bench.build_streams(["demo"])[0][1]
    n = demo.n_requests
    mix = static_mixture_lp(demo.solved.mean(0), demo.costs.mean(0), 0.8)[1]
    kinds = np.zeros((3, 4, 5))
    # the fallback: 600 steps of model 3 at 2x, 80% satisfied; 200 of them in the first tenth, 75%
    kinds[1, 3] = (600.0, 480.0, 600.0 * 2 * mix, 200.0, 150.0)
    kinds[2, 0] = (n - 600.4, 0.5 * (n - 600.4), 0.1 * mix * (n - 600.4), 0.0, 0.0)  # none in the first tenth
    kinds[0, 1] = (0.3, 0.3, 0.3 * mix, 0.3, 0.3)  # under half a step a run (0.45 in the mean): left out
    run = (0.85, 1.0 * mix, 1.0, 0.0, 0.82, None, (0.7, None), 0.84, SPEND)
    fake = {s: run + (kinds * (1 + s), None) for s in range(2)}
    _main_on_fakes(bench, monkeypatch, fake, "--by-model")
    out = capsys.readouterr().out.split("+ judge")[0]
    assert f"steps by kind and model, demo (mixed), contextual (mean of 2 runs of {n:,} requests" in out
    rows = [line for line in out.splitlines() if line.startswith("| fallback |") or line.startswith("| plan |")
            or line.startswith("| exploration |")]
    big = demo.models[3]
    acc = 100 * demo.solved.mean(0)[3]
    unit = demo.costs.mean(0)[3] / mix
    # the mean of the two runs (1x and 2x the kinds): 900 steps, 80% satisfied, 900 * 2 / n of the mixture
    assert rows[0] == (f"| fallback | {big} | {acc:.1f}% | {unit:.2f}x | 900.0 | 80.0% | {900 * 2 / n:.3f}x "
                       "| 300.0, 75.0% |")
    assert len(rows) == 2 and rows[1].startswith(f"| plan | {demo.models[0]} |") and rows[1].endswith("| 0 |")
    _main_on_fakes(bench, monkeypatch, {s: run + (None, None) for s in range(2)}, "--by-model")
    assert "steps by kind" not in capsys.readouterr().out


def test_timeline_prints_the_stream_by_tenths_averaged_over_runs(bench, capsys, monkeypatch):
    """``--timeline``: per tenth of the stream, the mean over runs of the fallback's and
    exploration's shares, the satisfaction and the cost per request over the static
    mixture's; a mode without a timeline prints nothing."""
    from slarouter_core.baselines import static_mixture_lp

    demo = bench.build_streams(["demo"])[0][1]
    n = demo.n_requests
    mix = static_mixture_lp(demo.solved.mean(0), demo.costs.mean(0), 0.8)[1]
    part = n // bench.TENTHS
    line = np.zeros((bench.TENTHS, 4))
    line[:, 0] = np.linspace(1.0, 0.1, bench.TENTHS)  # the fallback's share falls as the plan takes over
    line[:, 1], line[:, 2], line[:, 3] = 0.05, 0.8, part * mix  # 1x the mixture's cost a request
    line[0, 3] = 2 * part * mix  # the first tenth at 2x
    run = (0.85, 1.0 * mix, 1.0, 0.0, 0.82, None, (0.7, None), 0.84, SPEND, None)
    fake = {0: run + (line,), 1: run + (line * np.array([1.0, 1.0, 1.0, 2.0]),)}  # seed 1 at twice the cost
    _main_on_fakes(bench, monkeypatch, fake, "--timeline")
    out = capsys.readouterr().out.split("+ judge")[0]
    assert f"the stream by tenths, demo (mixed), contextual (mean of 2 runs of {n:,} requests" in out
    digits = {f"| {d}" for d in "123456789"}
    rows = [row for row in out.split("the stream by tenths")[1].splitlines() if row[:3] in digits]
    assert len(rows) == bench.TENTHS
    # the first tenth: all fallback, 5% explored, 80% satisfied, (2x + 4x) / 2 = 3x the mixture,
    # which costs 1x at 80% (alpha)
    assert rows[0] == f"| 1-{part:,} | 100% | 5.0% | 80.0% | 3.00x | 3.00x |"
    assert rows[-1].startswith(f"| {n - part + 1:,}-{n:,} | 10% |") and rows[-1].endswith("| 1.50x | 1.50x |")
    # a tenth at another satisfaction is priced at the mixture that delivers it
    higher = line.copy()
    higher[:, 2] = 0.85
    _main_on_fakes(bench, monkeypatch, {s: run + (higher,) for s in range(2)}, "--timeline")
    row = [row for row in capsys.readouterr().out.split("the stream by tenths")[1].splitlines()
           if row.startswith("| 1-")][0]
    at_85 = static_mixture_lp(demo.solved.mean(0), demo.costs.mean(0), 0.85)[1] / mix
    assert at_85 > 1 and row.endswith(f"| 85.0% | 2.00x | {2 / at_85:.2f}x |")
    _main_on_fakes(bench, monkeypatch, {s: run + (None,) for s in range(2)}, "--timeline")
    assert "the stream by tenths" not in capsys.readouterr().out


def _row(scenario, mode="contextual", met=20, n=20, cost=1.0, best_cost=2.0, missed=0, warned=0, cleared=10,
         silent=0, sat=0.7):
    """A finished row as ``run`` makes it, with the fields the scorecard reads (two models,
    50% and 90% accurate)."""
    return dict(scenario=scenario, mode=mode, met=met, n=n, cost=cost, unit=np.array([0.5, best_cost]),
                best_index=1, missed=missed, warned=warned, cleared=cleared, silent=silent,
                accuracy=np.array([0.5, 0.9]), sat=sat)


def test_the_scorecard_holds_each_goal_to_its_stream_and_says_which_part_fails(bench):
    rows = [_row("demo (mixed)", cost=1.05), _row("demo (mixed)", mode="guarded", cost=0.5),
            _row("demo (mixed) + judge", cost=1.2), _row("llama-3, 8 mixed", met=17, cost=1.2, missed=3),
            _row("llama-3, 8 mixed + judge", met=17, cost=1.5, missed=3),
            _row("unseen 4-model zoo 0", met=16, cost=1.0, missed=4, warned=4),
            _row("unseen 4-model zoo 1", cost=1.3, cleared=20, silent=1),
            _row("unseen 11-model zoo 0 (priciest not best; alpha between its best two)", met=5, missed=15,
                 warned=10, cleared=0)]
    card = {(goal, stream.split(" (the")[0]): (measured, against_best, status)
            for goal, stream, measured, against_best, _, status in bench.scorecard(rows)}
    assert card[("meets alpha at <= 1.10x", "demo (mixed)")] == ("20/20 at 1.05x", "0.53x", "met")
    assert card[("meets alpha at <= 1.00x", "demo (mixed) + judge")][2] == "not met: cost"
    assert card[("meets alpha at <= 1.30x", "llama-3, 8 mixed")][2] == "not met: alpha"
    assert card[("meets alpha at <= 1.15x", "llama-3, 8 mixed + judge")][2] == "not met: alpha and cost"
    # one 4-model zoo is the goal: the one that meets alpha, though dearer than the other
    assert card[("meets alpha at <= 1.10x on a 4-model zoo", "unseen 4-model zoo 1")] == (
        "20/20 at 1.30x", "0.65x", "not met: cost")
    assert not any("11-model zoo 0" == stream for _, stream in card)  # not run: no row
    # the warning goals pool the unseen zoos: 14 of 19 misses warned, 1 silent of 30 cleared
    assert card[("every missed seed warned before half its stream", "the 3 unseen zoos")] == ("14/19", "–", "not met")
    silent = card[("silent misses <= 5% of the runs whose bound cleared alpha", "the 3 unseen zoos")]
    assert silent == ("1/30 (3.3%)", "–", "met")


def test_the_scorecard_reads_only_the_contextual_rows(bench, capsys):
    assert bench.scorecard([_row("demo (mixed)", mode="guarded")]) == []
    bench.print_scorecard([_row("demo (mixed)", mode="guarded")])
    assert capsys.readouterr().out == ""
    bench.print_scorecard([_row("11-model zoo 2", cost=1.6)])
    out = capsys.readouterr().out
    # at 70% satisfaction the mixture serves each model half the time: (0.5 + 2) / 2 = 1.25 a request
    assert "| meets alpha at <= 1.50x | 11-model zoo 2 | 20/20 at 1.60x | 0.80x | 1.28x | not met: cost |" in out


def test_the_scorecard_prices_the_routers_own_satisfaction_text_blind(bench):
    """The mixture at the router's satisfaction: dearer the more it delivers, the best
    model alone above its accuracy."""
    def against_mixture(sat):
        return [c[4] for c in bench.scorecard([_row("demo (mixed)", cost=1.5, sat=sat)])][0]

    assert against_mixture(0.5) == "3.00x"  # the cheap model alone at 0.5 a request
    assert against_mixture(0.8) == "0.92x"  # 1/4 and 3/4: 1.625 a request
    assert against_mixture(0.95) == "0.75x"  # beyond the best model: the best alone, 2 a request
    card = bench.scorecard([_row("unseen 4-model zoo 0", missed=2, warned=1)])
    assert [c[4] for c in card] == ["0.80x", "–", "–"]  # 1 a request against 1.25


def test_the_judges_break_even_pairs_each_seed_and_says_when_the_price_is_within_its_noise(bench, capsys):
    # seed -> (cost, cost without the judge's calls, judge calls per request)
    plain = {0: (1.20, 1.20, 0.0), 1: (1.10, 1.10, 0.0), 2: (1.30, 1.30, 0.0), 9: (5.0, 5.0, 0.0)}
    judged = {0: (1.19, 1.15, 1.0), 1: (1.08, 1.04, 1.0), 2: (1.31, 1.27, 1.0)}
    price, low, high, n = bench.break_even_interval(plain, judged)
    assert n == 3  # seed 9 ran without the judge only: not a pair
    assert price == pytest.approx(0.0466667, abs=1e-6)  # savings 0.05, 0.06 and 0.03 per request
    half = 4.302653 * np.std([0.05, 0.06, 0.03], ddof=1) / np.sqrt(3)  # Student's t, 2 degrees of freedom
    assert (low, high) == pytest.approx((price - half, price + half), abs=1e-6)
    # the same savings at two calls per request: half the price per call, half the interval
    twice = {s: (c, w, 2.0) for s, (c, w, _) in judged.items()}
    assert bench.break_even_interval(plain, twice)[:3] == pytest.approx((price / 2, low / 2, high / 2))
    assert bench.break_even_interval({0: plain[0]}, {0: judged[0]})[1:] == (-np.inf, np.inf, 1)

    rows = [dict(mode="contextual", scenario="s", per_seed=plain)]
    for charged, said in [(0.005, "| pays |"), (0.04, "| pays, within the seeds' noise |"),
                          (0.06, "| does not pay, within the seeds' noise |"), (0.1, "| does not pay |")]:
        bench.break_even(rows, [dict(calls=1.0, call_cost=charged, per_seed=judged)])
        assert capsys.readouterr().out.rstrip().endswith(said)


def test_the_static_mixtures_price_of_a_point_is_its_slope_at_alpha(bench):
    from slarouter_core.data import from_frame
    from slarouter_core.synthetic import generate_demo_frame

    data = from_frame(generate_demo_frame(400, 0))
    acc, cost = data.solved.mean(0), data.costs.mean(0)
    lo, hi = sorted(np.argsort(acc)[-2:], key=lambda m: acc[m])  # the mixture of the two best at their midpoint
    alpha = float(acc[lo] + acc[hi]) / 2
    mix = cost[lo] + (cost[hi] - cost[lo]) * (alpha - acc[lo]) / (acc[hi] - acc[lo])
    slope = (cost[hi] - cost[lo]) / (acc[hi] - acc[lo]) / 100 / mix
    assert bench.mixture_price_of_a_point(data, alpha) == pytest.approx(slope, rel=1e-6)
    # at the best model's own accuracy the point below it is priced (none above exists)
    assert bench.mixture_price_of_a_point(data, float(acc[hi])) == pytest.approx(
        (cost[hi] - cost[lo]) / (acc[hi] - acc[lo]) / 100 / cost[hi], rel=1e-6)


def test_a_change_is_paired_by_seed_and_read_against_the_mixtures_line(bench, capsys):
    base = dict(scenario="s", met=3, n=3, cost=1.2, sat=0.8,
                runs=[(0, 1.20, 0.800, None), (1, 1.10, 0.790, None), (2, 1.30, 0.810, None), (7, 9.0, 0.5, None)])
    along = dict(met=3, n=3, cost=1.3, sat=0.81,  # one point more at 0.1x a point, seed by seed
                 runs=[(0, 1.30, 0.810, None), (1, 1.21, 0.800, None), (2, 1.39, 0.820, None)])
    ch = bench.paired_change(base, along, per_point=0.1)
    assert ch["seeds"] == 3  # seed 7 has no pair
    assert ch["cost"][0] == pytest.approx(0.1) and ch["satisfaction"][0] == pytest.approx(1.0)
    assert ch["beyond the line"][0] == pytest.approx(0.0, abs=1e-12)
    half = 4.302653 * np.std([0.10, 0.11, 0.09], ddof=1) / np.sqrt(3)
    assert ch["cost"][1] == pytest.approx(half, rel=1e-5)
    bench.print_changes([(base, along, 0.1)], {"h": 1.0})
    assert capsys.readouterr().out.rstrip().endswith("| on the line, within the seeds' noise |")
    cheaper = dict(along, runs=[(s, c - 0.2, sat, x) for s, c, sat, x in along["runs"]])
    assert bench.paired_change(base, cheaper, 0.1)["beyond the line"][0] == pytest.approx(-0.2)
    bench.print_changes([(base, cheaper, 0.1)], {"h": 1.0})
    assert capsys.readouterr().out.rstrip().endswith("| cheaper than the line |")
    bench.print_changes([(base, dict(along, runs=[(s, c + 0.2, sat, x) for s, c, sat, x in along["runs"]]), 0.1)],
                        {"h": 1.0})
    assert capsys.readouterr().out.rstrip().endswith("| dearer than the line |")


def test_against_runs_the_base_and_the_change_on_the_same_seeds(bench, capsys, monkeypatch):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--against", "no_such_setting=1", "--seeds", "1", "--scenarios", "demo"])
    assert exit_.value.code == 2 and "unknown router setting 'no_such_setting'" in capsys.readouterr().err
    seen = []
    real = bench.one_run
    monkeypatch.setattr(bench, "one_run", lambda data, X, mode, alpha, seed, fb, cost, settings:
                        seen.append((mode, seed, fb.judge_fill is not None, dict(settings)))
                        or real(data, X, mode, alpha, seed, fb, cost, settings))
    assert bench.main(["--encoder", "hashing:64", "--seeds", "2", "--scenarios", "demo", "--jobs", "1",
                       "--set", "h=0.1", "--against", "explore_c=1"]) == 0
    out = capsys.readouterr().out
    assert {m for m, *_ in seen} == {"contextual"}
    for judge in (False, True):  # each stream twice on seeds 0 and 1: the base (--set) and with the change on top
        assert sorted((s, st.get("explore_c", -1)) for _, s, j, st in seen if j == judge) == [
            (0, -1), (0, 1), (1, -1), (1, 1)]
    assert all(st["h"] == 0.1 for *_, st in seen)
    table = out[out.index("The change {'explore_c': 1}"):]
    rows = [line for line in table.splitlines() if line.startswith("| demo (mixed)")]
    assert [r.split(" | ")[0] for r in rows] == ["| demo (mixed)", "| demo (mixed) + judge"]
    assert all(r.endswith(("line |", "noise |")) for r in rows)


@pytest.mark.parametrize("settings, claimed, ratio", [([], "1.00", "0.76"), (["--set", "delta=0.1"], "1.28", "0.97"),
                                                      (["--set", "guarantee=anytime"], "– (anytime)", "–")])
def test_bound_check_holds_each_bound_to_its_own_claim(bench, capsys, monkeypatch, settings, claimed, ratio):
    # the estimate ends at 82% with a width of 1.6449 points (a claimed sd of 1 point at
    # 95%); the truth is 2, -1, 0.5 and -0.5 points off it, and seed 0 falls below its bound
    truth = {0: 0.80, 1: 0.83, 2: 0.815, 3: 0.825}
    monkeypatch.setattr(bench, "one_run", lambda data, X, mode, alpha, seed, *rest:
                        (truth[seed], 1.0, 1.0, 0.0, 0.82 - 0.016449, None, (0.5, None), 0.82, SPEND, None, None))
    monkeypatch.setattr(bench, "midpoint_alpha", lambda data: 0.8)
    assert bench.main(["--seeds", "4", "--scenarios", "demo", "--modes", "contextual", "--jobs", "1",
                       "--bound-check", *settings]) == 0
    out = capsys.readouterr().out
    table = out[out.index("The bound against the truth"):]
    named = f"contextual mode with {{'{settings[1].split('=')[0]}': " if settings else "contextual mode:"
    assert table.splitlines()[0].startswith(f"The bound against the truth, {named}")  # what it holds to the truth
    rows = [line for line in table.splitlines() if line.startswith("| demo (mixed)")]
    assert len(rows) == 2  # without and with the judge
    sd, lo, hi = bench.sd_interval(np.array([2.0, -1.0, 0.5, -0.5]))
    assert sd == pytest.approx(np.sqrt(1.75))
    assert rows[0] == f"| demo (mixed) | 4 | +0.25 | {sd:.2f} ({lo:.2f}-{hi:.2f}) | {claimed} | {ratio} | 1 |"
    assert "all streams: 2 of 8 runs below their own bound (25.0%" in table
    assert out.count("The bound against the truth") == 1  # once, after every stream


def test_without_bound_check_no_bound_table_is_printed(bench, capsys, monkeypatch):
    monkeypatch.setattr(bench, "one_run", lambda data, X, mode, alpha, seed, *rest:
                        (0.85, 1.0, 1.0, 0.0, 0.82, None, (0.5, None), 0.84, SPEND, None, None))
    monkeypatch.setattr(bench, "midpoint_alpha", lambda data: 0.8)
    assert bench.main(["--seeds", "2", "--scenarios", "demo", "--modes", "contextual", "--jobs", "1"]) == 0
    assert "The bound against the truth" not in capsys.readouterr().out


def test_bound_check_with_against_holds_the_changed_rows_to_their_own_claim(bench, capsys, monkeypatch):
    truth = {0: 0.80, 1: 0.83, 2: 0.815, 3: 0.825}
    monkeypatch.setattr(bench, "one_run", lambda data, X, mode, alpha, seed, *rest:
                        (truth[seed], 1.0, 1.0, 0.0, 0.82 - 0.016449, None, (0.5, None), 0.82, SPEND, None, None))
    monkeypatch.setattr(bench, "midpoint_alpha", lambda data: 0.8)
    assert bench.main(["--seeds", "4", "--scenarios", "demo", "--jobs", "1", "--bound-check",
                       "--against", "delta=0.1"]) == 0
    out = capsys.readouterr().out
    base = out[out.index("The bound against the truth, contextual mode:"):]
    changed = out[out.index("The bound against the truth, contextual mode with {'delta': 0.1}:"):]
    assert "(the claim: at most 10%)" in changed.splitlines()[0]
    first = [line for line in base.splitlines() if line.startswith("| demo (mixed) |")][0]
    again = [line for line in changed.splitlines() if line.startswith("| demo (mixed) |")][0]
    assert "| 1.00 | 0.76 |" in first and "| 1.28 | 0.97 |" in again  # each at its own z
