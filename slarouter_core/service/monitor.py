"""Watch a running routing service from the dashboard: poll ``GET /v1/state`` and turn it
into the same headline and charts as the Live run page (no Streamlit here)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import altair as alt
import httpx
import numpy as np
import pandas as pd

from ..live.charts import (MAX_POINTS, RATIO_WINDOW, ChartFrame, _chart_spec, _long, cached_spec, color_encoding,
                           cost_encodings, series_color)
from ..metrics import running_mean, thin_indices


#: the service's own line on the cost chart (the single models' lines are estimates)
OURS = "SLARouter (reported usage)"
#: one unnamed series: no legend
NO_LEGEND = {"field": "series", "type": "nominal", "legend": None}


class ServiceUnreachable(RuntimeError):
    """The URL does not answer like a routing service (the message says why)."""


def normalise_url(url: str) -> str:
    """``host:port`` or ``http(s)://host:port[/]`` to ``http(s)://host:port``; clear errors."""
    u = (url or "").strip().rstrip("/")
    if not u:
        raise ValueError("give the service URL, e.g. http://127.0.0.1:8000")
    if "://" not in u:
        u = "http://" + u
    parts = urlsplit(u)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    return u


def _auth(api_key: str | None = None) -> dict[str, str]:
    """The Authorization header for the service's key (``api_key`` or the environment)."""
    key = api_key or os.environ.get("SLAROUTER_API_KEY") or os.environ.get("SLAROUTER_MASTER_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}


def fetch_state(url: str, history: int = MAX_POINTS, timeout: float = 3.0, api_key: str | None = None) -> dict:
    """The service's state with its last ``history`` requests. ``api_key``: the service's
    key (default: the environment variable ``SLAROUTER_API_KEY``, then
    ``SLAROUTER_MASTER_KEY``, as on the machine that runs the service)."""
    base = normalise_url(url)
    headers = _auth(api_key)
    try:
        r = httpx.get(f"{base}/v1/state", params={"history": history}, timeout=timeout, headers=headers)
    except httpx.HTTPError as exc:
        raise ServiceUnreachable(f"no answer from {base} ({type(exc).__name__}); is `slarouter serve` running?") \
            from None
    if r.status_code == 401:
        raise ServiceUnreachable(f"{base} needs an API key: set SLAROUTER_API_KEY to one of its keys "
                                 "before starting the dashboard")
    if r.status_code != 200:
        raise ServiceUnreachable(f"{base}/v1/state answered HTTP {r.status_code}: not a SLARouter service?")
    try:
        doc = r.json()
    except ValueError:
        raise ServiceUnreachable(f"{base}/v1/state did not answer JSON: not a SLARouter service?") from None
    if not isinstance(doc, dict) or "models" not in doc or "t" not in doc:
        raise ServiceUnreachable(f"{base}/v1/state is not a SLARouter state document")
    return doc


def refit_text(refits: dict | None) -> str:
    """The text model's refits (run off the request path) in words; empty where there were
    none (another mode) or the service predates them."""
    if not refits or not (refits.get("done") or refits.get("failed") or refits.get("running")):
        return ""
    parts = [f"text model refits: {refits.get('done', 0):,} done"]
    if refits.get("last_s") is not None:
        parts[0] += f" (the last took {refits['last_s']:.2g} s, off the request path)"
    if refits.get("running"):
        parts.append("one running")
    if refits.get("failed"):
        parts.append(f"{refits['failed']:,} failed (the text model kept)")
    return ", ".join(parts)


def judge_text(judge: dict | None, cost_total: float) -> str:
    """The service's LLM judge in words: its share of the answers, its calls and what came
    of them, its spend (and its share of the whole), the calls still due and the thumbs
    waiting for them; empty without a judge. A service from before a field reads none."""
    if not judge:
        return ""
    calls, cal = int(judge.get("calls", 0)), int(judge.get("calibration_calls", 0))
    text = f"LLM judge {judge.get('model', '')} on {100 * float(judge.get('budget', 1.0)):g}% of answers"
    if cal or (judge.get("calibrate") and float(judge.get("budget", 1.0)) < 1.0):
        text += " (and rated ones outside that share, to calibrate it)"
    outcome = [f"{int(judge.get('verdicts', 0)):,} verdicts"]
    if cal:
        outcome.append(f"{cal:,} calibration reads")
    for key, word in (("failures", "failed"), ("skipped", "skipped at the concurrency bound")):
        if judge.get(key):
            outcome.append(f"{int(judge[key]):,} {word}")
    cost = float(judge.get("cost", 0.0))
    text += f": {calls:,} calls ({', '.join(outcome)}), cost {cost:.4g}"
    if cost > 0 and cost_total > 0:
        text += f" ({100 * cost / cost_total:.1f}% of the total)"
    due, held = int(judge.get("due", 0)), int(judge.get("thumbs_waiting", 0))
    waiting = ([f"{due:,} call{'' if due == 1 else 's'} due"] if due else []) + (
        [f"{held:,} thumbs waiting for their verdicts"] if held else [])
    return text + ("; " + ", ".join(waiting) if waiting else "")


def sla_window_text(sla: dict) -> str:
    """The SLA window the contextual mode is in, in words ("" for a mode without one)."""
    if sla.get("window") is None or sla.get("window_index") is None:
        return ""
    text = (f"SLA window {sla['window_index'] + 1:,}: {sla.get('window_served', 0):,} of "
            f"{sla['window']:,} requests served")
    warned = sla.get("windows_at_risk") or 0
    return text + (f"; {warned:,} window{'' if warned == 1 else 's'} warned at risk so far" if warned else "")


@dataclass
class ServiceView:
    """Headline numbers and chart frames of one state document."""

    state: dict

    @property
    def names(self) -> list[str]:
        return [m["name"] for m in self.state["models"]]

    def headline(self) -> dict[str, Any]:
        s = self.state
        sat, sla = s["satisfaction"], s.get("sla", {})
        return {"served": s["t"], "cost": s["cost_total"], "q": s["decision_queue"], "v": s["v"],
                "alpha": s["alpha"], "mode": s["mode"], "estimate": sat["estimate"],
                "lower_bound": sat["lower_bound"], "bound": sat["bound"],
                # a service from before these fields: a 90% bound on every request
                "confidence": sat.get("confidence", 0.9), "covers": sat.get("covers", "all requests"),
                "sla": "unknown" if sat["sla_met"] is None else ("met" if sat["sla_met"] else "not certified"),
                "at_risk": bool(sla.get("at_risk")), "at_risk_since": sla.get("at_risk_since"),
                "window": sla_window_text(sla),
                "thumbs_up": s["feedback"]["satisfied"], "thumbs_down": s["feedback"]["unsatisfied"],
                "failed": s["requests_failed"], "failures": sum(m["failures"] for m in s["models"]),
                "refits": refit_text(s.get("refits")), "judge": judge_text(s.get("judge"), s["cost_total"])}

    def models_frame(self) -> pd.DataFrame:
        cols = ["name", "model", "chosen", "served", "failures", "prompt_tokens", "completion_tokens", "cost",
                "thumbs_up", "thumbs_down"]
        return pd.DataFrame([{k: m[k] for k in cols} for m in self.state["models"]], columns=cols)

    def charts(self, max_points: int = MAX_POINTS) -> list[ChartFrame]:
        rows = self.state.get("history") or []
        names = self.names
        M = len(names)
        k = len(rows)
        t_all = np.array([r["t"] for r in rows], np.int64)
        idx = thin_indices(k, max_points)
        t = t_all[idx]
        out = [ChartFrame("queue", _long(t, {"Q": np.array([r["q"] for r in rows], np.float64)[idx]}),
                          _chart_spec("Virtual queue Q_t (decision queue)", "Q", NO_LEGEND, None))]

        cost = np.array([r["cost"] or 0.0 for r in rows], np.float64)
        est = np.array([r["est_costs"] for r in rows], np.float64).reshape(k, M)
        series = {OURS: np.cumsum(cost)[idx]}
        series.update({f"only {n}": np.cumsum(est[:, j])[idx] for j, n in enumerate(names)})
        # as on Live run: the router solid in its mode's colour, each model dotted in its own
        color, dash = cost_encodings(list(series), names, {OURS: series_color(str(self.state.get("mode", "")))},
                                     "router (reported usage), single models (estimated)")
        out.append(ChartFrame("cost", _long(t, series),
                              _chart_spec("Cumulative cost over the requests shown", "cost (zoo prices)", color, None, dash=dash)))

        s_used = np.array([r["shat"] if r["feedback"] is None else r["feedback"] for r in rows], np.float64)
        alpha = float(self.state["alpha"])
        out.append(ChartFrame("satisfaction",
                              _long(t, {"running satisfaction (thumbs where given, else predicted)":
                                        running_mean(s_used)[idx]}),
                              _chart_spec("Running request satisfaction (estimated)", "satisfaction", NO_LEGEND,
                                          None, rule=alpha, rule_label=f"alpha = {alpha:.3f}")))

        served = np.array([-1 if r["served"] is None else r["served"] for r in rows], np.int64)
        onehot = np.zeros((k, M))
        ok = served >= 0
        onehot[np.flatnonzero(ok), served[ok]] = 1.0
        counts = np.vstack([np.zeros((1, M)), np.cumsum(onehot, axis=0)])
        band = thin_indices(k, max(2, max_points // 4))
        lo = np.maximum(0, band + 1 - RATIO_WINDOW)
        width = (band + 1 - lo)[:, None]
        share = (counts[band + 1] - counts[lo]) / np.maximum(width, 1)
        upper = np.cumsum(share, axis=1)
        ratio = _long(t_all[band] if k else band, {n: upper[:, j] for j, n in enumerate(names)})
        ratio["lo"] = (ratio["value"].to_numpy() - share.T.reshape(-1)).astype(np.float32)
        out.append(ChartFrame("ratio", ratio,
                              _chart_spec(f"Model call ratio (last {RATIO_WINDOW} requests)", "share of calls",
                                          color_encoding("series", names, names, "model (cheapest first)"), None,
                                          area=True, percent=True, y_domain=[0.0, 1.0])))

        kinds = ["exploration", "feedback", "backend failure"]
        masks = [np.array([r["explored"] for r in rows], bool), np.array([r["feedback"] is not None for r in rows], bool),
                 np.array([r["failed"] or r["retried"] for r in rows], bool)]
        events = [t_all[m] for m in masks]
        ev = pd.DataFrame({"t": np.concatenate(events).astype(np.int32) if k else np.zeros(0, np.int32),
                           "event": pd.Categorical.from_codes(
                               np.repeat(np.arange(3, dtype=np.int8), [len(e) for e in events]), categories=kinds)})
        out.append(ChartFrame("events", ev, _events_spec()))
        return out


def fmt_share(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


@dataclass(frozen=True)
class ServiceAnswer:
    """One request answered through the service (for Feedback by hand on the real zoo)."""

    request_id: str
    model: str
    chosen: str
    explored: bool
    text: str


def _post(url: str, path: str, payload: dict, timeout: float) -> dict:
    base = normalise_url(url)
    try:
        r = httpx.post(f"{base}{path}", json=payload, timeout=timeout, headers=_auth())
    except httpx.HTTPError as exc:
        raise ServiceUnreachable(f"no answer from {base} ({type(exc).__name__}); is `slarouter serve` running?") \
            from None
    try:
        doc = r.json()
    except ValueError:
        raise ServiceUnreachable(f"{base}{path} answered HTTP {r.status_code} without JSON") from None
    if r.status_code != 200:
        msg = doc.get("error", {}).get("message") if isinstance(doc, dict) and isinstance(doc.get("error"), dict) \
            else None
        raise ValueError(f"HTTP {r.status_code}: {msg or doc}")
    return doc


def ask(url: str, text: str, timeout: float = 120.0) -> ServiceAnswer:
    """Send one user message through the service; the model that answered and its text."""
    if not text or not text.strip():
        raise ValueError("the request is empty")
    doc = _post(url, "/v1/chat/completions", {"model": "auto", "messages": [{"role": "user", "content": text}]},
                timeout)
    meta = doc.get("slarouter") or {}
    return ServiceAnswer(request_id=doc["id"], model=doc["model"], chosen=meta.get("chosen", doc["model"]),
                         explored=bool(meta.get("explored")),
                         text=(doc.get("choices") or [{}])[0].get("message", {}).get("content") or "")


def send_feedback(url: str, request_id: str, satisfied: bool, timeout: float = 10.0) -> dict:
    """The user's thumbs for an answered request (errors carry the service's message)."""
    return _post(url, "/v1/feedback", {"request_id": request_id, "satisfied": bool(satisfied)}, timeout)


@cached_spec
def _events_spec() -> alt.TopLevelMixin:
    """The events strip (the same every poll: built once, copied per call)."""
    return alt.Chart().mark_tick(thickness=1.5, opacity=0.8).encode(
        x=alt.X("t:Q", title="request"), y=alt.Y("event:N", title=None), color=alt.Color("event:N", legend=None),
    ).properties(title="Where exploration, feedback and backend failures happened", height=alt.Step(34))
