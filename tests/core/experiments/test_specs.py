"""Method specs: presets, the method:key=value form, the fixed V of a spec."""

from __future__ import annotations

import math

import pytest

from slarouter_core import experiments as E


def test_bad_method_specs():
    with pytest.raises(ValueError, match="unknown method"):
        E.MethodSpec("nope")
    with pytest.raises(ValueError, match="unknown method"):
        E.parse_method("nope:x=1")
    with pytest.raises(ValueError, match="key=value"):
        E.parse_method("slarouter:V")
    assert E.parse_method("slarouter:V=0.0001,mode=paper").params == {"V": 0.0001, "mode": "paper"}
    # a list's commas belong to its value
    assert E.parse_method("slarouter:mode=contextual,stated_levels=[0.5, 0.7],delta=0.1").params == {
        "mode": "contextual", "stated_levels": [0.5, 0.7], "delta": 0.1}


def test_a_spec_names_its_fixed_v():
    assert E.parse_method("slarouter:V=0.0001").fixed_v == 1e-4
    assert E.PRESETS["slarouter"].fixed_v == 1e-5
    assert math.isnan(E.PRESETS["slarouter_ddv"].fixed_v) and math.isnan(E.PRESETS["oracle"].fixed_v)
    assert E.PRESETS["slarouter"].name == "SLARouter (fixed V)"
    assert E.MethodSpec("carrot", {"mu": 0.5}).name == "carrot(mu=0.5)"


def test_a_comparison_puts_the_other_policies_that_ask_for_it_beside_the_users_router():
    keys = E.comparison_defaults("contextual", "mine")
    assert keys[:5] == ["single", "static_mixture", "oracle", "messplus", "mine"]
    assert "slarouter_ddv" in keys and "slarouter_guarded" in keys and "slarouter_contextual" not in keys
    assert "slarouter_ddv" not in E.comparison_defaults("paper", "mine")  # the user's router is the paper's
    assert all(E.parse_method(k) for k in keys if k != "mine")
