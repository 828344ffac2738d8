"""RunSettings' stated accuracies (the contextual router's prior) and its at-risk test's
settings (``warn_z``, ``warn_after``): they reach the router, travel in the link, restart a
run with the reason said, and a bad value is refused in words with the old settings kept."""

from __future__ import annotations

import json

import numpy as np
import pytest

from slarouter_core.data import from_frame
from slarouter_core.embedding_cache import embed_texts
from slarouter_core.live import (DataSpec, LiveRun, RunSettings, describe_reset, parse_stated_levels,
                                 settings_change, settings_for_data, settings_from_query, settings_json,
                                 settings_method_params, settings_to_query, takes_stated_levels,
                                 takes_warning_settings)
from slarouter_core.policies.contextual import ContextualConfig
from tests.conftest import make_frame

#: one per model of the small zoo (small, medium, large): the cheapest stated best
STATED = (0.9, 0.2, 0.3)


@pytest.fixture(scope="module")
def small():
    data = from_frame(make_frame(n=400, seed=3))
    return data, embed_texts(data.texts, "hashing:64")


def test_only_the_routers_with_a_prior_take_them():
    assert takes_stated_levels("contextual")
    assert not takes_stated_levels("paper") and not takes_stated_levels("guarded")
    run = RunSettings(stated_levels=STATED)
    assert run.policy_settings("contextual") == {"stated_levels": STATED}
    assert "stated_levels" not in run.policy_settings("paper")
    # none given: nothing is passed on (a method spec or a checkpoint reads as before)
    assert RunSettings().policy_settings("contextual") == {}
    assert settings_method_params(RunSettings()) == {"mode": "contextual"}
    assert settings_method_params(run) == {"mode": "contextual", "stated_levels": STATED}


def test_they_reach_the_contextual_router_and_change_its_decisions(small):
    data, emb = small
    assert data.models == ("small", "medium", "large")
    settings = RunSettings(alpha=0.6, per_tick=200, seed=5)
    plain = LiveRun(data, emb, settings, routers=("contextual", "paper"))
    stated = LiveRun(data, emb, RunSettings(**{**vars(settings), "stated_levels": STATED}),
                     routers=("contextual", "paper"))
    router = stated.sims["contextual"].router
    assert router.config.settings.stated_levels == STATED
    assert plain.sims["contextual"].router.config.settings.stated_levels == ()
    assert stated.sims["paper"].router.config.mode == "paper"  # the paper's rule has no prior: unchanged
    for live in (plain, stated):
        live.step()
    a, b = plain.sims["contextual"].arrays(), stated.sims["contextual"].arrays()
    np.testing.assert_array_equal(a["row"], b["row"])  # the same requests...
    assert not np.array_equal(a["model"], b["model"])  # ...routed otherwise from the prior
    # the model stated best (the cheapest) is served more often from the start
    assert (b["model"][:100] == 0).sum() > (a["model"][:100] == 0).sum()
    np.testing.assert_array_equal(plain.sims["paper"].arrays()["model"], stated.sims["paper"].arrays()["model"])


def test_they_round_trip_through_the_url():
    run = RunSettings(stated_levels=(0.54, 0.17, 0.7, 0.123456789), seed=3)
    q = settings_to_query(DataSpec(), run)
    assert q["stated"] == "0.54,0.17,0.7,0.123456789"  # each in full
    d, r, problems = settings_from_query(q)
    assert (d, r, problems) == (DataSpec(), run, [])
    assert "stated" not in settings_to_query(DataSpec(), RunSettings())
    # the box's separators are the link's too
    assert settings_from_query({"stated": "0.5; 0.6 0.7"})[1].stated_levels == (0.5, 0.6, 0.7)


def test_an_encoder_with_pooled_layers_survives_a_link():
    from urllib.parse import parse_qsl, urlencode

    data = DataSpec(encoder="minilm+layers=2,4,6")
    link = urlencode(settings_to_query(data, RunSettings()))
    assert "%2B" in link  # the '+' is escaped, so the link does not read it as a space
    assert settings_from_query(dict(parse_qsl(link)))[0] == data
    # typed by hand, the '+' reads as a space: the layers are still the encoder's
    typed = dict(parse_qsl("enc=minilm+layers=6,4,2"))
    assert typed["enc"] == "minilm layers=6,4,2"
    assert settings_from_query(typed)[0].encoder == "minilm+layers=6,4,2"


@pytest.mark.parametrize("raw,said", [("abc", "'abc' is not a number"), ("0.5,1.5", "got 1.5"),
                                      ("nan,0.5", "got nan"), ("0,0.5", "got 0.0"), ("inf", "got inf")])
def test_a_bad_link_value_is_named_and_none_are_used(raw, said):
    _, run, problems = settings_from_query({"stated": raw, "c": "0.2"})
    assert run == RunSettings(c=0.2)
    assert len(problems) == 1 and problems[0].startswith(f"URL parameter stated={raw!r}: ")
    assert said in problems[0] and problems[0].endswith("using none.")


@pytest.mark.parametrize("text,said", [
    ("0.5, 0.6", "2 stated accuracies for a zoo of 3 models: give one per model, in this order: small, medium, large"),
    ("0.5", "1 stated accuracy for a zoo of 3 models"),
    ("1.5, 0.5, 0.5", "the stated accuracy of small must be a finite number > 0 and < 1, got 1.5"),
    ("0.5, nan, 0.5", "the stated accuracy of medium must be a finite number > 0 and < 1, got nan"),
    ("abc", "'abc' is not a number: give one accuracy in (0, 1) per model"),
    ("0.5, 0.6, 1", "the stated accuracy of large must be a finite number > 0 and < 1, got 1.0"),
    ("54, 17, 70", "got 54.0 (an accuracy of 54% is written 0.54)"),
])
def test_a_bad_value_from_the_box_is_refused_in_words_and_the_old_settings_kept(small, text, said):
    data, _ = small
    current = RunSettings(c=0.3, stated_levels=(0.6, 0.7, 0.8))
    new, problems = settings_change(current, {"stated_levels": text}, data)
    assert new == current
    assert said in problems["stated_levels"], problems
    assert problems["stated_levels"].endswith("; keeping stated accuracies = 0.6, 0.7, 0.8.")
    _, problems = settings_change(RunSettings(), {"stated_levels": text}, data)
    assert problems["stated_levels"].endswith("; keeping no stated accuracies.")


def test_a_good_value_from_the_box_is_applied_and_empty_clears_it(small):
    data, _ = small
    new, problems = settings_change(RunSettings(), {"stated_levels": " 0.9, 0.2;0.3 "}, data)
    assert not problems and new.stated_levels == STATED
    cleared, problems = settings_change(new, {"stated_levels": ""}, data)
    assert not problems and cleared == RunSettings()
    # a tuple (not text) is checked against the zoo as well
    _, problems = settings_change(RunSettings(), {"stated_levels": (0.5, 0.5)}, data)
    assert "2 stated accuracies for a zoo of 3 models" in problems["stated_levels"]


@pytest.mark.parametrize("levels", [(0.0, 0.5, 0.5), (1.0, 0.5, 0.5), (float("nan"),), ("0.5",), "0.5", (True,)])
def test_run_settings_take_only_numbers_strictly_between_0_and_1(levels):
    with pytest.raises(ValueError, match="stated accuracies"):
        RunSettings(stated_levels=levels)


def test_the_parser_without_the_data_checks_values_only():
    assert parse_stated_levels("") == () and parse_stated_levels(" , ") == ()
    assert parse_stated_levels("0.5 0.25") == (0.5, 0.25)
    with pytest.raises(ValueError, match="stated accuracy 2 must be a finite number > 0 and < 1, got -0.1"):
        parse_stated_levels("0.5, -0.1")


def test_the_router_config_needs_one_per_model(small):
    data, _ = small
    run = RunSettings(stated_levels=(0.5, 0.6))
    with pytest.raises(ValueError, match="2 stated accuracies for a zoo of 3 models"):
        run.router_config(data)
    assert run.router_config(data, "paper").mode == "paper"  # a router that takes none ignores them


def test_levels_that_do_not_fit_the_data_are_left_out_with_a_sentence(small):
    data, _ = small
    fits = RunSettings(stated_levels=STATED)
    assert settings_for_data(fits, data) == (fits, None)
    assert settings_for_data(fits, data, data.models) == (fits, None)
    assert settings_for_data(RunSettings(), data, ("a", "b")) == (RunSettings(), None)
    run, note = settings_for_data(RunSettings(c=0.2, stated_levels=(0.5, 0.6)), data)
    assert run == RunSettings(c=0.2)
    assert note == ("stated accuracies 0.5, 0.6: 2 stated accuracies for a zoo of 3 models: give one per model, "
                    "in this order: small, medium, large; using none.")
    # as many models, but not the ones they were given for (new data)
    run, note = settings_for_data(fits, data, ("x", "y", "z"))
    assert run == RunSettings()
    assert "they were given for x, y, z, and the data's models are now small, medium, large" in note


def test_a_change_resets_the_run_and_says_so():
    text = describe_reset(RunSettings(), RunSettings(stated_levels=STATED))
    assert text.startswith("Settings changed (stated accuracies none -> 0.9, 0.2, 0.3): the run was reset")
    text = describe_reset(RunSettings(stated_levels=STATED), RunSettings(stated_levels=(0.5, 0.2, 0.3)))
    assert "(stated accuracies 0.9, 0.2, 0.3 -> 0.5, 0.2, 0.3)" in text


def test_the_settings_download_holds_them(small):
    data, _ = small
    doc = json.loads(settings_json(DataSpec(), RunSettings(stated_levels=STATED), data))
    assert doc["run"]["stated_levels"] == list(STATED)
    assert doc["simulation"]["router"]["settings"]["stated_levels"] == list(STATED)


# -- the at-risk test's settings ----------------------------------------------------------
def test_the_warning_settings_default_to_the_policy_s_and_go_only_to_a_router_that_warns():
    assert (RunSettings().warn_z, RunSettings().warn_after) == (ContextualConfig().warn_z, ContextualConfig().warn_after)
    assert takes_warning_settings("contextual")
    assert not takes_warning_settings("paper") and not takes_warning_settings("guarded")
    run = RunSettings(warn_z=1.0, warn_after=128)
    assert run.policy_settings("contextual") == {"warn_z": 1.0, "warn_after": 128}
    assert not {"warn_z", "warn_after"} & set(run.policy_settings("paper"))
    assert not {"warn_z", "warn_after"} & set(run.policy_settings("guarded"))
    # only what differs from the defaults is passed on (a method spec reads as before)
    assert RunSettings(warn_z=1.0).policy_settings("contextual") == {"warn_z": 1.0}
    assert settings_method_params(run) == {"mode": "contextual", "warn_z": 1.0, "warn_after": 128}


def test_the_warning_settings_reach_the_contextual_router_and_move_its_first_warning():
    data = from_frame(make_frame(n=2000, seed=3))  # 41%, 62%, 80%: alpha at the best model's level
    emb = embed_texts(data.texts, "hashing:64")
    base = RunSettings(alpha=0.8, per_tick=2000, seed=5)
    first = {}
    for kw in ({}, {"warn_z": 0.0}, {"warn_after": 150}):
        live = LiveRun(data, emb, RunSettings(**{**vars(base), **kw}), routers=("contextual", "paper"))
        policy = live.sims["contextual"].router.policy
        assert (policy.config.warn_z, policy.config.warn_after) == (kw.get("warn_z", 1.6449), kw.get("warn_after", 0))
        live.step()
        first[tuple(kw)] = live.sims["contextual"].router.sla_status()["first_at_risk"]
    # the bare mean (warn_z 0) says it sooner than the 95% bound; waiting for 150 thumbs, later
    assert first[()] is not None and first[("warn_z",)] < first[()]
    assert first[("warn_after",)] is None or first[("warn_after",)] > first[()]


def test_the_warning_settings_round_trip_through_the_url_and_a_bad_value_is_named():
    run = RunSettings(warn_z=0.5, warn_after=128, seed=3)
    q = settings_to_query(DataSpec(), run)
    assert (q["warnz"], q["warnafter"]) == ("0.5", "128")
    assert settings_from_query(q) == (DataSpec(), run, [])
    assert not {"warnz", "warnafter"} & set(settings_to_query(DataSpec(), RunSettings()))
    _, got, problems = settings_from_query({"warnz": "abc", "warnafter": "-3", "c": "0.2"})
    assert got == RunSettings(c=0.2)
    assert any(p.startswith("URL parameter warnz='abc' is not a valid warn_z") for p in problems), problems
    assert any(p.startswith("URL parameter warnafter:") and "got -3" in p for p in problems), problems
    _, got, problems = settings_from_query({"warnz": "50"})  # usable, beyond the widget: clamped, said
    assert got.warn_z == 10.0 and problems == ["URL parameter warnz=50 is above the highest allowed warn_z (10); "
                                               "using 10."]


def test_a_warning_setting_changed_is_said_as_the_reason_for_a_reset(small):
    data, _ = small
    new, problems = settings_change(RunSettings(), {"warn_z": 1.0, "warn_after": 64}, data)
    assert not problems and (new.warn_z, new.warn_after) == (1.0, 64)
    said = describe_reset(RunSettings(), new)
    assert "warn_z 1.6449 -> 1" in said and "warn after 0 -> 64" in said
    _, problems = settings_change(new, {"warn_z": -1.0}, data)
    assert problems["warn_z"].endswith("keeping warn_z = 1.")


def test_the_experiments_page_s_method_carries_the_warning_settings_to_its_router():
    from slarouter_core.baselines import slarouter_configs
    from slarouter_core.experiments import MethodSpec

    params = settings_method_params(RunSettings(warn_z=0.5, warn_after=64))  # what the page's "mine" runs
    cfg = slarouter_configs(0.7, 0.2, 1, MethodSpec("slarouter", params).params).router
    assert cfg.mode == "contextual" and (cfg.settings.warn_z, cfg.settings.warn_after) == (0.5, 64)
    paper = settings_method_params(RunSettings(mode="paper", warn_z=0.5, warn_after=64))
    assert paper["mode"] == "paper" and not {"warn_z", "warn_after"} & set(paper)
    assert slarouter_configs(0.7, 0.2, 1, paper).router.mode == "paper"


#: a new value for each router setting (ROUTER_FIELDS but the mode)
ROUTER_CHANGES = {"c": 0.3, "fixed_v": True, "V": 2e-5, "q_max": 10.0, "eps": 0.01, "stated_levels": (0.5, 0.6, 0.7),
                  "warn_z": 1.0, "warn_after": 64}


def test_router_fields_are_exactly_the_settings_that_reach_a_router():
    """What the Experiments page checks its kept results against: a setting outside
    ROUTER_FIELDS moves no router's config, each one inside moves some router's, and a new
    RunSettings field must be put on one side."""
    from dataclasses import fields, replace

    from slarouter_core.live import ROUTER_FIELDS
    from slarouter_core.live.settings import router_modes

    others = {"alpha": 0.7, "feedback_rate": 0.5, "seed": 3, "per_tick": 50, "feedback_model": "bursty",
              "routers": ("paper",), "judge": "acpbench", "judge_budget": 0.5, "judge_cost": 1.0}
    mine = ROUTER_CHANGES
    assert {f.name for f in fields(RunSettings)} == set(others) | set(ROUTER_FIELDS)
    assert set(mine) | {"mode"} == set(ROUTER_FIELDS)
    base = RunSettings(fixed_v=True)  # V reaches a router only when fixed, q_max and eps only when not

    def configs(run: RunSettings) -> list[dict]:
        return [run.policy_settings(m) for m in router_modes()]
    for name, value in others.items():
        assert configs(replace(base, **{name: value})) == configs(base), name
    for name, value in mine.items():
        start = RunSettings() if name in ("q_max", "eps", "fixed_v") else base
        assert configs(replace(start, **{name: value})) != configs(start), name


@pytest.mark.parametrize("routers", [("contextual",), ("paper",), ("contextual", "paper"), ("guarded",), ("guarded", "contextual")])
def test_a_run_depends_on_a_router_setting_exactly_when_one_of_its_routers_receives_it(routers):
    """Live run and Feedback by hand start again when ``reaching`` changes: a change of a
    router setting must do so exactly when it changes what some router of the run
    receives, and the other settings (alpha, the seed, the judge) always."""
    from dataclasses import replace

    changes = {**ROUTER_CHANGES, "alpha": 0.7, "seed": 3, "judge": "acpbench"}
    for start in (RunSettings(routers=routers, mode=routers[0]),
                  RunSettings(routers=routers, mode=routers[0], fixed_v=True, warn_z=2.0)):
        for name, value in changes.items():
            moved = replace(start, **{name: value})
            received = [moved.policy_settings(m) != start.policy_settings(m) for m in routers]
            must = name in ("alpha", "seed", "judge") or any(received)
            assert (moved.reaching(routers) != start.reaching(routers)) == must, (routers, name, start.fixed_v)
