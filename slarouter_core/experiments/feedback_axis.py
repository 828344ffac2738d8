"""Feedback models as a grid axis: named presets, the ``kind:key=value`` text form, and
the short name and columns that identify a feedback plan in the tidy rows."""

from __future__ import annotations

import json
from typing import Any, Mapping

from ..feedback import KINDS as FEEDBACK_KINDS
from ..feedback import FeedbackConfig
from .specs import _key_values


#: the FeedbackConfig fields that matter for each kind (the rest are ignored by it)
FEEDBACK_FIELDS: dict[str, tuple[str, ...]] = {
    "iid": (), "bursty": ("burst_length", "on_fraction"), "negative": ("negative_ratio",),
    "delayed": ("delay", "delay_dist"), "drift": ("drift_mix",),
}


def _feedback_presets() -> dict[str, FeedbackConfig]:
    from ..judge import JUDGE_PRESETS

    out = {k: FeedbackConfig(kind=k) for k in FEEDBACK_KINDS}  # type: ignore[arg-type]
    for name, judge in JUDGE_PRESETS.items():
        out[f"judge-{name}"] = FeedbackConfig(judge=judge)
    for name, judge in JUDGE_PRESETS.items():
        out[f"fill-{name}"] = FeedbackConfig(judge_fill=judge)
    return out


#: named feedback models: each kind with its defaults, IID labels from the paper's
#: simulated judges (``judge-acpbench``, ``judge-gpqa``: the judge *replaces* the thumbs),
#: and the paper's protocol, users' thumbs with the judge filling in on every request
#: without them (``fill-acpbench``, ``fill-gpqa``)
FEEDBACK_PRESETS: dict[str, FeedbackConfig] = _feedback_presets()


def _describe(name: str) -> str:
    """One line on a feedback preset, for a picker."""
    kinds = {"iid": "IID: each request independently, at the feedback rate",
             "bursty": "bursty: feedback comes in bursts (on/off), same long-run rate",
             "negative": "negativity-biased: thumbs-down given more often than thumbs-up",
             "delayed": "delayed: each verdict arrives some requests later",
             "drift": "workload drift: the benchmark mix changes along one mixed stream"}
    if name.startswith("judge-"):
        return f"IID labels from a simulated LLM judge ({name[len('judge-'):]} error rates)"
    if name.startswith("fill-"):
        return (f"the paper's protocol: IID thumbs, and a simulated LLM judge ({name[len('fill-'):]} error "
                "rates) labels every request without them")
    return kinds[name]


#: the feedback presets that run on one benchmark's own stream (workload drift needs a
#: mixed stream), each with a one-line description: the feedback-model axis of a picker
FEEDBACK_CHOICES: dict[str, str] = {k: _describe(k) for k, v in FEEDBACK_PRESETS.items() if v.kind != "drift"}


def parse_feedback(value: FeedbackConfig | str | Mapping[str, Any]) -> FeedbackConfig:
    """A :class:`FeedbackConfig`, a preset name (:data:`FEEDBACK_PRESETS`), a dict of its
    fields, or ``kind:key=value,...`` (e.g. ``bursty:burst_length=20,on_fraction=0.5``,
    ``delayed:delay=200,delay_dist=geometric``, ``iid:judge=gpqa``, or judge fill-in
    ``iid:judge_fill=acpbench,judge_budget=0.25``)."""
    if isinstance(value, FeedbackConfig):
        return value
    if isinstance(value, Mapping):
        try:
            return FeedbackConfig.from_dict(dict(value))
        except TypeError as exc:
            raise ValueError(f"bad feedback model {dict(value)!r}: {exc}") from None
    if not isinstance(value, str):
        raise ValueError(f"a feedback model must be a FeedbackConfig, a preset name or kind:key=value, got {value!r}")
    text = value.strip()
    if text in FEEDBACK_PRESETS:
        return FEEDBACK_PRESETS[text]
    kind, _, rest = text.partition(":")
    if kind not in FEEDBACK_KINDS:
        raise ValueError(f"unknown feedback model {text!r}: use a preset ({', '.join(FEEDBACK_PRESETS)}) or "
                         f"kind:key=value with a kind of {', '.join(FEEDBACK_KINDS)}")
    from ..judge import JUDGE_PRESETS

    kw: dict[str, Any] = {"kind": kind}
    known = {"burst_length", "on_fraction", "negative_ratio", "delay", "delay_dist", "drift_mix", "judge",
             "judge_fill", "judge_budget", "judge_calibrate"}
    for key, raw in _key_values(rest, text, "feedback", known):
        if key == "judge_calibrate":
            if raw.lower() not in ("true", "false", "1", "0", "on", "off"):
                raise ValueError(f"feedback parameter judge_calibrate must be true or false, got {raw!r}")
            kw[key] = raw.lower() in ("true", "1", "on")
        elif key in ("judge", "judge_fill"):
            if raw not in JUDGE_PRESETS:
                raise ValueError(f"unknown judge {raw!r}: choose {', '.join(JUDGE_PRESETS)}")
            kw[key] = JUDGE_PRESETS[raw]
        elif key == "delay_dist":
            kw[key] = raw
        else:
            try:
                kw[key] = float(raw)
            except ValueError:
                raise ValueError(f"feedback parameter {key} must be a number, got {raw!r}") from None
    return FeedbackConfig(**kw)


def feedback_params(fcfg: FeedbackConfig) -> dict[str, Any]:
    """The parameters that matter for ``fcfg``'s kind, and its judge (if any)."""
    out: dict[str, Any] = {k: getattr(fcfg, k) for k in FEEDBACK_FIELDS[fcfg.kind]}
    if fcfg.judge is not None:
        out["judge"] = fcfg.judge.to_dict()
    if fcfg.judge_fill is not None:
        out["judge_fill"] = fcfg.judge_fill.to_dict()
        out["judge_budget"] = fcfg.judge_budget
        out["judge_calibrate"] = fcfg.judge_calibrate
    return out


def feedback_name(fcfg: FeedbackConfig) -> str:
    """Short, unique-per-plan name: the kind, its non-default parameters, the judge."""
    base = FeedbackConfig()
    diff = [f"{k}={getattr(fcfg, k):g}" if isinstance(getattr(fcfg, k), float) else f"{k}={getattr(fcfg, k)}"
            for k in FEEDBACK_FIELDS[fcfg.kind] if getattr(fcfg, k) != getattr(base, k)]
    name = fcfg.kind + (f"({','.join(diff)})" if diff else "")
    if fcfg.judge is not None:
        name += f"+judge({fcfg.judge.name})"
    if fcfg.judge_fill is not None:
        budget = "" if fcfg.judge_budget == 1.0 else f",budget={fcfg.judge_budget:g}"
        if fcfg.judge_budget < 1.0 and not fcfg.judge_calibrate:
            budget += ",no-calibration"
        name += f"+fill({fcfg.judge_fill.name}{budget})"
    return name


def feedback_columns(fcfg: FeedbackConfig) -> dict:
    """The tidy rows' feedback columns: the plan's name, kind and parameters (JSON)."""
    return {"feedback_model": feedback_name(fcfg), "feedback_kind": fcfg.kind,
            "feedback_params": json.dumps(feedback_params(fcfg), sort_keys=True)}
