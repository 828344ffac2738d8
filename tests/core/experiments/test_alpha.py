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
    assert E.resolve_alpha("paper", data) == pytest.approx(round(acc[-2] - 0.01, 3), abs=5e-4)
    assert E.resolve_alpha("midpoint", data) == pytest.approx(round((acc[-2] + acc[-1]) / 2, 3), abs=5e-4)
    with pytest.raises(ValueError, match="'midpoint', 'paper'"):
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
