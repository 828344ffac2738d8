"""Alpha rules, alpha validation, and the seeds-met rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slarouter_core import experiments as E
from slarouter_core.experiments.alpha import PAPER_RULE_SPREAD


def test_alpha_rules_and_the_seeds_met_rule():
    from slarouter_core.data import from_frame
    from tests.conftest import make_frame

    data = from_frame(make_frame(n=200))
    acc = data.solved.mean(axis=0)
    assert E.resolve_alpha("medium", data) == pytest.approx(round(acc[-2] - 0.01, 3), abs=5e-4)
    assert E.resolve_alpha("paper", data) == E.paper_rule_alpha(acc, data.costs.mean(axis=0))
    assert E.resolve_alpha("midpoint", data) == pytest.approx(round((acc[-2] + acc[-1]) / 2, 3), abs=5e-4)
    with pytest.raises(ValueError, match="'midpoint', 'paper', 'medium'"):
        E.resolve_alpha("median", data)
    assert [E.seeds_needed(n) for n in (1, 3, 10, 20)] == [1, 3, 9, 18]
    base = dict(dataset="d", benchmark="b", feedback_rate=0.2, alpha=0.7, cost_unit="MJ",
                post_convergence_satisfaction=np.nan, training_cost=0.0, operating_cost=1.0,
                method_key="single")
    # 17 of 20 seeds above alpha with a mean above alpha: not met under the 18-of-20 rule
    sats = [0.75] * 17 + [0.6] * 3
    rows = [dict(base, method="m", seed=s, satisfaction=v) for s, v in enumerate(sats)]
    agg = E.aggregate(pd.DataFrame(rows)).set_index("method")
    assert agg.loc["m", "satisfaction_mean"] > 0.7 and agg.loc["m", "seeds_met"] == 17
    assert not agg.loc["m", "sla_met"]
    # the aggregate carries the share of runs meeting alpha as its exact interval
    assert (agg.loc["m", "met_rate_low"], agg.loc["m", "met_rate_high"]) == E.met_rate_interval(17, 20)
    assert agg.loc["m", "met_rate_low"] < 0.85 < agg.loc["m", "met_rate_high"]


def test_alpha_is_checked_with_the_one_message_of_validation():
    from slarouter_core.validation import check_alpha

    for bad in (1.2, 0.0, True, float("nan")):
        with pytest.raises(ValueError) as got:
            E.resolve_alpha(bad, None)
        with pytest.raises(ValueError) as expected:
            check_alpha(bad)
        assert str(got.value).startswith(str(expected.value))
    with pytest.raises(ValueError, match=r"alpha must be a finite number > 0 and < 1, got 'high' .*'midpoint'"):
        E.GridConfig(alpha="high")
    assert E.resolve_alpha("0.7", None) == 0.7 and E.resolve_alpha("paper", None) == 0.5


# -- the paper's alpha rule for any zoo size (issue 21, item 2) -----------------------------

def _published():
    from slarouter_core.published import paper_table2

    t = paper_table2()
    out = {}
    for key in t.benchmark_keys:
        single = t.single(key)
        out[key] = (t.alpha(key), [single[m]["satisfaction"] for m in t.models], [single[m]["cost"] for m in t.models])
    return out


#: the published alphas the inferred rule misses by more than 1 point (2 of 11, by 2 points
#: each); benchmarks/alpha_rule_search.py finds no rule in its families that gets 10
RULE_MISSES = {"boolq", "lambada"}


def test_the_paper_rule_recomputes_the_published_alphas_from_the_published_accuracies():
    errors = {}
    for key, (alpha, acc, cost) in _published().items():
        errors[key] = E.paper_rule_alpha(acc, cost) - alpha
    assert len(errors) == 11
    within = {k for k, e in errors.items() if abs(e) <= 0.01 + 1e-9}
    assert within == set(errors) - RULE_MISSES, errors
    assert errors["boolq"] == pytest.approx(0.02) and errors["lambada"] == pytest.approx(-0.02)
    # the rule does not read the order the models are listed in, only their costs
    acc, cost = _published()["acpbench"][1:]
    assert E.paper_rule_alpha(acc[::-1], cost[::-1]) == E.paper_rule_alpha(acc, cost) == 0.66
    with pytest.raises(ValueError, match="one value per model"):
        E.paper_rule_alpha([0.5, 0.6], [1.0])
    with pytest.raises(ValueError, match="finite"):
        E.paper_rule_alpha([0.5, float("nan")], [1.0, 2.0])


def _sensible(acc, cost):
    """Alpha strictly between the worst and best model, and met by the cheapest model that
    is within the rule's reach of the best (so the zoo can carry the SLA)."""
    alpha = E.paper_rule_alpha(acc, cost)
    acc = np.asarray(acc)
    assert acc.min() < alpha < acc.max(), (acc, alpha)
    order = np.argsort(cost, kind="stable")
    reach = acc.max() - PAPER_RULE_SPREAD * (acc.max() - acc.min())
    anchor = next(i for i in order if acc[i] >= reach)
    assert acc[anchor] > alpha
    return alpha


def test_the_paper_rule_gives_a_sensible_alpha_on_synthetic_4_and_11_model_zoos():
    rng = np.random.default_rng(21)
    for n_models in (4, 11):
        for _ in range(200):
            acc = rng.uniform(0.2, 0.97, n_models).round(3)
            if np.ptp(acc) < 0.005:
                continue
            _sensible(acc, rng.lognormal(0.0, 1.0, n_models))
    # a dear model that is the worst does not drag alpha to it; models within a point of
    # the worst get the midpoint, still strictly between
    assert E.paper_rule_alpha([0.60, 0.70, 0.30], [1, 2, 3]) == 0.59
    assert E.paper_rule_alpha([0.500, 0.505], [1, 2]) == 0.5025
    # through the data: a 4-model synthetic zoo by name
    from slarouter_core.data import from_frame
    from tests.conftest import make_frame

    data = from_frame(make_frame(n=400, models=("a", "b", "c", "d")))
    assert E.resolve_alpha("paper", data) == _sensible(data.solved.mean(axis=0), data.costs.mean(axis=0))


def test_the_paper_rule_gives_a_sensible_alpha_on_the_shared_llama_zoo(shared_data):
    data = E.load_any(shared_data)
    alphas = {}
    for bench in sorted(set(data.benchmarks)):
        one = data.select([bench])
        alphas[bench] = _sensible(one.solved.mean(axis=0), np.asarray(one.costs).mean(axis=0))
    assert len(alphas) == 9
    # where the medium model is within reach of the large one, it is the anchor: alpha is
    # the whole point below it (ARC Challenge: medium 54.4 %)
    assert alphas["arc_challenge"] == 0.54


def test_no_rule_rising_with_accuracy_meets_both_arc_challenge_and_lambada_within_1_point():
    """Why 11 of 11 is out of reach for a whole class of rules: LAMBADA's accuracies are at
    most ``d`` above ARC Challenge's, model by model, so any rule that rises with every
    accuracy and moves with a common shift (as "1 point below model X" does) puts
    LAMBADA's alpha at most ``d`` above ARC Challenge's. The published alphas are further
    apart than that allows. (Rules on grids, cost order or anchors are outside this
    argument; benchmarks/alpha_rule_search.py searched those: none gets 10 of 11.)"""
    pub = _published()
    a_arc, acc_arc, _ = pub["arc_challenge"]
    a_lam, acc_lam, _ = pub["lambada"]
    d = max(np.subtract(acc_lam, acc_arc))
    highest_arc = a_arc + 0.01  # within 1 point of ARC Challenge's published alpha
    lowest_lam = a_lam - 0.01  # within 1 point of LAMBADA's
    assert highest_arc + d < lowest_lam


def test_no_linear_rule_in_the_accuracies_meets_all_11_within_1_point():
    """Any weights on the four models (in cost order, of any sign) plus a constant, fitted
    to the 11 published alphas themselves: the best fit is still over 2 points off on one."""
    from scipy.optimize import linprog

    pub = list(_published().values())
    n = len(pub[0][1])
    a_ub, b_ub = [], []
    for alpha, acc, _ in pub:  # |w.acc + b - alpha| <= e, minimise e
        a_ub += [np.r_[acc, 1.0, -1.0], np.r_[-np.asarray(acc), -1.0, -1.0]]
        b_ub += [alpha, -alpha]
    res = linprog(np.r_[np.zeros(n + 1), 1.0], A_ub=np.array(a_ub), b_ub=b_ub,
                  bounds=[(None, None)] * (n + 1) + [(0, None)])
    assert res.status == 0 and res.x[-1] > 0.02


def test_met_rate_interval_is_the_exact_binomial_interval():
    from math import comb

    lo, hi = E.met_rate_interval(18, 20)
    # Clopper-Pearson: each end is where the tail probability of the observed count is 2.5%
    tail_up = sum(comb(20, k) * lo ** k * (1 - lo) ** (20 - k) for k in range(18, 21))
    tail_down = sum(comb(20, k) * hi ** k * (1 - hi) ** (20 - k) for k in range(0, 19))
    assert tail_up == pytest.approx(0.025, abs=1e-6) and tail_down == pytest.approx(0.025, abs=1e-6)
    assert E.met_rate_interval(20, 20)[1] == 1.0 and E.met_rate_interval(0, 20)[0] == 0.0
    # more seeds at the same share: a narrower interval
    assert np.diff(E.met_rate_interval(90, 100)) < np.diff(E.met_rate_interval(18, 20))
    for bad in ((21, 20), (-1, 20), (0, 0)):
        with pytest.raises(ValueError, match="met must be"):
            E.met_rate_interval(*bad)


def test_chance_to_meet_counts_the_binomial_tail_the_test_needs():
    from math import comb

    for rate in (0.5, 0.84, 0.95):
        direct = sum(comb(20, k) * rate ** k * (1 - rate) ** (20 - k) for k in range(E.seeds_needed(20), 21))
        assert E.chance_to_meet(rate) == pytest.approx(direct, rel=1e-9)
    assert E.chance_to_meet(1.0) == 1.0 and E.chance_to_meet(0.0) == 0.0
    assert E.chance_to_meet(0.84) < 0.5 < E.chance_to_meet(0.95)  # 84% of runs: fails the test more often than not
    with pytest.raises(ValueError, match="rate"):
        E.chance_to_meet(1.2)
