"""Dashboard settings that travel in a URL: the data a session works on, the router and
stream settings, one set of limits for URL and widgets, and the text-box parsers."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping, Sequence

import numpy as np

from ..data import DEFAULT_COST, RoutingData, midpoint_alpha
from ..encoders import LAYERS_TAG, MINILM_LAYERS, EncoderUnavailableError, check_encoder_spec
from ..feedback import KINDS, FeedbackConfig
from ..judge import JUDGE_PRESETS
from ..policies.contextual import ContextualConfig
from ..policies.registry import DASHBOARD_DEFAULT, keep_settings, policy_class, settings_of
from ..policies.registry import names as router_modes
from ..router import RouterConfig
from ..simulator import DEFAULT_FEEDBACK_RATE, SimulationConfig
from ..validation import Alpha, Bool, Checked, Choice, Int, Levels, Range, check_number, declared_rules, param

ENCODER_CHOICES = ("minilm", MINILM_LAYERS, "hashing")
#: one set of limits for the URL and the widgets, (lowest, highest) per setting: a shared
#: link with a value outside them is clamped to the nearest limit, with a message
LIMITS: dict[str, tuple[float, float]] = {
    "alpha": (0.001, 0.999), "c": (0.0, 100.0), "V": (1e-12, 1e6), "q_max": (1e-6, 1e6), "eps": (1e-9, 1.0),
    "feedback_rate": (0.0, 1.0), "seed": (0, 2**31 - 1), "per_tick": (1, 20_000), "judge_budget": (0.0, 1.0),
    "judge_cost": (0.0, 1e12), "warn_z": (0.0, 10.0), "warn_after": (0, 1_000_000)}
#: routers streamed side by side on Live run by default (the registry's choice), on the
#: same requests and feedback plan; the first is also the router of the other pages
DEFAULT_ROUTERS = DASHBOARD_DEFAULT
#: LLM judges that can fill in a verdict where the user gave no thumbs (issue 19);
#: "" is no judge
JUDGE_CHOICES = ("",) + tuple(JUDGE_PRESETS)
SOURCES = ("demo", "path", "upload")
#: the stated accuracies (RunSettings.stated_levels) as the pages and messages name them
STATED_LABEL = "stated accuracies"
#: the at-risk test's settings (RunSettings.warn_z, warn_after), the contextual policy's defaults
WARNING_SETTINGS = ("warn_z", "warn_after")
_WARNING_DEFAULTS = ContextualConfig()
#: the RunSettings fields that reach a router's config (:meth:`RunSettings.policy_settings`:
#: the mode and what it takes); the others set the stream, the feedback and the pace
ROUTER_FIELDS = ("mode", "c", "fixed_v", "V", "q_max", "eps", "stated_levels") + WARNING_SETTINGS


# -- settings ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DataSpec(Checked):
    """Which data the session works on: source, routing cost, benchmarks, encoder."""

    source: str = param("demo", Choice(SOURCES))
    path: str = ""
    cost: str = DEFAULT_COST
    benchmarks: tuple[str, ...] = ()  # empty: all benchmarks
    encoder: str = "minilm"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.source != "demo" and not str(self.path).strip():
            raise ValueError(f"source {self.source!r} needs a file path")
        if not isinstance(self.cost, str) or not self.cost.strip():
            raise ValueError("cost must name a per-model metric such as 'energy_joules'")
        if not isinstance(self.benchmarks, tuple) or not all(isinstance(b, str) for b in self.benchmarks):
            raise ValueError("benchmarks must be a tuple of names")
        try:
            check_encoder_spec(self.encoder)
        except EncoderUnavailableError as exc:  # a name that is no encoder at all (enc=zzz in a link)
            raise ValueError(str(exc)) from None


@dataclass(frozen=True)
class RunSettings(Checked):
    """Router and stream settings shared by Live run, Feedback by hand and Experiments.

    ``alpha=None`` means the data's midpoint alpha (halfway between the accuracies of the
    two most expensive models). ``V`` is used when ``fixed_v``; otherwise V is data-driven
    from ``q_max`` and ``eps``. ``judge`` (a ``JUDGE_PRESETS`` name, "" for none) fills in
    a verdict on a share ``judge_budget`` of the requests (drawn whatever their thumbs);
    each call costs ``judge_cost`` (None: the zoo's cheapest model's mean cost per request).
    ``stated_levels``: each model's accuracy as its provider or a leaderboard states it, one
    per model of the data in its model order (empty: none), for the routers that take them
    as a prior (``stated_levels`` of the contextual policy; the others ignore them).
    ``warn_z`` and ``warn_after``: how early a router with an "SLA at risk" test (the
    contextual policy's) says so; the defaults are that policy's own, and the others ignore
    them.
    """

    alpha: float | None = param(None, Alpha(optional=True))
    c: float = param(0.1, Range(low=0.0))
    fixed_v: bool = param(False, Bool())
    V: float = param(1e-5, Range(low=0.0, low_open=True))
    q_max: float = param(30.0, Range(low=0.0, low_open=True))
    eps: float = param(0.001, Range(low=0.0, low_open=True))
    feedback_rate: float = param(DEFAULT_FEEDBACK_RATE, Range(low=0.0, high=1.0), label="feedback rate")
    seed: int = param(42, Int(low=0))
    per_tick: int = param(200, Int(low=1, high=100_000), label="requests per tick")
    feedback_model: str = param("iid", Choice(lambda: feedback_model_choices()), label="feedback model")
    mode: str = param(DEFAULT_ROUTERS[0], Choice(router_modes), label="router mode")
    routers: tuple[str, ...] = DEFAULT_ROUTERS  # Live run: router modes side by side
    judge: str = param("", Choice(JUDGE_CHOICES))
    judge_budget: float = param(1.0, Range(low=0.0, high=1.0), label="judge budget")
    judge_cost: float | None = param(None, Range(low=0.0, optional=True), label="judge cost")
    stated_levels: tuple[float, ...] = param((), Levels(open=True), label=STATED_LABEL)
    warn_z: float = param(_WARNING_DEFAULTS.warn_z, Range(low=0.0), label="warn_z")
    warn_after: int = param(_WARNING_DEFAULTS.warn_after, Int(low=0), label="warn after")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.routers, tuple) or not self.routers or len(set(self.routers)) != len(self.routers) \
                or any(m not in router_modes() for m in self.routers):
            raise ValueError(f"routers must be one or more distinct modes of {', '.join(router_modes())}, "
                             f"got {self.routers!r}")

    def resolved_judge_cost(self, data: RoutingData) -> float:
        """What one judge call costs, in the data's cost unit: the setting, else the mean
        cost per request of the zoo's cheapest model (a judge is a model call too)."""
        from ..experiments.runs import judge_call_cost  # the grid's rule, one place

        return judge_call_cost(data, self.judge_cost)

    def resolved_alpha(self, data: RoutingData) -> float:
        return float(self.alpha) if self.alpha is not None else midpoint_alpha(data)

    def policy_settings(self, mode: str | None = None) -> dict[str, Any]:
        """The sidebar's router settings that policy ``mode`` takes (c and the V schedule
        are Algorithm 1's; a policy without them takes none; the stated accuracies, where
        given, go to a policy with a ``stated_levels`` setting; ``warn_z`` and ``warn_after``,
        where they differ from its defaults, to a policy with an at-risk test)."""
        v = {"V": float(self.V)} if self.fixed_v else {"V": None, "q_max": float(self.q_max), "eps": float(self.eps)}
        stated = {"stated_levels": tuple(self.stated_levels)} if self.stated_levels else {}
        warn = {k: getattr(self, k) for k in WARNING_SETTINGS
                if getattr(self, k) != getattr(_WARNING_DEFAULTS, k)}
        return keep_settings(mode or self.mode, {"c": float(self.c), **v, **stated, **warn})

    def reaching(self, modes: Sequence[str]) -> "RunSettings":
        """These settings with each router setting that none of routers ``modes`` receives
        (:meth:`policy_settings`) at its default: what a run of those routers depends on,
        so that a change none of them reads (c or V beside the contextual router alone, the
        at-risk settings beside routers without that test) does not start it again."""
        # V None: data-driven (its V is not read; q_max and eps are)
        received = {k for m in modes for k, v in self.policy_settings(m).items() if v is not None}
        takes_v = any(takes_setting(m, "V") for m in modes)
        default = RunSettings()
        unread = [n for n in ROUTER_FIELDS if n != "mode"
                  and not (n in received or (n == "fixed_v" and takes_v))]
        return replace(self, **{n: getattr(default, n) for n in unread})

    def router_config(self, data: RoutingData, mode: str | None = None) -> RouterConfig:
        """Router ``mode``'s config on ``data``; stated accuracies that a router takes must
        be one per model of ``data`` (ValueError naming the zoo's models otherwise)."""
        mode = mode or self.mode
        if self.stated_levels and takes_stated_levels(mode):
            check_stated_count(self.stated_levels, data.models)
        return RouterConfig(alpha=self.resolved_alpha(data), mode=mode, **self.policy_settings(mode))

    def simulation_config(self, data: RoutingData, mode: str | None = None) -> SimulationConfig:
        """The simulation of router ``mode`` (default ``self.mode``); every mode gets the same
        seed and feedback settings, so the same request order and feedback plan."""
        extra = {}
        if self.feedback_model != "iid" or self.judge:
            extra = feedback_model_fields(self.feedback_model)
            if self.judge:
                extra = {"feedback": replace(extra.get("feedback", FeedbackConfig()),
                                             judge_fill=JUDGE_PRESETS[self.judge],
                                             judge_budget=float(self.judge_budget))}
        return SimulationConfig(self.router_config(data, mode), feedback_rate=float(self.feedback_rate),
                                seed=int(self.seed), **extra)


def clamp_setting(name: str, value: float) -> float:
    """``value`` moved into ``LIMITS[name]`` (what a widget for it can show)."""
    lo, hi = LIMITS[name]
    return type(value)(min(max(value, lo), hi))


def limit_problem(name: str, value: float) -> str | None:
    """Why ``value`` cannot be used for setting ``name`` (outside ``LIMITS``), as a plain
    sentence; None when it is inside. The pages check here instead of letting a widget's
    own bounds reject a value silently (red box, reason on hover only)."""
    lo, hi = LIMITS[name]
    if isinstance(value, (int, np.integer)):
        lo, hi = int(lo), int(hi)
    if value > hi:
        return f"{name} = {_number(value)} is above the highest allowed value ({_number(hi)})"
    if value < lo:
        return f"{name} = {_number(value)} is below the lowest allowed value ({_number(lo)})"
    return None


def settings_change(current: RunSettings, changes: Mapping[str, Any],
                    data: RoutingData | None = None) -> tuple[RunSettings, dict[str, str]]:
    """``current`` with ``changes`` (setting name to new value) applied one at a time.

    A change that is outside ``LIMITS``, that ``RunSettings`` rejects, or (given ``data``)
    that the simulation rejects (e.g. a bursty feedback model that cannot realise the rate)
    is left out and named in the returned problems (setting name to a plain sentence), so
    that the page can say why and put that widget back to the value in use. Changing
    ``routers`` makes the first router the session's ``mode`` (the router of the other pages).
    ``stated_levels`` may be given as the text of its box (:func:`parse_stated_levels`; given
    ``data``, one value per model of its zoo).
    """
    new = current
    problems: dict[str, str] = {}
    for name, value in changes.items():
        if name in LIMITS and isinstance(value, (int, float)) and not isinstance(value, bool):
            why = limit_problem(name, value)
            if why:
                problems[name] = f"{why}; keeping {_shown(current, name, data)}."
                continue
        try:
            if name == "stated_levels":  # text from the box: the link's parser, the data's model count
                models = data.models if data is not None else None
                value = parse_stated_levels(value, models) if isinstance(value, str) else tuple(value)
                if value and models is not None:
                    check_stated_count(value, models)
            kw: dict[str, Any] = {name: value}
            if name == "routers" and tuple(value) != current.routers and value:
                kw = {"routers": tuple(value), "mode": value[0]}
            candidate = replace(new, **kw)
            if data is not None:
                candidate.simulation_config(data)
        except (ValueError, TypeError) as exc:
            problems[name] = f"{exc}; keeping {_shown(current, name, data)}."
            continue
        new = candidate
    return new, problems


#: each run setting's declared label (what its validation errors call it)
_LABELS = {name: label for name, label, _ in declared_rules(RunSettings)}


def setting_label(name: str) -> str:
    """A setting's name as the user reads it: its declared label (``param(label=...)``, the
    one its validation errors use), else the field name."""
    return _LABELS.get(name, name)


def _shown(run: RunSettings, name: str, data: RoutingData | None) -> str:
    """A setting's value in use, as a user reads it."""
    if name == "alpha" and run.alpha is None:
        return f"alpha = {run.resolved_alpha(data):.3f} (midpoint)" if data is not None else "the midpoint alpha"
    value = getattr(run, name)
    if name == "routers":
        return ", ".join(value)
    label = setting_label(name)
    if name == "stated_levels":
        return f"{label} = {stated_text(value)}" if value else f"no {label}"
    return f"{label} = {value:g}" if isinstance(value, float) else f"{label} = {value}"


def _changed_fields(old: RunSettings, new: RunSettings, ignore: tuple[str, ...]) -> list[str]:
    return [f.name for f in fields(RunSettings) if f.name not in ignore and getattr(old, f.name) != getattr(new, f.name)]


def changed_settings(old: RunSettings, new: RunSettings, ignore: tuple[str, ...] = ("per_tick",)) -> list[str]:
    """Each setting (but those in ``ignore``) that differs between ``old`` and ``new``, as
    "label old -> new" in field order: what a reset run or a result run under other
    settings says changed."""
    def text(run: RunSettings, name: str) -> str:
        v = getattr(run, name)
        if name == "alpha" and v is None:
            return "midpoint"
        if name == "stated_levels":
            return stated_text(v) or "none"
        return ", ".join(v) if isinstance(v, tuple) else (f"{v:g}" if isinstance(v, float) else str(v))
    return [f"{setting_label(n)} {text(old, n)} -> {text(new, n)}" for n in _changed_fields(old, new, ignore)]


def describe_reset(old: RunSettings, new: RunSettings, ignore: tuple[str, ...] = ("per_tick",)) -> str | None:
    """Why a run in progress started again: each changed setting with its old and new value
    (None when nothing that restarts a run changed). A new seed gets its reason spelled
    out: it draws a new request order and feedback plan, so the old run cannot go on."""
    changed = _changed_fields(old, new, ignore)
    if not changed:
        return None
    what = "; ".join(changed_settings(old, new, ignore))
    head = "The seed changed" if changed == ["seed"] else "Settings changed"
    why = " (a seed fixes the request order and the feedback plan)" if "seed" in changed else ""
    return f"{head} ({what}): the run was reset and starts again from the first request{why}."


def feedback_model_choices() -> tuple[str, ...]:
    """Feedback models the core offers (``slarouter_core.feedback.KINDS``; ``iid`` first)."""
    return ("iid",) + tuple(k for k in KINDS if k != "iid")


def feedback_model_fields(name: str) -> dict:
    """Extra ``SimulationConfig`` keywords selecting feedback model ``name`` (its defaults)."""
    if name == "iid":
        return {}
    if name not in feedback_model_choices():
        raise ValueError(f"unknown feedback model {name!r}: choose one of {', '.join(feedback_model_choices())}")
    return {"feedback": FeedbackConfig(kind=name)}


# -- settings only some routers take ---------------------------------------------------------
def takes_setting(mode: str, name: str) -> bool:
    """Whether router ``mode`` takes the sidebar's setting ``name`` (a field of its config
    of that name; :meth:`RunSettings.policy_settings` passes it to no other router)."""
    return name in settings_of(mode)


def takes_stated_levels(mode: str) -> bool:
    """Whether router ``mode`` takes stated accuracies (a ``stated_levels`` setting)."""
    return takes_setting(mode, "stated_levels")


def takes_warning_settings(mode: str) -> bool:
    """Whether router ``mode`` has an at-risk test with a setting of ``WARNING_SETTINGS``
    (``warn_z``, ``warn_after``)."""
    return any(takes_setting(mode, k) for k in WARNING_SETTINGS)


# -- stated accuracies (the contextual router's prior) -----------------------------------------


def stated_weight(mode: str) -> float:
    """How many labels router ``mode``'s stated accuracies are worth (its ``stated_weight``
    default; the dashboard sets no other); NaN for a policy without that setting."""
    return float(getattr(policy_class(mode).config_cls(), "stated_weight", math.nan))


def stated_text(levels: Sequence[float], sep: str = ", ") -> str:
    """Stated accuracies as the box and the link write them (each in full: 0.54, not
    0.540000; "" for none)."""
    return sep.join(str(float(v)) for v in levels)


def check_stated_count(levels: Sequence[float], models: Sequence[str]) -> None:
    """ValueError unless ``levels`` has one value per model of ``models``, naming them in order."""
    n, m = len(levels), len(models)
    if n != m:
        raise ValueError(f"{n} {'stated accuracy' if n == 1 else STATED_LABEL} for a zoo of {m} models: "
                         f"give one per model, in this order: {', '.join(models)}")


def parse_stated_levels(text: str, models: Sequence[str] | None = None) -> tuple[float, ...]:
    """Stated accuracies from the Live run box or a link (one parser for both): numbers in
    (0, 1) separated by commas, semicolons or spaces; empty: none. Given the data's
    ``models``, one per model in that order. A bad value raises ValueError with a plain
    sentence that names it."""
    parts = [p for p in re.split(r"[,;\s]+", str(text).strip()) if p]
    values = []
    for p in parts:
        try:
            values.append(float(p))
        except ValueError:
            raise ValueError(f"{_cut(p)!r} is not a number: give one accuracy in (0, 1) per model, "
                             "separated by commas") from None
    if values and models is not None:
        check_stated_count(values, models)
    for i, v in enumerate(values):
        name = f"the stated accuracy of {models[i]}" if models is not None else f"stated accuracy {i + 1}"
        try:
            check_number(name, v, low=0.0, high=1.0, low_open=True, high_open=True)
        except ValueError as exc:
            hint = f" (an accuracy of {v:g}% is written {v / 100:g})" if 2.0 <= v <= 100.0 else ""
            raise ValueError(f"{exc}{hint}") from None
    return tuple(values)


def settings_for_data(run: RunSettings, data: RoutingData,
                      given_for: Sequence[str] | None = None) -> tuple[RunSettings, str | None]:
    """``run`` with its stated accuracies left out where they do not fit ``data``'s zoo (a
    link's wrong count, or new data): the settings to use and a sentence saying why (None
    when they fit). ``given_for``: the models they were given for, when known (a zoo of
    the same size but other models is said too)."""
    levels = run.stated_levels
    if not levels:
        return run, None
    if given_for is not None and tuple(given_for) != tuple(data.models):
        why = (f"they were given for {', '.join(given_for)}, and the data's models are now "
               f"{', '.join(data.models)}")
    else:
        try:
            check_stated_count(levels, data.models)
            return run, None
        except ValueError as exc:
            why = str(exc)
    return replace(run, stated_levels=()), f"{STATED_LABEL} {_cut(stated_text(levels), 80)}: {why}; using none."


# query-parameter names of every setting (short, stable: they are part of shared links)
_RUN_KEYS = {"alpha": "alpha", "c": "c", "fixed_v": "fixedV", "V": "V", "q_max": "qmax", "eps": "eps",
             "feedback_rate": "rate", "seed": "seed", "per_tick": "tick", "feedback_model": "fbmodel",
             "mode": "mode", "routers": "routers", "judge": "judge", "judge_budget": "jbudget",
             "judge_cost": "jcost", "stated_levels": "stated", "warn_z": "warnz", "warn_after": "warnafter"}
_DATA_KEYS = {"source": "src", "path": "path", "cost": "cost", "benchmarks": "bench", "encoder": "enc"}


def settings_to_query(data: DataSpec, run: RunSettings) -> dict[str, str]:
    """Both settings objects as URL query parameters (defaults left out)."""
    out: dict[str, str] = {}
    d0, r0 = DataSpec(), RunSettings()
    for f, key in _DATA_KEYS.items():
        v = getattr(data, f)
        if v != getattr(d0, f):
            out[key] = ",".join(v) if f == "benchmarks" else str(v)
    for f, key in _RUN_KEYS.items():
        v = getattr(run, f)
        if v != getattr(r0, f):
            if f == "routers":
                out[key] = ",".join(v)
            elif f == "stated_levels":
                out[key] = stated_text(v, sep=",")
            else:
                out[key] = ("1" if v else "0") if isinstance(v, bool) else \
                    (f"{v:g}" if isinstance(v, float) else str(v))
    return out


def settings_from_query(params: Mapping[str, str]) -> tuple[DataSpec, RunSettings, list[str]]:
    """Settings from URL query parameters; each unusable parameter is skipped with a message."""
    problems: list[str] = []
    data_kw: dict[str, Any] = {}
    run_kw: dict[str, Any] = {}
    for f, key in _DATA_KEYS.items():
        if key in params:
            raw = str(params[key])
            if f == "encoder":  # a '+' typed into a link by hand arrives as a space
                raw = raw.replace(" " + LAYERS_TAG[1:], LAYERS_TAG)
            data_kw[f] = tuple(b for b in raw.split(",") if b) if f == "benchmarks" else raw
    types = {fl.name: fl.type for fl in fields(RunSettings)}
    for f, key in _RUN_KEYS.items():
        if key not in params:
            continue
        raw = str(params[key]).strip()
        try:
            if f in ("feedback_model", "mode", "judge"):
                run_kw[f] = raw
            elif f == "routers":
                run_kw[f] = tuple(m.strip() for m in raw.split(",") if m.strip())
            elif f == "stated_levels":
                try:
                    run_kw[f] = parse_stated_levels(raw)  # the box's parser; the count is the data's (_shared)
                except ValueError as exc:
                    problems.append(f"URL parameter {key}={_cut(raw)!r}: {exc}; using none.")
                    continue
            elif f == "fixed_v":
                if raw not in ("0", "1", "true", "false"):
                    raise ValueError
                run_kw[f] = raw in ("1", "true")
            elif f in ("seed", "per_tick", "warn_after"):
                run_kw[f] = int(raw)
            else:
                run_kw[f] = float(raw)
        except ValueError:
            problems.append(f"URL parameter {key}={_cut(raw)!r} is not a valid {f} ({types[f]}); using the default.")
            continue
        # a usable value outside what the widgets offer is clamped to the nearest limit
        # (values the router rejects, e.g. alpha = 1.5, fall back to the default below)
        if f in LIMITS and math.isfinite(run_kw[f]):
            try:
                replace(RunSettings(), **{f: run_kw[f]})
            except ValueError:
                continue
            lo, hi = LIMITS[f]
            if not lo <= run_kw[f] <= hi:
                near = clamp_setting(f, run_kw[f])
                side = "above the highest" if run_kw[f] > hi else "below the lowest"
                shown = _number(near)
                problems.append(f"URL parameter {key}={_cut(raw)} is {side} allowed {f} ({shown}); using {shown}.")
                run_kw[f] = near
    return (_build(DataSpec, data_kw, _DATA_KEYS, problems), _build(RunSettings, run_kw, _RUN_KEYS, problems),
            problems)


def _number(v: float) -> str:
    """A limit as a person reads it: a whole number in full (a seed of 2147483647, not
    2.14748e+09), anything else in 6 significant digits."""
    return str(int(v)) if isinstance(v, (int, np.integer)) else f"{v:g}"


def _cut(raw: str, keep: int = 40) -> str:
    """A link value short enough to quote in a message (a 300-character one is cut)."""
    return raw if len(raw) <= keep else raw[:keep] + f"... ({len(raw)} characters)"


def _build(cls, kw: dict, keys: dict, problems: list[str]):
    """``cls(**kw)``; when that is invalid, each unusable field falls back to its default."""
    try:
        return cls(**kw)
    except (ValueError, TypeError):
        pass
    obj = cls()
    for f, v in kw.items():
        try:
            obj = replace(obj, **{f: v})
        except (ValueError, TypeError) as exc:
            problems.append(f"URL parameter {keys[f]}: {_cut(str(exc).rstrip('.'), 160)}; using the default.")
    return obj


def settings_json(data: DataSpec, run: RunSettings, resolved: RoutingData | None = None) -> str:
    """Both settings (and, given the data, the exact router config) as JSON."""
    doc: dict[str, Any] = {"data": asdict(data), "run": asdict(run)}
    doc["data"]["benchmarks"] = list(data.benchmarks)
    if resolved is not None:
        doc["simulation"] = run.simulation_config(resolved).to_dict()
    return json.dumps(doc, indent=2, default=str)


# -- experiments page ---------------------------------------------------------------------
def parse_numbers(text: str, name: str, integer: bool = False, low: float | None = None,
                  high: float | None = None) -> tuple:
    """Comma/space separated numbers from a text box, with a plain error naming the bad one."""
    parts = [p for p in str(text).replace(";", ",").replace(" ", ",").split(",") if p.strip()]
    if not parts:
        raise ValueError(f"give at least one {name}")
    out = []
    for p in parts:
        try:
            v = int(p) if integer else float(p)
        except ValueError:
            raise ValueError(f"{p!r} is not a valid {name}: give {'whole numbers' if integer else 'numbers'} "
                             "separated by commas") from None
        if not math.isfinite(v) or (low is not None and v < low) or (high is not None and v > high):
            raise ValueError(f"{name} {p} is out of range [{low}, {high}]")
        out.append(v)
    return tuple(dict.fromkeys(out))


def settings_method_params(run: RunSettings) -> dict:
    """SLARouter method params (for the experiment runner) from the session's settings."""
    params: dict[str, Any] = {"mode": run.mode}
    params.update({k: v for k, v in run.policy_settings().items() if v is not None})
    return params


