"""The policy registry: name -> policy class. The router, the CLI, the experiments, the
service and the dashboard read their choices from it, so a new policy is one
:func:`register` call (from any module, the package's or a user's).

A registered class is a subclass of :class:`~.base.Policy` that declares ``config_cls``
(its frozen settings) and ``info`` (:class:`~.base.PolicyInfo`: how it is shown).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, Iterator

from .base import Policy, PolicyInfo
from .contextual import ContextualPolicy
from .guarded import GuardedPolicy
from .paper import PaperPolicy

#: registered policies, in the order they are offered (the first is the default)
REGISTRY: dict[str, type[Policy]] = {}
#: RouterConfig's default policy
DEFAULT_POLICY = "paper"
#: the policies the dashboard streams side by side by default: the contextual policy (it
#: holds the SLA where a text-blind rule cannot) first, the paper's rule beside it
DASHBOARD_DEFAULT = ("contextual", "paper")


def register(name: str, cls: type) -> type:
    """Register policy class ``cls`` under ``name`` (a new name, or ``cls`` again)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a policy name must be an identifier, got {name!r}")
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise TypeError(f"{cls!r} is not a Policy (subclass policies.base.Policy)")
    for attr, kind in (("config_cls", type), ("info", PolicyInfo)):
        if not isinstance(getattr(cls, attr, None), kind):
            raise TypeError(f"{cls.__name__} must declare {attr} (a {kind.__name__})")
    if getattr(cls, "__abstractmethods__", None):
        raise TypeError(f"{cls.__name__} does not implement {', '.join(sorted(cls.__abstractmethods__))}")
    if REGISTRY.get(name, cls) is not cls:
        raise ValueError(f"policy name {name!r} is taken by {REGISTRY[name].__name__}")
    REGISTRY[name] = cls
    return cls


def unregister(name: str) -> None:
    """Remove a policy registered by a user (the package's own stay)."""
    if name in BUILTIN:
        raise ValueError(f"{name!r} is one of the package's policies")
    REGISTRY.pop(name, None)


def policy_class(name: str) -> type[Policy]:
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"mode must be one of {', '.join(REGISTRY)} (the registered policies), got {name!r}") from None


def names() -> tuple[str, ...]:
    """Registered policy names, the default first."""
    return tuple(REGISTRY)


def info(name: str) -> PolicyInfo:
    return policy_class(name).info


def settings_of(name: str) -> frozenset[str]:
    """The names of policy ``name``'s own settings (its config's fields)."""
    return frozenset(f.name for f in fields(policy_class(name).config_cls))


def keep_settings(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``settings`` that policy ``name`` takes (a form or a command line
    offers some settings for every policy; each takes its own)."""
    own = settings_of(name)
    return {k: v for k, v in settings.items() if k in own}


def choices_help(sep: str = " ") -> str:
    """One line per policy, ``name: help``, for a selector's or an option's help."""
    strip = bool(sep.strip())  # "a; b": no full stop before the separator
    return sep.join(f"{n}: {c.info.help.rstrip('.') if strip else c.info.help}" for n, c in REGISTRY.items())


class _Colors(Mapping):
    """Each registered policy's chart colour by name, a live view (a policy registered
    later is in it)."""

    def __getitem__(self, name: str) -> str:
        if name not in REGISTRY:
            raise KeyError(name)
        return REGISTRY[name].info.color

    def __iter__(self) -> Iterator[str]:
        return iter(list(REGISTRY))

    def __len__(self) -> int:
        return len(REGISTRY)


#: policy name -> chart colour (what charts read as ROUTER_COLORS)
POLICY_COLORS: Mapping[str, str] = _Colors()


for _name, _cls in (("paper", PaperPolicy), ("guarded", GuardedPolicy), ("contextual", ContextualPolicy)):
    register(_name, _cls)
BUILTIN = frozenset(REGISTRY)
