"""The pre-flight check: its margin is the certificate's, its verdict says how often a
window served by the best model ends with its bound at alpha, and bad input is refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

from slarouter_core.judge import JUDGE_PRESETS, JudgeModel
from slarouter_core.policies import ContextualConfig
from slarouter_core.policies.certificate import Certificate
from slarouter_core.preflight import PreflightConfig, judge_residual, labels_to_separate, preflight

ACC = [0.30, 0.55, 0.74, 0.86]
COST = [1.0, 5.0, 15.0, 35.0]


def served_by_one(a: float, phi: float, n: int, runs: int, seed: int, judge: JudgeModel | None = None):
    """End-of-window (estimate, bound) of certificates over ``runs`` windows that serve a
    model of accuracy ``a`` on every request, text-blind (each request predicted at ``a``)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(runs):
        cert = Certificate(alpha=0.5, delta=0.05, guarantee="window", window=n)
        y = rng.random(n) < a
        thumbs = rng.random(n) < phi
        verdict = None if judge is None else judge.corrupt(y.astype(int), rng)
        for t in range(n):
            cert.account(a, None if verdict is None else float(verdict[t]), float(y[t]) if thumbs[t] else None)
        out.append((cert.estimate(), cert.lower_bound(), cert.width(cert.var) / n))
    return np.array(out)


def test_the_margin_is_the_certificates_own_width_at_the_windows_end():
    # one model on every request: the check's margin against the certificate's width after
    # a window of text-blind steps (its residuals learned from the thumbs)
    a, phi, n = 0.86, 0.2, 3000
    pre = preflight([a], [1.0], PreflightConfig(alpha=0.8, feedback_rate=phi, window=n))
    widths = served_by_one(a, phi, n, runs=4, seed=0)[:, 2]
    assert pre.margin == pytest.approx(widths.mean(), rel=0.05)
    assert pre.target == pytest.approx(0.8 + pre.margin, abs=1e-9)


def test_the_verdict_says_how_often_the_best_models_window_clears_alpha():
    # alpha two standard errors under what the best model's bound ends at on average: nearly
    # every window clears it; two over: nearly none (the estimate's sd is margin / z)
    a, phi, n = 0.8, 0.25, 2000
    base = preflight([0.5, a], [1.0, 3.0], PreflightConfig(alpha=0.7, feedback_rate=phi, window=n))
    sd = base.margin / 1.6449
    runs = served_by_one(a, phi, n, runs=60, seed=1)
    for shift, lo, hi in ((-2 * sd, 0.9, 1.0), (2 * sd, 0.0, 0.1)):
        alpha = base.alpha_max + shift
        pre = preflight([0.5, a], [1.0, 3.0], PreflightConfig(alpha=alpha, feedback_rate=phi, window=n))
        assert pre.certifiable == (shift < 0)
        assert pre.headroom == pytest.approx(-shift, abs=1e-9)
        cleared = float(np.mean(runs[:, 1] >= alpha))
        assert lo <= cleared <= hi, (shift, cleared)


def test_what_would_make_it_certifiable_lands_on_the_edge():
    cfg = PreflightConfig(alpha=0.85, feedback_rate=0.2, window=3000)
    pre = preflight(ACC, COST, cfg)
    assert not pre.certifiable and pre.certified_cost is None
    assert pre.target == pytest.approx(0.86) and pre.headroom < 0
    assert pre.alpha_max < 0.85
    assert preflight(ACC, COST, PreflightConfig(alpha=pre.alpha_max - 1e-6, feedback_rate=0.2, window=3000)).certifiable
    # the least feedback rate and the shortest window clear it, a little less does not
    assert preflight(ACC, COST, PreflightConfig(alpha=0.85, feedback_rate=pre.feedback_rate_min, window=3000)).certifiable
    assert not preflight(ACC, COST, PreflightConfig(alpha=0.85, feedback_rate=pre.feedback_rate_min * 0.99,
                                                    window=3000)).certifiable
    assert preflight(ACC, COST, PreflightConfig(alpha=0.85, feedback_rate=0.2, window=pre.window_min)).certifiable
    assert not preflight(ACC, COST, PreflightConfig(alpha=0.85, feedback_rate=0.2,
                                                    window=pre.window_min - 1)).certifiable
    # alpha above every model: nothing makes it certifiable but a lower alpha
    over = preflight(ACC, COST, PreflightConfig(alpha=0.9))
    assert not over.certifiable and over.feedback_rate_min is None and over.window_min is None
    assert "alpha at most" in " ".join(over.report())


def test_the_certified_cost_is_the_mixture_at_alpha_plus_the_margin():
    from slarouter_core.baselines.static import static_mixture_lp

    cfg = PreflightConfig(alpha=0.75, feedback_rate=0.2, window=5000)
    pre = preflight(ACC, COST, cfg)
    assert pre.certifiable and pre.target > 0.75
    assert pre.mixture_cost == pytest.approx(static_mixture_lp(np.array(ACC), np.array(COST), 0.75)[1])
    assert pre.certified_cost == pytest.approx(static_mixture_lp(np.array(ACC), np.array(COST), pre.target)[1])
    assert pre.certified_cost > pre.mixture_cost and pre.ratio(pre.best_cost) == pytest.approx(35.0 / pre.mixture_cost)
    # more thumbs, a narrower margin, a cheaper floor
    more = preflight(ACC, COST, PreflightConfig(alpha=0.75, feedback_rate=0.5, window=5000))
    assert more.margin < pre.margin and more.certified_cost < pre.certified_cost
    # a measured residual of the text model replaces the text-blind one
    text = preflight(ACC, COST, PreflightConfig(alpha=0.75, feedback_rate=0.2, window=5000, residual_var=0.05))
    assert text.margin < pre.margin


def test_the_anytime_guarantee_is_wider():
    window = preflight(ACC, COST, PreflightConfig(alpha=0.75, window=5000))
    anytime = preflight(ACC, COST, PreflightConfig(alpha=0.75, window=5000, guarantee="anytime"))
    assert anytime.margin > 1.5 * window.margin


def test_judge_residual_is_what_a_calibrated_verdict_leaves():
    a = np.array([0.2, 0.6, 0.9])
    assert judge_residual(a, JudgeModel(fpr=0.0, fnr=0.0)) == pytest.approx(np.zeros(3))
    assert judge_residual(a, JudgeModel(fpr=0.5, fnr=0.5)) == pytest.approx(a * (1 - a))
    # against the variance of the outcome within each verdict, simulated
    judge = JUDGE_PRESETS["gpqa"]
    rng = np.random.default_rng(3)
    y = (rng.random(400_000) < 0.6).astype(int)
    v = judge.corrupt(y, rng)
    empirical = sum(np.mean(v == k) * y[v == k].var() for k in (0, 1))
    assert judge_residual(np.array([0.6]), judge)[0] == pytest.approx(empirical, rel=0.02)


def test_a_judge_narrows_the_margin_and_its_break_even_is_what_it_saves():
    plain = preflight(ACC, COST, PreflightConfig(alpha=0.75, window=3000))
    judged = preflight(ACC, COST, PreflightConfig(alpha=0.75, window=3000, judge=JUDGE_PRESETS["acpbench"]))
    assert judged.margin < plain.margin
    assert judged.judge_calls == pytest.approx(1.0) and judged.judge_cost == pytest.approx(min(COST))
    assert judged.certified_cost_without_judge == pytest.approx(plain.certified_cost)
    models_only = judged.certified_cost - judged.judge_calls * judged.judge_cost
    assert judged.judge_break_even == pytest.approx((plain.certified_cost - models_only) / judged.judge_calls)
    # the judge reads the budget's share of the answers, rated or not
    half = preflight(ACC, COST, PreflightConfig(alpha=0.75, window=3000, judge=JUDGE_PRESETS["acpbench"],
                                                judge_budget=0.5, judge_cost=2.0))
    # and, to calibrate itself, the rated answers outside that share (thumbs on 20%)
    assert half.judge_calls == pytest.approx(0.5 + 0.5 * 0.2) and half.judge_cost == 2.0
    assert "and the other rated ones (to calibrate it)" in half.report()[0]
    share_only = preflight(ACC, COST, PreflightConfig(alpha=0.75, window=3000, judge=JUDGE_PRESETS["acpbench"],
                                                      judge_budget=0.5, judge_cost=2.0, judge_calibrate=False))
    assert share_only.judge_calls == pytest.approx(0.5) and share_only.margin == half.margin
    assert judged.margin < half.margin < plain.margin
    # certifiable only with the judge: its break-even is unbounded
    edge = plain.alpha_max + 0.002
    only = preflight(ACC, COST, PreflightConfig(alpha=edge, window=3000, judge=JUDGE_PRESETS["acpbench"]))
    assert only.certifiable and only.certified_cost_without_judge is None and math.isinf(only.judge_break_even)


def test_labels_to_separate_the_best_two():
    assert labels_to_separate(0.8, 0.8) == math.inf
    assert labels_to_separate(0.9, 0.7) < labels_to_separate(0.9, 0.85)
    pre = preflight(ACC, COST, PreflightConfig(alpha=0.75, feedback_rate=0.2, window=3000), ["a", "b", "c", "d"])
    assert (pre.models[pre.best], pre.models[pre.runner_up]) == ("d", "c")
    assert pre.labels_needed == pytest.approx(labels_to_separate(0.86, 0.74)) and pre.labels_given == 600
    assert preflight([0.7], [1.0], PreflightConfig(alpha=0.6)).runner_up is None


def test_defaults_are_the_contextual_policys_claim():
    cfg, ctx = PreflightConfig(alpha=0.7), ContextualConfig()
    assert (cfg.delta, cfg.guarantee) == (ctx.delta, ctx.guarantee)


@pytest.mark.parametrize("acc, cost, message", [
    ([0.5, 0.6], [1.0], "same, non-zero length"),
    ([], [], "same, non-zero length"),
    ([0.5, float("nan")], [1.0, 2.0], "accuracy must be a number in [0, 1]"),
    ([0.5, 1.2], [1.0, 2.0], "accuracy must be a number in [0, 1]"),
    ([0.5, 0.6], [1.0, -2.0], "mean cost must be a finite number >= 0"),
    ([0.5, 0.6], [1.0, float("inf")], "mean cost must be a finite number >= 0"),
])
def test_bad_zoos_are_refused(acc, cost, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        preflight(acc, cost, PreflightConfig(alpha=0.5))


@pytest.mark.parametrize("kwargs", [dict(alpha=1.0), dict(alpha=0.0), dict(alpha="0.5"), dict(alpha=0.5, feedback_rate=0),
                                    dict(alpha=0.5, window=0), dict(alpha=0.5, delta=0.5),
                                    dict(alpha=0.5, guarantee="forever"), dict(alpha=0.5, judge_budget=1.5),
                                    dict(alpha=0.5, judge_cost=-1.0), dict(alpha=0.5, residual_var=0.3)])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises((ValueError, TypeError)):
        PreflightConfig(**kwargs)


def test_the_report_names_models_and_the_dict_round_trips_to_json():
    import json

    pre = preflight(ACC, COST, PreflightConfig(alpha=0.75, window=3000, judge=JUDGE_PRESETS["gpqa"]),
                    ["tiny", "small", "medium", "large"])
    text = "\n".join(pre.report())
    assert "certifiable: yes" in text and "large (86.0%)" in text and "the judge:" in text
    d = json.loads(json.dumps(pre.to_dict()))
    assert d["best"] == "large" and d["runner_up"] == "medium" and d["certifiable"] is True
    assert d["certified_cost_ratio"] == pytest.approx(pre.certified_cost / pre.mixture_cost)


def test_cheapest_point_at_a_rate_is_on_the_lower_convex_hull():
    from slarouter_core.preflight import cheapest_at

    rate = np.array([0.7, 0.8, 0.9])
    cost = np.array([1.0, 2.0, 5.0])
    assert cheapest_at(rate, cost, 0.75) == pytest.approx(1.5)  # half of each of the first two
    assert cheapest_at(rate, cost, 0.85) == pytest.approx(3.5)  # (0.8, 2) and (0.9, 5), not (0.7, 1) and (0.9, 5)
    assert cheapest_at(rate, cost, 0.8) == pytest.approx(2.0)
    assert math.isnan(cheapest_at(rate, cost, 0.95))  # no point reaches it


def test_routing_on_a_perfect_prediction_beats_every_text_blind_mix():
    """The cheap model solves the easy half only: routed on predictions that know which half
    a request is in, the rate 0.95 costs what the dear model costs on the hard half alone."""
    from slarouter_core.baselines.static import static_mixture_lp
    from slarouter_core.preflight import routed_cost

    n = 400
    easy = np.arange(n) % 2 == 0
    solved = np.column_stack([easy, np.ones(n)]).astype(float)
    costs = np.tile([1.0, 10.0], (n, 1))
    cost = routed_cost(solved, solved, costs, 0.95)
    blind = static_mixture_lp(solved.mean(0), costs.mean(0), 0.95)[1]
    assert cost == pytest.approx(0.5 * 1.0 + 0.45 * 10.0 + 0.05 * 1.0, rel=0.02)
    assert cost < 0.6 * blind


def easy_half(seed: int, shift: float, cheap_solves: float, n: int = 2000, dim: int = 16):
    """``(X, solved, costs)``: half the requests are easy (a cheap model solves them at
    ``cheap_solves``, a dear one solves 90% of all), and the embedding's first coordinate
    is shifted by ``+-shift`` with it."""
    rng = np.random.default_rng(seed)
    easy = rng.random(n) < 0.5
    X = rng.standard_normal((n, dim)) * 0.3
    X[:, 0] += np.where(easy, shift, -shift)
    solved = np.column_stack([easy & (rng.random(n) < cheap_solves), rng.random(n) < 0.9]).astype(float)
    return X, solved, np.tile([1.0, 10.0], (n, 1))


def test_the_text_floor_finds_what_the_text_tells_and_nothing_where_it_tells_nothing():
    """Easy requests (the cheap model solves them) carry a direction in the embedding:
    learned from a window's thumbs, the text routes them to the cheap model, far under the
    text-blind mixture; with embeddings that are noise, it cannot beat that mixture."""
    from slarouter_core.preflight import text_floor

    X, solved, costs = easy_half(seed=0, shift=2.0, cheap_solves=0.95)
    n = len(X)
    pre = preflight(solved.mean(0), costs.mean(0), PreflightConfig(alpha=0.85, feedback_rate=0.2, window=n))
    informed = text_floor(solved, costs, X, 0.85, pre.target, labels=400)
    noise = np.random.default_rng(9).standard_normal(X.shape)
    blind = text_floor(solved, costs, noise, 0.85, pre.target, labels=400)
    assert informed < 0.75 * pre.ratio(pre.certified_cost)
    assert blind > 0.9 * pre.ratio(pre.certified_cost)
    assert text_floor(solved, costs, X, 0.85, pre.target, labels=400) == informed  # seeded
    with pytest.raises(ValueError, match="one embedding per request"):
        text_floor(solved, costs, X[:10], 0.85, pre.target, labels=400)


def test_a_judges_calibrated_verdicts_teach_the_text_floor_more_than_the_thumbs_alone():
    from slarouter_core.preflight import text_floor

    X, solved, costs = easy_half(seed=1, shift=1.0, cheap_solves=0.9)
    pre = preflight(solved.mean(0), costs.mean(0), PreflightConfig(alpha=0.8, feedback_rate=0.02, window=len(X)))
    thumbs = text_floor(solved, costs, X, 0.8, pre.target, labels=40)
    judged = text_floor(solved, costs, X, 0.8, pre.target, labels=40, judge=JUDGE_PRESETS["acpbench"], judged=1500)
    assert judged < thumbs
    # a judge that knows nothing (a coin) adds labels that say nothing: no better than the thumbs
    coin = text_floor(solved, costs, X, 0.8, pre.target, labels=40, judge=JudgeModel(fpr=0.5, fnr=0.5), judged=1500)
    assert coin >= judged


def test_a_checks_text_floor_takes_its_windows_labels_and_adds_its_judges_calls():
    from slarouter_core.preflight import check_text_floor, text_floor

    X, solved, costs = easy_half(seed=2, shift=1.0, cheap_solves=0.9)
    n = len(X)
    pre = preflight(solved.mean(0), costs.mean(0), PreflightConfig(alpha=0.8, feedback_rate=0.1, window=1000,
                                                                      judge=JUDGE_PRESETS["acpbench"],
                                                                      judge_budget=0.5, judge_cost=0.5))
    floor, thumbs, verdicts = check_text_floor(pre, solved, costs, X)
    assert (thumbs, verdicts) == (100, 450)  # the window's, not the log's
    plain = text_floor(solved, costs, X, 0.8, pre.target, 100, judge=pre.config.judge, judged=450)
    assert floor == pytest.approx(plain + pre.judge_calls * 0.5 / pre.mixture_cost)
    assert n > pre.config.window
