"""Old formats, read in one place: router configs and checkpoints written before each
policy had its own config and its own namespace in the checkpoint (format v1).

v1 configs carried every mode's settings side by side: ``c``, ``V``, ``q_max``, ``eps``
and ``predictor`` at the top level, the guarded settings flat or under ``"guarded"``,
the contextual ones under ``"contextual"``; a mode ignored the others' (defaults). v1
checkpoints kept the paper/guarded state at the top level of the metadata and the
contextual state under ``"contextual"``, with arrays unprefixed.
"""

from __future__ import annotations

from typing import Any

from .registry import DEFAULT_POLICY, REGISTRY, policy_class, settings_of

ROUTER_FORMAT = "slarouter-router-v2"
ROUTER_FORMATS = ("slarouter-router-v1", ROUTER_FORMAT)
#: settings every v1 config stored at its top level, whatever its mode
_V1_SHARED = ("c", "V", "q_max", "eps", "predictor")
#: keys of a v1 checkpoint's metadata that are the router's own, not the policy's
_V1_ROUTER_KEYS = ("format", "config", "n_models", "dim", "seed", "t", "n_feedback", "policy_rng", "draws_start")
#: the v1 contextual config written before the window certificate had ``z``: its settings do not carry over
_PRE_CERTIFICATE_KEY = "z"


def router_config_dict(d: dict) -> dict:
    """``RouterConfig`` keyword arguments from a config dict of any version: today's
    (``alpha``, ``mode``, ``settings``) and flat settings pass through; a v1 dict keeps
    only its mode's settings."""
    d = dict(d)
    if "settings" in d or not all(k in d for k in _V1_SHARED):
        return d
    mode = d.pop("mode", DEFAULT_POLICY)
    own = settings_of(mode)
    settings: dict[str, Any] = {}
    nested = d.pop(mode, None)
    for name in REGISTRY:
        d.pop(name, None)  # other modes' nested settings (their defaults)
    if isinstance(nested, dict) and _PRE_CERTIFICATE_KEY not in nested:
        settings.update(nested)
    elif nested is not None and not isinstance(nested, dict):
        settings.update(nested.to_dict())
    foreign = set().union(*(settings_of(n) for n in REGISTRY))
    out = {"alpha": d.pop("alpha"), "mode": mode}
    for k, v in d.items():
        if k in own:
            settings.setdefault(k, v)
        elif k not in foreign:
            out[k] = v  # not a setting of any policy: RouterConfig names it
    out["settings"] = policy_class(mode).config_cls.from_dict(settings)
    return out


def router_checkpoint(meta: dict, tensors: dict) -> tuple[dict, dict]:
    """A checkpoint's metadata and arrays in today's layout (``meta["policy"]``, arrays of
    the policy under ``policy.``)."""
    if meta.get("format") == ROUTER_FORMAT:
        return meta, tensors
    mode = meta["config"].get("mode", DEFAULT_POLICY)
    nested = meta.get(mode)
    if isinstance(nested, dict) and "n_feedback" in nested:  # the policy's whole state under its name
        policy = nested
    else:  # the state at the top level, the router keeping its counters
        policy = {k: v for k, v in meta.items() if k not in _V1_ROUTER_KEYS}
        policy["t"], policy["n_feedback"] = meta["t"], meta["n_feedback"]
    new_meta = {k: meta[k] for k in _V1_ROUTER_KEYS if k in meta and k != "n_feedback"}
    new_meta["format"], new_meta["policy"] = ROUTER_FORMAT, policy
    new_tensors = {(k if k == "router.policy_draws" else f"policy.{k}"): v for k, v in tensors.items()}
    return new_meta, new_tensors

