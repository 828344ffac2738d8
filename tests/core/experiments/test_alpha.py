"""Alpha rules, alpha validation, and the seeds-met rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slarouter_core import experiments as E


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


#: the published alphas the inferred rule recomputes within 1 point (8 of 11); the other
#: three cannot all be met by a rule that rises with the models' accuracy (next test)
RULE_MISSES = {"gpqa", "lambada", "winogrande"}


def test_the_paper_rule_recomputes_the_published_alphas_from_the_published_accuracies():
    errors = {}
    for key, (alpha, acc, cost) in _published().items():
        errors[key] = abs(E.paper_rule_alpha(acc, cost) - alpha)
    assert len(errors) == 11
    within = {k for k, e in errors.items() if e <= 0.01 + 1e-9}
    assert within == set(errors) - RULE_MISSES, errors
    assert max(errors[k] for k in RULE_MISSES) <= 0.03 + 1e-9  # 2, 3 and 2 points off
    # the rule does not read the order the models are listed in, only their costs
    acc, cost = _published()["acpbench"][1:]
    assert E.paper_rule_alpha(acc[::-1], cost[::-1]) == E.paper_rule_alpha(acc, cost) == 0.65
    with pytest.raises(ValueError, match="one value per model"):
        E.paper_rule_alpha([0.5, 0.6], [1.0])


def test_no_rule_rising_with_accuracy_meets_both_arc_challenge_and_lambada_within_1_point():
    """Why 11 of 11 is out of reach: LAMBADA's accuracies are at most ``d`` above ARC
    Challenge's, model by model, so any rule that rises with every accuracy and moves with
    a common shift (as "1 point below model X" does) puts LAMBADA's alpha at most ``d``
    above ARC Challenge's. The published alphas are further apart than that allows."""
    pub = _published()
    a_arc, acc_arc, _ = pub["arc_challenge"]
    a_lam, acc_lam, _ = pub["lambada"]
    d = max(np.subtract(acc_lam, acc_arc))
    highest_arc = a_arc + 0.01  # within 1 point of ARC Challenge's published alpha
    lowest_lam = a_lam - 0.01  # within 1 point of LAMBADA's
    assert highest_arc + d < lowest_lam
