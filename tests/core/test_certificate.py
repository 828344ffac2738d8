"""The contextual policy's certificate (slarouter_core/policies/certificate.py) and the
judge fill-in it reads: unbiased under a biased judge, a bound that covers, a warning that
comes early where alpha cannot be reached."""

from __future__ import annotations

import numpy as np
import pytest

from slarouter_core.feedback import (BOTH, CALIBRATION, JUDGED, NO_FEEDBACK, FeedbackConfig, calibration_of,
                                     judge_calls, judge_of, n_thumbs, thumbs_of)
from slarouter_core.experiments.certificate_streams import known_truth_run
from slarouter_core.judge import JudgeModel
from slarouter_core.policies.certificate import Certificate
from slarouter_core.policies.base import PolicyStep
from slarouter_core.policies.contextual import ContextualConfig, ContextualPolicy
from slarouter_core.policies.text_model import PRICE_CAP
from slarouter_core.router import RouterConfig, SLARouter
from slarouter_core.simulator import SimulationConfig, simulate

from .test_contextual import contextual, zoo

#: a judge 15 points too harsh on good answers: its raw verdicts are biased low
HARSH = JudgeModel(fpr=0.05, fnr=0.25, name="harsh")


def synthetic_run(cert: Certificate, seed: int, n: int, phi: float = 0.2, judge: JudgeModel | None = HARSH,
                  **kw):
    """One stream whose truth is known (:func:`known_truth_run`), with the harsh judge by
    default. Returns (truth, estimate, bound, judge-as-label)."""
    return known_truth_run(cert, seed, n, phi=phi, judge=judge, **kw)


def test_estimate_is_unbiased_under_a_biased_judge_and_the_window_bound_covers():
    n, reps, delta = 1500, 120, 0.05
    out = np.array([synthetic_run(Certificate(0.7, delta, "window", n), s, n) for s in range(reps)])
    truth, est, lcb, naive = out.T
    err = est - truth
    assert abs(err.mean()) < 3 * err.std() / np.sqrt(reps) + 1e-3, err.mean()
    # the judge's raw verdicts taken as labels (the paper's fill-in) are biased: the test can fail
    assert (naive - truth).mean() < -0.05
    # coverage: the window's satisfaction falls below the claimed bound in about delta of runs
    assert np.mean(truth < lcb) <= delta + 0.06
    assert np.mean(est - lcb) < 0.06  # and the bound says something


def test_the_judge_narrows_the_bound_and_anytime_is_wider():
    n = 1500
    widths = {}
    for name, judge, guarantee in (("thumbs", None, "window"), ("judge", HARSH, "window"),
                                   ("anytime", HARSH, "anytime")):
        w = []
        for s in range(8):
            c = Certificate(0.7, 0.05, guarantee, n)
            synthetic_run(c, s, n, judge=judge)
            w.append(c.estimate() - c.lower_bound())
        widths[name] = np.mean(w)
    assert widths["judge"] < 0.85 * widths["thumbs"], widths
    assert widths["anytime"] > 1.5 * widths["judge"], widths


def test_anytime_sequence_covers_at_every_step():
    """A confidence sequence holds at every step at once: the running truth stays above the
    running bound all along in (nearly) every run."""
    n, reps, fails = 1200, 60, 0
    for s in range(reps):
        rng = np.random.default_rng(100 + s)
        c = Certificate(0.7, 0.05, "anytime", n)
        p = rng.uniform(0.3, 0.95, n)
        y = (rng.random(n) < p).astype(float)
        thumbs = rng.random(n) < 0.2
        ok = True
        for i in range(n):
            c.account(0.6, None, float(y[i]) if thumbs[i] else None)
            if i >= 50 and y[:i + 1].mean() < c.lower_bound():
                ok = False
        fails += not ok
    assert fails / reps <= 0.1


def test_calibration_is_fitted_on_the_thumbs_not_assumed():
    c = Certificate(0.7, 0.05, "window", 4000)
    synthetic_run(c, 0, 4000)
    assert c.calib is not None
    # a harsh judge's "wrong" is often right: the calibrated value after a 0 stays well above 0
    assert 0.15 < c.value(0.6, 0.0) < 0.6 < c.value(0.6, 1.0)


# -- the policy ---------------------------------------------------------------------------
def test_warns_before_half_of_a_stream_that_cannot_reach_alpha():
    data, X = zoo(2000, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    for seed in range(3):
        sim = simulate(data, X, SimulationConfig(contextual(0.97), seed=seed))
        status = sim.router.sla_status()
        assert status["first_at_risk"] is not None and status["first_at_risk"] < 1000
        # the claim is the bound's; ending at alpha is what the router steers for
        assert "window of 2000 requests >= its lower bound with probability >= 95%" in status["guarantee"]
        assert "ends there and still falls below alpha is at most 5%" in status["guarantee"]


def test_no_warning_where_alpha_is_easily_reached():
    data, X = zoo(2000, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    for seed in range(3):
        sim = simulate(data, X, SimulationConfig(contextual(0.75), seed=seed))
        assert sim.router.sla_status()["first_at_risk"] is None
        assert sim.arrays()["satisfied"].mean() >= 0.75


def test_the_warning_is_per_sla_window_and_says_since_when_it_stands():
    c = Certificate(0.8, 0.05, "window", 1000)
    _run_at(c, 0.5, 200)  # far behind: only a perfect rest could save the window
    assert c.check_risk(0.9, 200) and (c.at_risk_since, c.first_at_risk, c.windows_at_risk) == (200, 200, 1)
    assert c.check_risk(0.9, 208) and c.at_risk_since == 200  # still the same warning
    assert not c.check_risk(1.0, 216) and c.at_risk_since is None and c.first_at_risk == 200  # cleared
    assert c.check_risk(0.9, 224) and (c.at_risk_since, c.first_at_risk) == (224, 200)  # a new warning
    meta, arrays = c.state_dict()
    back = Certificate(0.8, 0.05, "window", 1000)
    back.load_state(meta, arrays)
    assert (back.at_risk, back.at_risk_since, back.first_at_risk, back.windows_at_risk) == (True, 224, 200, 1)
    # a checkpoint from before these fields: the standing warning began no later than the first
    old = Certificate(0.8, 0.05, "window", 1000)
    old.load_state({k: v for k, v in meta.items() if k not in ("at_risk_since", "windows_at_risk")}, arrays)
    assert (old.at_risk_since, old.windows_at_risk) == (200, 1)
    _run_at(c, 0.5, 801)  # the window ends; the next one starts clear
    assert c.n_windows == 1 and c.t == 1
    assert (c.at_risk, c.at_risk_since, c.first_at_risk, c.windows_at_risk) == (False, None, None, 1)
    assert c.check_risk(0.5, 1001) and (c.first_at_risk, c.windows_at_risk) == (1001, 2)


def test_a_service_running_window_after_window_reports_the_window_it_is_in():
    data, X = zoo(2000, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    sim = simulate(data, X, SimulationConfig(contextual(0.97, sla_window=1000), seed=0))
    status = sim.router.sla_status()
    assert status["window_index"] == 1 and status["window_served"] == 1000
    # alpha out of reach in both windows: each is warned, the second on its own
    assert status["windows_at_risk"] == 2 and status["first_at_risk"] > 1000
    assert status["at_risk"] and status["first_at_risk"] <= status["at_risk_since"] <= 2000


def test_the_bound_says_its_own_confidence_and_what_it_covers():
    def scope(mode, **kw):
        return SLARouter(RouterConfig(alpha=0.7, mode=mode).with_settings(**kw), 3, 8, seed=0).bound_scope()

    assert scope("paper") is None  # claims no bound
    level, covers = scope("guarded")
    assert covers == "all requests" and abs(level - 0.90) < 1e-4  # the normal bound at z = 1.2816
    assert scope("contextual") == (0.95, "this SLA window")  # its window certificate, at 1 - delta
    assert scope("contextual", delta=0.1) == (0.9, "this SLA window")
    assert scope("contextual", guarantee="anytime") == (0.95, "all requests")


def test_the_at_risk_rate_is_the_fallbacks_own_mix_once_its_models_are_known():
    """A fallback that samples between two close models delivers their mix, not the better
    one's level; committed, it delivers one model's; while a model it may serve is thinly
    labelled (still learning which is best), the best upper level stands in."""
    def policy(pos, cnt, **kw):
        pol = ContextualPolicy(ContextualConfig(dr_levels=False, **kw), alpha=0.8, n_models=2, dim=4, seed=3)
        pol.blind_pos[:], pol.blind_cnt[:] = pos, cnt
        mean, sd = pol.blind_sd()
        return pol, mean + 1.6449 * sd

    pol, upper = policy([425, 420], [500, 500])  # 85% and 84%: no commitment
    rate = pol.risk_rate(100)
    assert upper.min() + 0.001 < rate < upper.max() - 0.001
    pol, upper = policy([475, 250], [500, 500])  # committed to model 0
    assert pol.risk_rate(100) == pytest.approx(upper[0])
    # model 1 may be best on 10 labels: the fallback that serves the best is still learning
    pol, upper = policy([425, 8], [500, 10], repay_cost=False)
    assert pol.risk_rate(100) == pytest.approx(upper.max())
    # the fallback that repays at least cost serves model 0, sure to repay: its rate
    pol, upper = policy([425, 8], [500, 10])
    assert pol.risk_rate(100) == pytest.approx(upper[0])
    pol, upper = policy([425, 420], [500, 500], fallback="level")  # not a sampling fallback
    assert pol.risk_rate(100) == pytest.approx(upper.max())
    assert policy([425, 420], [500, 500])[0].risk_rate(100) == rate  # the same draws for the same step


def _run_at(cert: Certificate, rate: float, n: int) -> None:
    """``n`` steps predicted and satisfied at ``rate`` (tenths), thumbs on every fifth."""
    ys = [1.0] * round(10 * rate) + [0.0] * (10 - round(10 * rate))
    for i in range(n):
        cert.account(rate, None, ys[(i // 5) % 10] if i % 5 == 0 else None)


def _behind(n_steps: int, window: int, levels, counts, costs, **kw) -> ContextualPolicy:
    """A policy ``n_steps`` into a window of ``window`` requests whose estimate ran at 70%
    against alpha 80% (a shortfall), with each model's request-blind labels at ``levels``."""
    pol = ContextualPolicy(ContextualConfig(dr_levels=False, sla_window=window, **kw), alpha=0.8,
                           n_models=len(levels), dim=4, seed=0)
    _run_at(pol.cert, 0.7, n_steps)
    cnt = np.asarray(counts, float)
    pol.blind_cnt[:], pol.blind_pos[:] = cnt, np.round(np.asarray(levels) * cnt)
    pol.pos[:], pol.cnt[:] = pol.blind_pos, pol.blind_cnt
    pol.cost_sum[:], pol.ref_n = np.asarray(costs, float) * 100, 100
    return pol


def _served(pol: ContextualPolicy, t: int = 208) -> PolicyStep:
    """The model served at step ``t`` (a replan step, not explored); it must be capped."""
    costs = pol.cost_sum / pol.ref_n
    step = pol.choose(np.zeros(4, np.float32), costs, t, 0.999, 0.5)
    assert pol.lam >= PRICE_CAP and not step.explored
    return step


def test_warn_z_reads_the_known_levels_less_generously_and_warns_sooner():
    """``warn_z`` sets the upper bound on each level the at-risk test reads, for the models
    with ``min_labels`` request-blind labels or more; thinner ones stay at the 95% bound (a
    handful of thumbs says little of what a model can do)."""
    def rate(cnt, warn_z):
        pol = ContextualPolicy(ContextualConfig(dr_levels=False, warn_z=warn_z, fallback="level"), alpha=0.8,
                               n_models=2, dim=4, seed=3)
        pol.blind_pos[:], pol.blind_cnt[:] = [0.85 * c for c in cnt], cnt
        mean, sd = pol.blind_sd()
        return pol.risk_rate(100), mean, sd
    r, mean, sd = rate([500, 500], 0.5)
    assert r == pytest.approx(float((mean + 0.5 * sd).max()))
    r, mean, sd = rate([500, 8], 0.5)  # the thin model at its 95% bound, the known one at warn_z
    assert r == pytest.approx(float(max(mean[0] + 0.5 * sd[0], mean[1] + 1.6449 * sd[1])))
    assert rate([500, 500], ContextualConfig().warn_z)[0] > rate([500, 500], 1.0)[0]
    with pytest.raises(ValueError, match="warn_z"):
        ContextualConfig(warn_z=-1.0)
    # a stream whose best model (92.9%) cannot reach alpha: warned sooner at a lower warn_z;
    # one where alpha is easily reached: no warning at either
    data, X = zoo(2000, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    for seed in (1, 2):
        first = [simulate(data, X, SimulationConfig(contextual(0.935, warn_z=z), seed=seed)).router.sla_status()
                 ["first_at_risk"] for z in (ContextualConfig().warn_z, 0.5)]
        assert None not in first and first[1] < first[0]
        sim = simulate(data, X, SimulationConfig(contextual(0.75, warn_z=0.5), seed=seed))
        assert sim.router.sla_status()["first_at_risk"] is None


def test_warn_after_keeps_the_at_risk_test_quiet_until_the_thumbs_are_there():
    """With ``warn_after``, no warning before the certificate holds that many thumbs (its
    projection reads their rate and residuals); a stream that cannot reach alpha is still
    warned once they are there."""
    data, X = zoo(2000, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    first = simulate(data, X, SimulationConfig(contextual(0.935), seed=0)).router.sla_status()["first_at_risk"]
    assert first is not None and first < 64  # warned on a handful of thumbs
    sim = simulate(data, X, SimulationConfig(contextual(0.935, warn_after=64), seed=0))
    later = sim.router.sla_status()["first_at_risk"]
    assert later is not None and 64 <= later < 1000  # at least 64 steps to give 64 thumbs
    never = simulate(data, X, SimulationConfig(contextual(0.935, warn_after=10**6), seed=0))
    assert never.router.sla_status()["first_at_risk"] is None


def test_the_fallback_repays_a_shortfall_with_the_model_cheapest_per_point():
    """Behind its path with no price reaching the target: of the models sure to repay by
    the window's end, the one that costs least per point above the path's rate (a 90%
    model at 1 before a 95% one at 10), flagged as not the lowest score; the best model
    where the cheap one is not sure (too few labels) or cannot repay in time, and always
    without ``repay_cost``."""
    levels, costs = [0.3, 0.9, 0.95], [0.1, 1.0, 10.0]
    step = _served(_behind(200, 10_000, levels, [500, 1000, 1000], costs))
    assert step.model == 1 and step.repaid
    assert int(np.argmax(step.shat)) == 2  # the scores' lowest is the best level
    assert _served(_behind(200, 10_000, levels, [500, 1000, 1000], costs, repay_cost=False)).model == 2
    thin = _behind(200, 10_000, [0.3, 0.8, 0.95], [500, 5, 1000], costs)  # 4 of 5: not sure
    assert _served(thin).model == 2
    late = _behind(900, 1_000, levels, [500, 1000, 1000], costs)  # 90 requests short, 100 left
    path, need = late.cert.repay_rates()
    assert need > 0.9
    assert _served(late).model == 2


def test_repay_rates_are_the_paths_rate_and_the_rate_that_ends_the_window_on_it():
    """``need`` spreads the shortfall over the rest of the window; ahead of the path it is the
    path's rate; anytime mode has no window end to repay by."""
    cert = Certificate(0.8, 0.05, "window", 1000)
    _run_at(cert, 0.7, 200)  # below alpha: a shortfall
    path, need = cert.repay_rates()
    assert path == pytest.approx(0.8 + cert.final_margin() / 1000)
    assert need == pytest.approx(path + cert.shortfall() / 800) and need > path + 0.02
    ahead = Certificate(0.8, 0.05, "window", 1000)
    _run_at(ahead, 0.9, 200)
    assert ahead.shortfall() < 0 and ahead.repay_rates()[1] == ahead.repay_rates()[0]
    assert Certificate(0.8, 0.05, "anytime", 1000).repay_rates() is None


def test_a_written_off_model_comes_back_as_sla_windows_pass():
    """A model written off gets no labels, so only forgetting can bring it back: each new
    SLA window keeps half of every model's request-blind evidence (a service's windows
    follow each other; a one-window simulation never forgets)."""
    def run(forget):
        pol = ContextualPolicy(ContextualConfig(dr_levels=False, sla_window=50, forget=forget), alpha=0.8,
                               n_models=2, dim=4, seed=0)
        pol.cost_sum[:], pol.ref_n = [1.0, 2.0], 1
        pol.blind_pos[:], pol.blind_cnt[:] = [80, 26], [100, 40]
        assert list(pol.candidates()) == [0]  # the dearer model written off on 26 of its 40 labels
        x, costs = np.zeros(4, np.float32), np.array([1.0, 2.0])
        for t in range(1, 101):  # the first window and half the second, no thumbs
            pol.update(pol.choose(x, costs, t, 0.5, 0.5), x, None)
        assert pol.cert.n_windows == 1
        pol.cert.at_risk = False  # (an unlabelled stream may be at risk: every model is then a candidate)
        return pol

    pol = run(0.5)
    # the leader keeps its evidence; the written-off model keeps what 16 labels (min_labels) say
    assert pol.blind_cnt.tolist() == [100, 20] and pol.blind_pos.tolist() == [80, 13]
    assert 1 in pol.candidates()  # at 20 labels its 65% may still beat 80%: it is explored again
    pol = run(1.0)
    assert pol.blind_cnt.tolist() == [100, 40] and list(pol.candidates()) == [0]
    pol = run(0.5)  # one window later still: the floor holds
    pol.forget_evidence()
    assert pol.blind_cnt[1] >= 16


def test_a_model_clearly_worse_stays_written_off_across_windows():
    pol = ContextualPolicy(ContextualConfig(dr_levels=False, sla_window=50), alpha=0.8, n_models=2, dim=4, seed=0)
    pol.cost_sum[:], pol.ref_n = [1.0, 2.0], 1
    pol.blind_pos[:], pol.blind_cnt[:] = [80, 8], [100, 40]  # 20% against 80%
    for _ in range(5):
        pol.forget_evidence()
    assert pol.blind_cnt.tolist() == [100, 16] and list(pol.candidates()) == [0]


def test_a_dear_model_shown_worse_is_no_longer_explored():
    pol = ContextualPolicy(ContextualConfig(dr_levels=False), alpha=0.8, n_models=3, dim=4, seed=0)
    pol.cost_sum[:] = [1.0, 2.0, 50.0]
    pol.ref_n = 1
    pol.blind_pos[:] = [60, 90, 20]
    pol.blind_cnt[:] = [100, 100, 100]
    assert list(pol.candidates()) == [0, 1]  # 2 is dearer than 0 and surely worse
    pol.blind_cnt[:] = [100, 100, 0]
    pol.blind_pos[:] = [60, 90, 0]
    assert 2 in pol.candidates()  # no label proves nothing
    assert ContextualPolicy(ContextualConfig(prune=False), 0.8, 3, 4).candidates().tolist() == [0, 1, 2]
    pol.blind_cnt[:] = [100, 100, 10]
    pol.blind_pos[:] = [60, 90, 0]
    assert 2 in pol.candidates()  # ten unlucky labels are too few to write a model off
    pol.blind_pos[:], pol.blind_cnt[:] = [60, 90, 20], [100, 100, 100]
    pol.cert.at_risk = True  # the models it believes in cannot carry the SLA: all come back
    assert list(pol.candidates()) == [0, 1, 2]


def test_with_no_price_reaching_the_target_only_models_that_may_be_best_are_explored():
    """Capped, only the best model can help: a model surely worse than the leader gets no
    exploration label (it would in the priced regime, or without ``contenders``)."""
    def policy(**kw):
        pol = ContextualPolicy(ContextualConfig(dr_levels=False, **kw), alpha=0.8, n_models=3, dim=4, seed=0)
        pol.cost_sum[:] = [1.0, 2.0, 50.0]
        pol.ref_n = 1
        pol.blind_pos[:], pol.blind_cnt[:] = [18, 64, 60], [60, 80, 80]  # 0.30, 0.80, 0.75
        return pol

    pol = policy()
    pol.lam = 1.0  # a price reaches the target
    us = np.linspace(0.0, 0.999, 50)
    assert {pol.explore_choice(u) for u in us} == {0}  # priced: the least labelled candidate
    pol.lam = PRICE_CAP
    assert {pol.explore_choice(u) for u in us} == {1, 2}  # capped: 0 cannot be the best
    off = policy(contenders=False)
    off.lam = PRICE_CAP
    assert {off.explore_choice(u) for u in us} == {0}


def test_contender_q_keeps_a_model_one_thumbs_down_behind_a_leader_above_77_6_percent():
    """One thumbs down (Beta(1, 2)) reaches 0.776 at 95%, 0.9 at 99%: against a leader at
    81.8% the default writes the model off, ``contender_q=0.99`` keeps it; four thumbs down
    (Beta(1, 5): 0.602 at 99%) are out either way."""
    def may(q, cnt):
        pol = ContextualPolicy(ContextualConfig(dr_levels=False, contender_q=q), alpha=0.7, n_models=2, dim=4,
                               seed=0)
        pol.blind_pos[:], pol.blind_cnt[:] = [17, 0], [20, cnt]  # the leader at 18 / 22 = 0.818
        return bool(pol.may_be_best()[1])

    assert not may(0.95, 1) and may(0.99, 1)
    assert not may(0.99, 4)
    for bad in ({"contender_q": 1.0}, {"contender_q": 0.3}, {"explore_by": "fewest"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            ContextualConfig(**bad)


def test_exploring_by_draws_labels_the_contenders_with_a_chance_never_the_leader():
    """Capped, ``explore_by="draw"`` labels the contender whose level draws highest,
    leaving out the leader (the fallback labels it): a close contender far more often
    than one that may just reach the leader, each step's pick fixed by the step."""
    pol = ContextualPolicy(ContextualConfig(dr_levels=False, explore_by="draw"), alpha=0.7, n_models=3, dim=4,
                           seed=0)
    pol.cost_sum[:] = [1.0, 1.0, 1.0]
    pol.blind_pos[:], pol.blind_cnt[:] = [160, 78, 6], [200, 100, 10]  # 0.80, 0.775, 0.58
    pol.lam = PRICE_CAP
    assert list(pol.may_be_best()) == [True, True, True]
    picks = []
    for n in range(1, 401):
        pol.ref_n = n
        picks.append(pol.explore_choice(0.5))
        assert pol.explore_choice(0.9) == picks[-1]  # the draw is the step's, not the uniform's
    counts = np.bincount(picks, minlength=3)
    assert counts[0] == 0 and counts[1] > 2 * counts[2] > 0
    least = ContextualPolicy(ContextualConfig(dr_levels=False), alpha=0.7, n_models=3, dim=4, seed=0)
    least.cost_sum[:], least.ref_n, least.lam = pol.cost_sum, 1, PRICE_CAP
    least.blind_pos[:], least.blind_cnt[:] = pol.blind_pos, pol.blind_cnt
    assert least.explore_choice(0.5) == 2  # by default the least labelled


def test_a_model_may_be_best_by_its_exact_posterior_not_a_normal_approximation():
    """One thumbs down is not evidence that a model is worse than a leader at 73%: its
    Beta(1, 2) posterior's 95% quantile is 0.776 (the normal approximation said 0.721 and
    wrote it off); four thumbs down of four are (Beta(1, 5): 0.451)."""
    pol = ContextualPolicy(ContextualConfig(dr_levels=False), alpha=0.7, n_models=3, dim=4, seed=0)
    pol.blind_pos[:], pol.blind_cnt[:] = [15, 0, 0], [20, 1, 4]  # posterior means 0.727, 0.333, 0.167
    mean, sd = pol.blind_sd()
    assert mean[1] + 1.6449 * sd[1] < mean[0]  # what the normal approximation would conclude
    assert list(pol.may_be_best()) == [True, True, False]
    pol.cost_sum[:] = [1.0, 1.0, 1.0]
    pol.ref_n = 1
    pol.lam = PRICE_CAP
    assert {pol.explore_choice(u) for u in np.linspace(0.0, 0.999, 50)} == {1}  # least labelled contender


def blind_steps(pol: ContextualPolicy, model: int, level: float, n: int, rng, judge: JudgeModel | None,
                phi: float = 0.2, pred=None) -> None:
    """``n`` request-blind steps of ``model`` whose answers satisfy with probability ``level``
    (``pred(y, rng)``: the text model's prediction for the step, 0.5 by default)."""
    for t in range(n):
        y = float(rng.random() < level)
        verdict = None if judge is None else float(judge.corrupt(np.array([int(y)]), rng)[0])
        p = 0.5 if pred is None else float(pred(y, rng))
        step = PolicyStep(t=t + 1, model=model, explored=True, p_explore=1.0, shat=np.full(pol.M, 0.5), q=0.0,
                          v=1.0, shat_served=p, blind=True)
        pol.update(step, np.zeros(pol.D, np.float32), y if rng.random() < phi else None, verdict)


def test_levels_from_every_blind_step_are_unbiased_and_sharper_with_a_judge():
    """The doubly-robust level of each model: unbiased under a judge 15 points too harsh,
    and worth more than its thumbs where the judge explains part of the outcome; without a
    judge (the text model's constant 0.5 explains nothing) the thumbs alone."""
    means, sizes = {}, {}
    for name, judge in (("judge", HARSH), ("thumbs", None)):
        m, sz, thumbs = [], [], []
        for seed in range(12):
            rng = np.random.default_rng(seed)
            pol = ContextualPolicy(ContextualConfig(), alpha=0.8, n_models=2, dim=4, seed=seed)
            blind_steps(pol, 0, 0.70, 1500, rng, judge)
            blind_steps(pol, 1, 0.76, 1500, rng, judge)
            mean, size = pol.blind_posterior()
            m.append(mean)
            sz.append(size)
            thumbs.append(pol.blind_cnt.copy())
        means[name], sizes[name] = np.array(m), np.array(sz) / np.array(thumbs)
        err = means[name] - np.array([0.70, 0.76])
        assert np.all(np.abs(err.mean(axis=0)) < 3 * err.std(axis=0) / np.sqrt(12) + 0.005), err.mean(axis=0)
    assert sizes["judge"].mean() > 1.3  # this harsh judge: about 1.4 thumbs per thumb
    assert np.all((sizes["thumbs"] >= 1.0) & (sizes["thumbs"] < 1.3))  # the thumbs: they say more


def test_with_a_judge_the_levels_from_every_blind_step_err_less_than_the_thumbs_alone():
    """Sharper in fact, not only in their claimed size: on the same 24 streams, the squared
    error of both models' levels is smaller than with the thumbs alone (``dr_levels=False``)."""
    def errors(dr_levels: bool) -> np.ndarray:
        out = []
        for seed in range(24):
            rng = np.random.default_rng(seed)
            pol = ContextualPolicy(ContextualConfig(dr_levels=dr_levels), alpha=0.8, n_models=2, dim=4, seed=seed)
            blind_steps(pol, 0, 0.70, 1500, rng, HARSH)
            blind_steps(pol, 1, 0.76, 1500, rng, HARSH)
            out.append(pol.blind_posterior()[0] - (0.70, 0.76))
        return np.array(out)

    assert (errors(True) ** 2).mean() < (errors(False) ** 2).mean()


def test_levels_by_regression_are_unbiased_never_worth_less_than_the_thumbs_and_sharper_with_a_judge():
    """``regression_levels``: the thumbs' mean corrected by the predictions' control variate.
    Unbiased under a judge 15 points too harsh and under predictions that err wildly,
    worth at least the thumbs, more with the judge, and with predictions that say nothing
    (a constant) exactly the thumbs."""
    def levels(judge, pred, regression=True, seeds=range(16)):
        out = []
        for seed in seeds:
            rng = np.random.default_rng(seed)
            pol = ContextualPolicy(ContextualConfig(regression_levels=regression), alpha=0.8, n_models=2, dim=4,
                                   seed=seed)
            blind_steps(pol, 0, 0.70, 1500, rng, judge, pred=pred)
            blind_steps(pol, 1, 0.85, 1500, rng, judge, pred=pred)
            mean, size = pol.blind_posterior()
            thumbs = pol.level_mean(pol.blind_pos, pol.blind_cnt)
            out.append((mean, size - 2.0, pol.blind_cnt.copy(), thumbs))
        return out

    truth = np.array([0.70, 0.85])
    far_off = lambda y, rng: float(np.clip(0.2 + 0.1 * rng.standard_normal(), 0.01, 0.99))  # noqa: E731
    for judge, pred in ((HARSH, None), (None, far_off)):
        runs = levels(judge, pred)
        err = np.array([m for m, *_ in runs]) - truth
        assert np.all(np.abs(err.mean(axis=0)) < 3 * err.std(axis=0) / 4 + 0.005), err.mean(axis=0)
        assert all(np.all(size >= cnt - 1e-9) for _, size, cnt, _ in runs)  # never worth fewer labels
    sharper = levels(HARSH, None)
    assert np.mean([size / cnt for _, size, cnt, _ in sharper]) > 1.3  # the judge explains part of it
    thumbs_err = np.array([t for *_, t in sharper]) - truth
    assert (np.array([m for m, *_ in sharper]) - truth).__pow__(2).mean() < (thumbs_err ** 2).mean()
    for mean, size, cnt, thumbs in levels(None, None, seeds=range(3)):  # a constant prediction: the thumbs
        np.testing.assert_allclose(mean, thumbs)
        np.testing.assert_allclose(size, cnt)


def test_levels_by_regression_survive_a_checkpoint_and_an_older_one_reads_the_thumbs():
    rng = np.random.default_rng(0)  # the judge's own levels off: this is about the regression's state
    pol = ContextualPolicy(ContextualConfig(regression_levels=True, judge_levels=False), alpha=0.8, n_models=2, dim=4, seed=0)
    blind_steps(pol, 0, 0.7, 400, rng, HARSH)
    meta, arrays = pol.state_dict()
    back = ContextualPolicy(ContextualConfig(regression_levels=True, judge_levels=False), alpha=0.8, n_models=2, dim=4, seed=0)
    back.load_state(meta, arrays)
    np.testing.assert_array_equal(back.blind_posterior()[0], pol.blind_posterior()[0])
    old = ContextualPolicy(ContextualConfig(regression_levels=True, judge_levels=False), alpha=0.8, n_models=2, dim=4, seed=0)
    old.load_state(meta, {k: v for k, v in arrays.items() if not k.startswith("contextual.reg_")})
    np.testing.assert_allclose(old.blind_posterior()[0], old.level_mean(old.blind_pos, old.blind_cnt))


def test_a_surplus_is_spent_only_beyond_the_bound_width_and_over_the_rest_of_the_window():
    """A deficit is repaid over ``max(h_min, h t)`` requests; a surplus may be luck, so only
    what exceeds the bound's current width is spent, spread over the rest of the window."""
    def after(ys):
        c = Certificate(0.8, 0.05, "window", 1000)
        for i, y in enumerate(ys):
            c.account(0.8, None, y if i % 2 == 0 else None)  # thumbs on every other step
        return c
    base = lambda c: 0.8 + c.final_margin() / c.window  # noqa: E731  (the path's own rate)
    behind = after([1.0] * 70 + [0.0] * 30)  # 70% against 80%: 10 requests short (and the margin)
    assert behind.target_rate(0.05, 50) == pytest.approx(base(behind) + behind.shortfall() / 50)
    slight = after([1.0] * 84 + [0.0] * 16)  # ahead by less than the bound's width: nothing spent
    assert slight.shortfall() < 0 < slight.shortfall() + slight.width(slight.var)
    assert slight.target_rate(0.05, 50) == pytest.approx(base(slight))
    far = after([1.0] * 100)  # far ahead: only the part beyond the width, over the 900 left
    spend = far.shortfall() + far.width(far.var)
    assert spend < 0
    assert far.target_rate(0.05, 50) == pytest.approx(base(far) + spend / 900)


def test_exploration_spends_little_on_a_dear_useless_model():
    """A model 50x dearer and worse than the rest is explored a handful of times, not a
    share of every exploration step."""
    data, X = zoo(3000, acc_easy=(0.9, 0.95, 0.5), acc_hard=(0.6, 0.9, 0.4), cost=(1.0, 2.0, 100.0))
    on_dear = {}
    for prune in (True, False):
        a = simulate(data, X, SimulationConfig(contextual(0.8, prune=prune), seed=0)).arrays()
        on_dear[prune] = int(((a["model"] == 2) & a["explored"]).sum())
    assert on_dear[True] * 4 < on_dear[False], on_dear


# -- judge fill-in, end to end ---------------------------------------------------------------
def test_fill_in_codes_keep_thumbs_and_add_the_judge():
    fb = FeedbackConfig(judge_fill=HARSH, judge_budget=0.5, judge_calibrate=False)
    data, X = zoo(2000, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    plain = simulate(data, X, SimulationConfig(contextual(0.8), seed=1)).feedback_plan
    filled = simulate(data, X, SimulationConfig(contextual(0.8), seed=1, feedback=fb)).feedback_plan
    assert np.array_equal(thumbs_of(filled), plain)  # the users' thumbs are untouched
    judged_alone = (filled >= JUDGED) & (filled < BOTH)
    assert np.all(plain[judged_alone] == NO_FEEDBACK)
    share = judged_alone[:, 0].sum() / (plain[:, 0] == NO_FEEDBACK).sum()
    assert 0.45 < share < 0.55
    # the thumbed answers are judged at the same share: the judge's draw ignores the thumbs
    rated = plain[:, 0] >= 0
    assert 0.4 < np.mean(judge_of(filled)[rated, 0] >= 0) < 0.6
    assert np.array_equal(judge_of(filled)[rated, 0] >= 0, judged_alone.any(axis=1)[rated] | (filled[rated, 0] >= BOTH))
    full = simulate(data, X, SimulationConfig(contextual(0.8), seed=1, feedback=FeedbackConfig(judge_fill=HARSH)))
    assert np.all(judge_of(full.feedback_plan) >= 0)  # a full budget reads every answer


def test_fill_in_reads_the_rated_answers_outside_the_draw_for_calibration_only():
    """``judge_calibrate`` (the default): the rated answers the budget's draw left out get a
    calibration verdict (their own code); the draw and every other cell are as without it."""
    data, X = zoo(2000, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    plans = {cal: simulate(data, X, SimulationConfig(contextual(0.8), seed=1, feedback=FeedbackConfig(
        judge_fill=HARSH, judge_budget=0.5, judge_calibrate=cal))).feedback_plan for cal in (True, False)}
    with_cal, without = plans[True], plans[False]
    cal = with_cal >= CALIBRATION
    assert np.array_equal(with_cal[~cal], without[~cal])
    rated = thumbs_of(without) >= 0
    assert np.array_equal(cal, rated & (judge_of(without) < 0))  # exactly the rated ones left out
    assert np.array_equal(thumbs_of(with_cal), thumbs_of(without))
    assert np.all(calibration_of(with_cal)[cal] == judge_of(with_cal)[cal]) and np.all(calibration_of(with_cal)[~cal] < 0)
    assert 0.4 < cal[:, 0].sum() / rated[:, 0].sum() < 0.6
    full = simulate(data, X, SimulationConfig(contextual(0.8), seed=1, feedback=FeedbackConfig(judge_fill=HARSH)))
    assert not np.any(full.feedback_plan >= CALIBRATION)  # a full budget already reads every answer


@pytest.mark.parametrize("mode, calls", [("paper", "unrated drawn"), ("guarded", "none"), ("contextual", "all")])
def test_calibration_reads_are_made_only_by_a_router_that_calibrates_a_judge(mode, calls):
    fb = FeedbackConfig(judge_fill=HARSH, judge_budget=0.25)
    data, X = zoo(1500, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    sim = simulate(data, X, SimulationConfig(RouterConfig(alpha=0.8, mode=mode), seed=0, feedback=fb))
    f = sim.arrays()["feedback"]
    rated = thumbs_of(f) >= 0
    if calls == "none":
        assert judge_calls(f) == 0
    elif calls == "unrated drawn":  # paper mode labels with the judge where there are no thumbs
        assert not np.any(f >= BOTH) and 0.15 < np.mean(judge_of(f)[~rated] >= 0) < 0.35
    else:
        cert = sim.router.policy.cert
        assert np.all(judge_of(f)[rated] >= 0)  # every rated answer was read
        assert cert.pairs_n == int(rated.sum())  # and calibrates the judge
        assert cert.judged == int(np.sum((f >= JUDGED) & (f < CALIBRATION)))  # only the draw sets predictions
        late = simulate(data, X, SimulationConfig(RouterConfig(alpha=0.8, mode=mode), seed=0, feedback=FeedbackConfig(
            kind="delayed", delay=30.0, judge_fill=HARSH, judge_budget=0.25)))
        lc = late.router.policy.cert
        assert lc.pairs_n == lc.thumbs < cert.thumbs  # the verdicts follow their thumbs (the last 30 never came)


@pytest.mark.parametrize("delay", [0, 50])
def test_calibration_reads_leave_the_estimate_unbiased_and_give_the_judge_every_rated_pair(delay):
    """A verdict read because the answer was rated never sets its step's prediction, so the
    estimate stays unbiased and the bound covers, while the judge is calibrated on all the
    thumbs instead of its budget's share of them."""
    n, reps, delta = 1500, 100, 0.05
    out = np.array([synthetic_run(Certificate(0.7, delta, "window", n), s, n, budget=0.25, predicted=0.9,
                                  delay=delay, calibrate=True) for s in range(reps)])
    truth, est, lcb, _ = out.T
    err = est - truth
    assert abs(err.mean()) < 3 * err.std() / np.sqrt(reps) + 2e-3, err.mean()
    assert np.mean(truth < lcb) <= delta + 0.06
    pairs = {}
    for cal in (True, False):
        cert = Certificate(0.7, delta, "window", n)
        synthetic_run(cert, 0, n, budget=0.25, predicted=0.9, delay=delay, calibrate=cal)
        pairs[cal] = cert.pairs_n
        assert cert.judge_share == pytest.approx(0.25, abs=0.05)  # the draw alone sets predictions
    assert pairs[True] == cert.thumbs and pairs[False] < 0.4 * pairs[True]


def test_a_calibration_verdict_teaches_the_judge_not_the_estimate_and_survives_a_checkpoint(tmp_path):
    data, X = zoo(400, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    r = SLARouter(contextual(0.8), data.n_models, X.shape[1], seed=0, stream_length=400)
    for i in range(40):
        d = r.decide(X[i], data.costs[i])
        r.observe(d, int(data.solved[i, d.model]) if i % 2 else None)
    cert = r.policy.cert
    dr, var, judged = cert.dr, cert.var, cert.judged
    assert r.judge_calibration(4, 1) and cert.pairs_n == 1  # a rated step (every even one)
    assert (cert.dr, cert.var, cert.judged) == (dr, var, judged)  # the estimate is untouched
    assert not r.judge_calibration(4, 0) and cert.pairs_n == 1  # once per answer
    assert not r.judge_calibration(3, 1)  # an unrated step: no thumbs to pair with
    assert r.policy.pair_tp.sum() + r.policy.pair_fp.sum() == 1  # counted towards the judge's error rates
    r.save(tmp_path / "r.safetensors")
    again = SLARouter.load(tmp_path / "r.safetensors")
    assert list(again.policy.rated) == list(r.policy.rated) and len(r.policy.rated) == 19
    assert again.judge_calibration(6, 0) and again.policy.cert.pairs_n == 2
    d = r.decide(X[40], data.costs[40])
    r.observe(d, None)
    r.late_feedback(d.t, 1)
    assert r.judge_calibration(d.t, 1)  # late thumbs: the verdict follows them
    with pytest.raises(ValueError):
        r.judge_calibration(7, 2)


@pytest.mark.parametrize("mode, use", [("paper", "label"), ("guarded", "ignore"), ("contextual", "estimate")])
def test_each_policy_calls_the_judge_as_it_uses_it(mode, use):
    fb = FeedbackConfig(judge_fill=HARSH)
    data, X = zoo(600, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    sim = simulate(data, X, SimulationConfig(RouterConfig(alpha=0.8, mode=mode), seed=0, feedback=fb))
    assert sim.router.judge_use == use
    f = sim.arrays()["feedback"]
    calls, thumbs = judge_calls(f), n_thumbs(f)
    assert 0.1 * len(f) < thumbs < 0.3 * len(f)
    if use == "ignore":
        assert calls == 0
    elif use == "label":  # only where the user gave no thumbs
        assert calls == len(f) - thumbs
    else:  # every answer: the thumbed ones calibrate the judge
        assert calls == len(f)


def test_judge_verdicts_move_the_estimate_only_through_the_calibration():
    data, X = zoo(1500, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    est = {}
    for name, fb in (("thumbs", FeedbackConfig()), ("judge", FeedbackConfig(judge_fill=HARSH))):
        sims = [simulate(data, X, SimulationConfig(contextual(0.8), seed=s, feedback=fb)) for s in range(6)]
        est[name] = np.array([s.router.satisfaction_estimate() - s.arrays()["satisfied"].mean() for s in sims])
        est[name + " width"] = np.mean([s.router.satisfaction_estimate() - s.router.certified_lower_bound()
                                        for s in sims])
    assert abs(est["judge"].mean()) < 0.02  # the harsh judge does not drag the estimate down
    assert est["judge width"] < est["thumbs width"]


def test_late_judge_verdict_and_late_thumbs_reach_the_certificate():
    data, X = zoo(400, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    r = SLARouter(contextual(0.8), data.n_models, X.shape[1], seed=0, stream_length=400)
    rng = np.random.default_rng(0)
    for i in range(300):  # thumbs with the judge's verdict: calibration pairs
        d = r.decide(X[i], data.costs[i])
        y = int(data.solved[i, d.model])
        r.observe(d, y if rng.random() < 0.3 else None, judge=y)
    d = r.decide(X[300], data.costs[300])
    r.observe(d, None)
    before = r.policy.cert.dr
    r.judge_verdict(d.t, 0)
    after_judge = r.policy.cert.dr
    assert after_judge != before
    r.judge_verdict(d.t, 1)  # a second verdict on the same answer changes nothing
    assert r.policy.cert.dr == after_judge
    r.late_feedback(d.t, 1)
    assert r.policy.cert.dr > after_judge
    r.judge_verdict(99_999, 1)  # unknown steps are ignored: a judge verdict is optional


def test_checkpoint_keeps_the_certificate_and_continues_identically(tmp_path):
    data, X = zoo(600, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    r = SLARouter(contextual(0.8), data.n_models, X.shape[1], seed=3, stream_length=600)
    rng = np.random.default_rng(0)
    for i in range(300):
        d = r.decide(X[i], data.costs[i])
        y = int(data.solved[i, d.model])
        r.observe(d, y if rng.random() < 0.3 else None, judge=y if rng.random() < 0.5 else None)
    b = SLARouter.load(r.save(tmp_path / "c.safetensors"))
    assert b.sla_status() == r.sla_status()
    for i in range(300, 600):
        da, db = r.decide(X[i], data.costs[i]), b.decide(X[i], data.costs[i])
        assert da.model == db.model
        y = int(data.solved[i, da.model])
        for router, dec in ((r, da), (b, db)):
            router.observe(dec, y if i % 4 == 0 else None, judge=y if i % 3 == 0 else None)
    assert b.policy.cert.dr == r.policy.cert.dr and b.certified_lower_bound() == r.certified_lower_bound()


def test_the_memoised_final_margin_follows_every_change_of_what_it_reads():
    """final_margin is read several times a step and memoised: after each kind of step
    (thumbs, judged, neither, late thumbs, a new window) it equals the width computed anew."""
    cert = Certificate(0.7, 0.05, "window", 40)
    rng = np.random.default_rng(3)

    def fresh() -> float:
        return cert.width(cert.var + cert.remaining() * cert.step_var())

    moved = 0
    for i in range(100):  # two and a half windows
        judge = float(rng.random() < 0.6) if i % 3 else None
        thumbs = float(rng.random() < 0.7) if i % 4 == 0 else None
        before = cert.final_margin()
        cert.account(0.65, judge, thumbs)
        if i % 7 == 0 and thumbs is None:
            cert.late_thumbs(0.65, 0.65, judge, 1.0)
        assert cert.final_margin() == fresh()
        moved += cert.final_margin() != before
    assert moved >= 90  # almost every step moves it: a stale memo would show
    for write in (lambda: setattr(cert, "var", cert.var + 5.0), lambda: cert.r2.__setitem__(0, cert.r2[0] + 1.0),
                  lambda: cert.r2_n.__setitem__(1, cert.r2_n[1] + 3.0)):  # as a checkpoint load writes them
        before = cert.final_margin()
        write()
        assert cert.final_margin() == fresh() != before


def test_at_risk_the_rescue_serves_the_model_that_may_still_carry_the_sla():
    """``rescue`` (opt-in): behind its path, at risk, with the leader (70% on 1,000 labels)
    unable to carry the rate the window needs, the fallback serves the model written off on
    its first thumbs (2 of 5: a wide posterior whose 99% quantile tops the leader's) and so
    labels it; not at risk, or with the rescue off, the leader; a leader that may still
    carry the need keeps serving."""
    levels, counts, costs = [0.70, 0.40, 0.2], [1000, 5, 1000], [1.0, 2.0, 0.1]

    def served(at_risk: bool, levels=levels, counts=counts, **kw) -> int:
        pol = _behind(200, 10_000, levels, counts, costs, **kw)
        pol.cert.check_risk = lambda rate, step: pol.cert.at_risk  # the test sets the state
        pol.cert.at_risk = at_risk
        return _served(pol).model

    assert served(True, rescue=0.99) == 1
    pol = _behind(200, 10_000, levels, counts, costs, rescue=0.99)
    pol.cert.at_risk = True
    assert pol.rescuer(0) == 1 and pol.rescuer(1) is None  # a model serving already: itself
    assert served(False, rescue=0.99) == 0
    assert served(True) == 0  # off by default
    assert served(True, levels=[0.86, 0.40, 0.2], rescue=0.99) == 0  # the leader may still carry it
    with pytest.raises(ValueError):
        ContextualConfig(rescue=1.0)


def test_the_reported_fallback_model_is_the_one_the_rescue_serves():
    """``--misses`` names the fallback's model: with the rescue acting, the rescued model."""
    levels, counts, costs = [0.70, 0.40, 0.2], [1000, 5, 1000], [1.0, 2.0, 0.1]
    for rescue, model in ((0.99, 1), (0.0, 0)):
        pol = _behind(200, 10_000, levels, counts, costs, rescue=rescue)
        pol.cert.at_risk = True
        assert pol.fallback_model() == model


@pytest.mark.parametrize("budget", [0.0, 0.25, 0.6, 1.0])
@pytest.mark.parametrize("delay", [0, 50])
def test_a_judge_on_a_share_of_requests_leaves_the_estimate_unbiased_and_the_bound_covering(budget, delay):
    """The judge reads a share of the answers drawn independently of the thumbs, and thumbs
    may come 50 requests after their request: the estimate stays unbiased and the bound
    covers, with a text model 27 points too generous."""
    n, reps, delta = 1500, 100, 0.05
    out = np.array([synthetic_run(Certificate(0.7, delta, "window", n), s, n, budget=budget, predicted=0.9,
                                  delay=delay) for s in range(reps)])
    truth, est, lcb, _ = out.T
    err = est - truth
    assert abs(err.mean()) < 3 * err.std() / np.sqrt(reps) + 2e-3, err.mean()
    assert np.mean(truth < lcb) <= delta + 0.06
    cert = Certificate(0.7, delta, "window", n)
    synthetic_run(cert, 0, n, budget=budget, predicted=0.9, delay=delay)
    assert cert.judge_share == pytest.approx(budget, abs=0.05)


def test_a_judge_that_reads_every_rated_answer_biases_the_estimate():
    """Why the judge's draw must ignore the thumbs: a judge reading every rated answer and a
    quarter of the rest rectifies its own prediction on rated steps, the text model's
    stands unrectified on three quarters of the unrated ones."""
    n = 1500
    err = [np.subtract(*synthetic_run(Certificate(0.7, 0.05, "window", n), s, n, budget=0.25, predicted=0.9,
                                      judge_reads_rated=True)[1::-1]) for s in range(20)]
    assert np.mean(err) > 0.1


def test_late_thumbs_are_rectified_at_the_share_of_thumbs_that_were_due():
    """Thumbs 50 requests late, a text model 27 points too cautious: dividing each late
    correction by the share of *all* steps with thumbs so far (the last 50 cannot have theirs)
    inflates it and lifts the estimate; counting the delay keeps it unbiased."""
    n, reps = 1500, 60
    for ages, low, high in ((True, -0.01, 0.01), (False, 0.025, 1.0)):
        out = np.array([synthetic_run(Certificate(0.7, 0.05, "window", n), s, n, predicted=0.35, delay=50,
                                      ages=ages) for s in range(reps)])
        assert low < np.mean(out[:, 1] - out[:, 0]) < high, (ages, np.mean(out[:, 1] - out[:, 0]))


def test_the_judges_share_and_the_thumbs_delay_survive_a_checkpoint_an_older_one_reads_none_and_a_bad_one_is_refused():
    cert = Certificate(0.7, 0.05, "window", 600)
    synthetic_run(cert, 1, 600, budget=0.3, predicted=0.9, delay=40)
    meta, arrays = cert.state_dict()
    again = Certificate(0.7, 0.05, "window", 600)
    again.load_state(meta, arrays)
    assert again.judge_share == cert.judge_share < 0.5
    assert again.phi == cert.phi and cert.delay_sum == 40 * cert.thumbs
    older = Certificate(0.7, 0.05, "window", 600)
    older.load_state({k: v for k, v in meta.items() if k not in ("open_steps", "open_judged", "delay_sum")}, arrays)
    assert older.judge_share == 1.0  # none measured yet: the judge's verdicts as they are until it is
    assert older.phi < cert.phi  # no delays kept: thumbs taken as given with their steps
    with pytest.raises(ValueError, match="open_judged"):
        Certificate(0.7, 0.05, "window", 600).load_state({**meta, "open_judged": meta["open_steps"] + 1}, arrays)
    with pytest.raises(ValueError, match="delay_sum"):
        Certificate(0.7, 0.05, "window", 600).load_state({**meta, "delay_sum": "-1.0"}, arrays)


def test_late_thumbs_and_verdicts_for_a_closed_window_teach_but_do_not_count_in_the_next():
    cert = Certificate(0.7, 0.05, "window", 10)
    for _ in range(12):
        cert.account(0.6, None, None)
    assert (cert.n_windows, cert.t) == (1, 2)
    dr, var = cert.dr, cert.var
    assert cert.late_thumbs(0.6, 0.6, None, 1.0, age=5) == 0.0  # step 7 of the first window
    cert.late_judge(0.6, 0.6, 1.0, age=4)
    assert (cert.dr, cert.var) == (dr, var) and cert.thumbs == 1 and cert.judged == 1 and cert.delay_sum == 5
    assert cert.late_thumbs(0.6, 0.6, None, 1.0, age=1) > 0  # the window's first step: it counts
    assert cert.dr > dr


def test_a_windows_pending_steps_get_the_text_models_mean_error_and_its_variance():
    """Thumbs 10 requests late: the last 10 steps' corrections are still to come, so the count
    adds 10 times the corrections per due step; with thumbs given at once it is the sum."""
    cert = Certificate(0.7, 0.05, "window", 1000)
    for i in range(100):
        cert.account(0.5, None, None)
        if i >= 10 and i % 2 == 0:
            cert.late_thumbs(0.5, 0.5, None, 1.0, age=10)  # every other step, satisfied
    assert cert.pending() == 10
    due = cert.steps - cert.delay_sum / cert.thumbs
    assert cert.count() == pytest.approx(cert.dr + 10 * cert.rect_all / due)
    assert cert.count() > cert.dr and cert.count_var() > cert.var
    now = Certificate(0.7, 0.05, "window", 1000)
    now.account(0.5, None, 1.0)
    assert (now.pending(), now.count(), now.count_var()) == (0.0, now.dr, now.var)


def learning_run(cert: Certificate, seed: int, n: int, phi: float = 0.2) -> tuple[float, float, float]:
    """A stream whose text model learns: request i is easy (satisfied with probability 0.95)
    or hard (0.1), and its prediction moves from a constant 0.6 to that chance over the
    stream, so the residuals shrink to a fifth. Returns (truth, estimate, bound)."""
    rng = np.random.default_rng(seed)
    p = np.where(rng.random(n) < 0.6, 0.95, 0.1)
    y = (rng.random(n) < p).astype(float)
    thumbs = rng.random(n) < phi
    learned = np.arange(n) / n
    for i in range(n):
        cert.account(float(learned[i] * p[i] + (1 - learned[i]) * 0.6), None, float(y[i]) if thumbs[i] else None)
    return float(y.mean()), cert.estimate(), cert.lower_bound()


def test_the_labelled_variance_is_the_thumbed_steps_own_weighted_by_the_share_of_thumbs():
    cert, rng, expected = Certificate(0.7, 0.05, "window", 300, variance="labelled"), np.random.default_rng(5), 0.0
    for _ in range(300):
        phi, fb = cert.phi, (float(rng.random() < 0.7) if rng.random() < 0.25 else None)
        g = float(rng.uniform(0.2, 0.9))
        cert.account(g, None, fb)
        if fb is not None:
            expected += (1 - phi) / phi ** 2 * (fb - g) ** 2
    assert cert.var == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="variance must be one of"):
        Certificate(0.7, 0.05, "window", 300, variance="guess")


def test_where_the_text_model_learns_the_labelled_variance_is_narrower_and_still_covers():
    """The running variance prices every step at the mean squared residual of all thumbs so
    far, the early, large ones included; read off each thumbed step's own residual the
    bound narrows where the model learns, and still holds at its 95%."""
    n, reps, delta = 1500, 150, 0.05
    out = {v: np.array([learning_run(Certificate(0.7, delta, "window", n, variance=v), s, n) for s in range(reps)])
           for v in ("running", "labelled")}
    assert np.array_equal(out["running"][:, :2], out["labelled"][:, :2])  # the same estimate
    truth, est, lcb = out["labelled"].T
    width = {v: np.mean(o[:, 1] - o[:, 2]) for v, o in out.items()}
    assert width["labelled"] < 0.92 * width["running"], width
    # coverage: the claimed standard deviation matches the estimate's error, and the bound holds
    assert np.std(est - truth) == pytest.approx(width["labelled"] / 1.6449, rel=0.1)
    assert width["running"] / 1.6449 > 1.1 * np.std(est - truth)  # the running one claims too much
    assert np.mean(truth < lcb) <= delta + 0.04


@pytest.mark.parametrize("budget, delay", [(1.0, 0), (0.25, 50)])
def test_the_labelled_variance_covers_with_a_judge_on_a_share_and_late_thumbs(budget, delay):
    n, reps, delta = 1500, 100, 0.05
    out = np.array([synthetic_run(Certificate(0.7, delta, "window", n, variance="labelled"), s, n, budget=budget,
                                  predicted=0.9, delay=delay) for s in range(reps)])
    truth, est, lcb, _ = out.T
    assert abs((est - truth).mean()) < 3 * (est - truth).std() / np.sqrt(reps) + 2e-3
    assert np.mean(truth < lcb) <= delta + 0.06
    assert np.mean(est - lcb) < 0.06


def test_the_newest_residuals_survive_a_checkpoint_and_an_older_one_reads_all_of_them():
    cert = Certificate(0.7, 0.05, "window", 3000, variance="labelled")
    learning_run(cert, 2, 1500)
    assert cert.residual_var(False, recent=True) < 0.9 * cert.residual_var(False)  # the model learned
    meta, arrays = cert.state_dict()
    again = Certificate(0.7, 0.05, "window", 3000, variance="labelled")
    again.load_state(meta, arrays)
    assert again.final_margin() == cert.final_margin() and again.lower_bound() == cert.lower_bound()
    older = Certificate(0.7, 0.05, "window", 3000, variance="labelled")
    older.load_state(meta, {k: v for k, v in arrays.items() if "recent" not in k})
    assert older.residual_var(False, recent=True) == cert.residual_var(False)
    with pytest.raises(ValueError, match="r2_recent is not finite"):
        Certificate(0.7, 0.05, "window", 3000).load_state(
            meta, {**arrays, "certificate.r2_recent": np.array([np.nan, 0.0])})
