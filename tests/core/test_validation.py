"""The declared parameter rules (validation.param + Checked): one mechanism, one message style."""

from __future__ import annotations

import math
from dataclasses import FrozenInstanceError, dataclass, fields

import numpy as np
import pytest

from slarouter_core.feedback import FeedbackConfig
from slarouter_core.judge import JudgeModel
from slarouter_core.live.settings import RunSettings
from slarouter_core.policies.contextual import ContextualConfig
from slarouter_core.policies.guarded import GuardedConfig
from slarouter_core.policies.paper import PaperConfig
from slarouter_core.predictor import PredictorConfig
from slarouter_core.service.core import ServiceConfig
from slarouter_core.validation import (CHECK, Alpha, Bool, Checked, Choice, Instance, Int, Range, declared_rules,
                                       param)

BUILT_IN = (PaperConfig, GuardedConfig, ContextualConfig)


@dataclass(frozen=True)
class Inner(Checked):
    k: int = param(1, Int(low=1))


@dataclass(frozen=True)
class Outer(Checked):
    x: float = param(0.5, Range(low=0.0, high=1.0, high_open=True))
    n: int = param(3, Int(low=1, high=10), label="number of things")
    on: bool = param(True, Bool())
    kind: str = param("a", Choice(("a", "b")))
    alpha: float | None = param(None, Alpha(optional=True))
    inner: Inner = param(factory=Inner, check=Instance(Inner, from_dict=True))
    price: float = param(1, Range(low=0.0, to_float=True))
    free: str = "anything"  # no rule declared: not checked

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kind == "b" and self.n > 5:
            raise ValueError("kind b takes at most 5 things")


@pytest.mark.parametrize("kw, message", [
    (dict(x=1.0), "x must be a finite number >= 0 and < 1, got 1.0"),
    (dict(x=math.nan), "x must be a finite number >= 0 and < 1, got nan"),
    (dict(x=True), "x must be a finite number >= 0 and < 1, got True"),
    (dict(n=0), "number of things must be an integer >= 1, got 0"),
    (dict(n=11), r"number of things must be an integer in \[1, 10\], got 11"),
    (dict(n=2.0), "number of things must be an integer >= 1, got 2.0"),
    (dict(on=1), "on must be True or False, got 1"),
    (dict(kind="c"), "kind must be one of a, b, got 'c'"),
    (dict(alpha=1.0), "alpha must be a finite number > 0 and < 1, got 1.0"),
    (dict(inner={"k": 0}), "k must be an integer >= 1, got 0"),
    (dict(price=-1), "price must be a finite number >= 0, got -1"),
    (dict(kind="b", n=6), "kind b takes at most 5 things"),
])
def test_a_declared_rule_refuses_with_its_message(kw, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        Outer(**kw)


def test_declared_rules_normalise_what_they_say_and_nothing_else():
    o = Outer(n=np.int64(4), inner={"k": 2}, price=3, alpha=np.float64(0.4), free=None)
    assert type(o.n) is int and o.n == 4  # a NumPy integer is stored as an int (JSON can write it)
    assert o.inner == Inner(2)  # a dict becomes the nested config
    assert type(o.price) is float and o.price == 3.0
    assert o.free is None  # undeclared: left alone
    with pytest.raises(TypeError, match="inner must be a Inner, got str"):
        Outer(inner="x")
    with pytest.raises(FrozenInstanceError):
        o.x = 0.1  # type: ignore[misc]


def test_a_choice_from_a_function_sees_names_registered_later():
    names = ["a"]

    @dataclass(frozen=True)
    class Late(Checked):
        name: str = param("a", Choice(lambda: tuple(names)))

    with pytest.raises(ValueError, match="name must be one of a, got 'b'"):
        Late("b")
    names.append("b")
    assert Late("b").name == "b"


@pytest.mark.parametrize("cls", BUILT_IN, ids=lambda c: c.__name__)
def test_every_setting_of_a_built_in_policy_is_declared(cls):
    undeclared = [f.name for f in fields(cls) if CHECK not in f.metadata]
    assert undeclared == []


@pytest.mark.parametrize("cls", BUILT_IN + (PredictorConfig, FeedbackConfig, RunSettings),
                         ids=lambda c: c.__name__)
def test_each_declared_field_refuses_a_value_of_the_wrong_kind(cls):
    """A string for every declared field (of any rule) is refused with the field's label."""
    for name, label, rule in declared_rules(cls):
        if isinstance(rule, Instance):
            continue
        bad = "not one of the choices" if isinstance(rule, Choice) else "x"
        with pytest.raises(ValueError, match=f"^{label} must be "):
            cls(**{name: bad})


def test_subclass_rules_include_the_base_rules():
    assert [n for n, _, _ in declared_rules(PaperConfig)] == [n for n, _, _ in declared_rules(GuardedConfig)][:5]
    with pytest.raises(ValueError, match="^c must be a finite number >= 0, got -1$"):
        GuardedConfig(c=-1)
    with pytest.raises(ValueError, match="^q_max must be a finite number > 0, got 0$"):
        PaperConfig(V=1e-5, q_max=0)  # checked whether or not V is fixed


def test_configs_outside_the_policies_use_the_same_rules():
    with pytest.raises(ValueError, match="^feedback kind must be one of "):
        FeedbackConfig(kind="often")
    with pytest.raises(ValueError, match="^fpr must be a finite number >= 0 and <= 1, got 2$"):
        JudgeModel(fpr=2, fnr=0.1)
    with pytest.raises(ValueError, match="^embed_wait_ms must be a finite number >= 0 and <= 100, got 101$"):
        ServiceConfig(alpha=0.7, embed_wait_ms=101)
    with pytest.raises(ValueError, match=r"^requests per tick must be an integer in \[1, 100000\], got 100001$"):
        RunSettings(per_tick=100_001)
    assert type(RunSettings(seed=np.int32(3)).seed) is int


def test_one_feedback_rate_check_for_every_caller():
    with pytest.raises(ValueError, match="^feedback_rate must be a finite number >= 0 and <= 1, got 1.5$"):
        FeedbackConfig().check_rate(1.5)
    with pytest.raises(ValueError, match="exceeds 1"):
        FeedbackConfig(kind="bursty", on_fraction=0.25).check_rate(0.5)
    assert FeedbackConfig().check_rate(1) == 1.0
