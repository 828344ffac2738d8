"""Method specs: which method of :data:`baselines.METHODS` runs with which params, the
named presets of the CLI and the dashboard, and the ``method:key=value`` text form."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..baselines import METHODS, PAPER_V
from ..policies.registry import DEFAULT_POLICY, REGISTRY


@dataclass(frozen=True)
class MethodSpec:
    """One method of :data:`baselines.METHODS` with fixed params, e.g.
    ``MethodSpec("slarouter", {"V": 1e-5})``. ``single`` without a ``model`` param
    expands to one run per model of each dataset. ``label`` names it in tables."""

    method: str
    params: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}: choose from {', '.join(METHODS)}")
        if not isinstance(self.params, Mapping):
            raise TypeError("params must be a mapping")
        object.__setattr__(self, "params", dict(self.params))
        try:
            json.dumps(self.params)
        except TypeError:
            raise ValueError(f"params of {self.method} must be JSON values (numbers, strings, lists, dicts)") from None

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        if not self.params:
            return self.method
        return f"{self.method}(" + ",".join(f"{k}={v}" for k, v in sorted(self.params.items())) + ")"

    def params_json(self) -> str:
        return json.dumps(self.params, sort_keys=True)

    @property
    def fixed_v(self) -> float:
        """The V this spec fixes, NaN when it sets none (data-driven V, or no queue): its
        own column in the results, so a V sweep never reads V back out of a label."""
        v = self.params.get("V")
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


#: named method specs for the CLI and the dashboard (``single`` expands per model)
PRESETS: dict[str, MethodSpec] = {
    "single": MethodSpec("single"),
    "random": MethodSpec("random", label="random"),
    "static_mixture": MethodSpec("static_mixture", label="static mixture"),
    "oracle": MethodSpec("oracle", label="oracle"),
    "messplus": MethodSpec("messplus", label="MESS+"),
    "carrot": MethodSpec("carrot", label="CARROT"),
    "causal": MethodSpec("causal", label="Causal"),
    "slarouter": MethodSpec("slarouter", {"V": PAPER_V}, label="SLARouter (fixed V)"),
    "slarouter_ddv": MethodSpec("slarouter", {}, label="SLARouter (data-driven V)"),
}


def policy_preset(name: str) -> MethodSpec:
    """The preset ``slarouter_<name>``: SLARouter with registered policy ``name``."""
    return MethodSpec("slarouter", {"mode": name}, label=f"SLARouter ({REGISTRY[name].info.label})")


# one preset per registered policy other than the default (a policy registered later is
# found by parse_method)
PRESETS.update({f"slarouter_{n}": policy_preset(n) for n in REGISTRY if n != DEFAULT_POLICY})
#: the paper's presets, in its table order (``slarouter_guarded``, our improved mode, is
#: not a default: ask for it by name)
DEFAULT_METHODS: tuple[MethodSpec, ...] = tuple(PRESETS[k] for k in (
    "single", "random", "static_mixture", "oracle", "carrot", "causal", "messplus", "slarouter", "slarouter_ddv"))


def comparison_defaults(mode: str, mine: str) -> list[str]:
    """A comparison's default methods around the user's router (``mine``, running policy
    ``mode``): the references, the paper's algorithm where the user runs another policy,
    and every other policy that asks to be compared by default (``PolicyInfo``)."""
    keys = ["single", "static_mixture", "oracle", "messplus", mine]
    if mode != DEFAULT_POLICY:
        keys.append("slarouter_ddv")
    keys += [f"slarouter_{n}" for n, c in REGISTRY.items()
             if n not in (mode, DEFAULT_POLICY) and c.info.compare_by_default]
    return keys


def parse_method(text: str) -> MethodSpec:
    """A preset name, or ``method:key=value,key=value`` (values read as JSON when they
    parse, e.g. ``slarouter:V=0.0001,mode=paper`` or ``carrot:mu=0.5``)."""
    text = text.strip()
    if text in PRESETS:
        return PRESETS[text]
    if text.startswith("slarouter_") and text[len("slarouter_"):] in REGISTRY:
        return policy_preset(text[len("slarouter_"):])
    name, _, rest = text.partition(":")
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}: use a preset ({', '.join(PRESETS)}) "
                         f"or method:key=value with a method of {', '.join(METHODS)}")
    return MethodSpec(name, {key: setting_value(value) for key, value in _key_values(rest, text, "method")})


def setting_value(text: str) -> Any:
    """A setting's value as given on a command line: JSON where it parses (numbers,
    lists, true/false), else the text itself (a name)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _key_values(rest: str, text: str, what: str, known: set[str] | None = None) -> list[tuple[str, str]]:
    """The ``key=value`` pairs of a ``name:key=value,...`` spec, with a plain error; a
    comma inside brackets belongs to its value (``stated_levels=[0.5,0.7]``)."""
    pairs = []
    items, depth, start = [], 0, 0
    for i, ch in enumerate(rest):
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            items.append(rest[start:i])
            start = i + 1
    items.append(rest[start:])
    for item in filter(None, (x.strip() for x in items)):
        key, eq, value = item.partition("=")
        if not eq or not key or (known is not None and key not in known):
            allowed = f" with a key of {', '.join(sorted(known))}" if known is not None else ""
            raise ValueError(f"bad {what} parameter {item!r} in {text!r}: use key=value{allowed}")
        pairs.append((key, value))
    return pairs


def expand_presets(names: Iterable[str]) -> tuple[MethodSpec, ...]:
    return tuple(parse_method(n) for n in names)
