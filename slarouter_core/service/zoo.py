"""The model zoo of the routing service: a TOML file naming each OpenAI-compatible backend.

```toml
[[models]]
name = "small"                         # what clients see in the response's `model` field
base_url = "http://127.0.0.1:9001/v1"  # OpenAI-compatible API root (…/chat/completions is appended)
model = "llama-3.2-1b"                 # the backend's own model name
api_key_env = "SMALL_API_KEY"          # optional: the *name* of the variable holding the key
price_per_1k_input = 0.0001            # price per 1,000 prompt tokens
price_per_1k_output = 0.0002           # price per 1,000 completion tokens
# price_per_request = 0.001            # and/or a flat price per request
timeout_s = 60                         # optional, per call
expected_output_tokens = 256           # optional: the prior for the cost estimate
accuracy = 0.62                        # optional: the model's stated accuracy (a leaderboard's, your
                                       # own evaluation's); given for every model or none
```

Stated accuracies are the prior of each model's level for a policy that takes one (the
contextual policy's ``stated_levels``, worth ``stated_weight`` labels): it starts from them
instead of knowing nothing, and the thumbs overrule them as they come.

An optional LLM judge reads a share ``budget`` of the answers, drawn at the reply whatever
their thumbs (run after the reply is sent; a failed call only means no label); with
``calibrate`` on, a rated answer outside that share is read too when its thumbs come, and
that verdict only calibrates the judge against the thumbs (it costs a call, counted)::

```toml
[judge]
base_url = "http://127.0.0.1:9009/v1"  # OpenAI-compatible
model = "judge-model"
api_key_env = "JUDGE_API_KEY"          # optional
budget = 1.0                           # share of answered requests sent to the judge (drawn at the reply)
delay_s = 0                            # wait this long after the reply (paper mode: thumbs given by then win)
max_concurrent = 4                     # judge calls in flight at most (more are skipped)
calibrate = true                       # also judge rated answers outside the budget's draw, to calibrate the judge
calibrate_within_s = 3600              # ... if their thumbs come this soon after the reply (answers kept till then)
price_per_request = 0.0                # optional prices, counted in the service's cost
price_per_1k_input = 0.0
price_per_1k_output = 0.0
timeout_s = 30
```

API keys are never read from the file, stored, logged or shown: only the environment
variable's name is kept, and its value is read at each call.

Models are routed in ascending order of their price for a nominal request of
:data:`NOMINAL_INPUT_TOKENS` prompt and :data:`NOMINAL_OUTPUT_TOKENS` completion tokens
(ties keep the file order): the router's model index 0 is the cheapest.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..validation import Bool, Checked, Int, Range, param

NOMINAL_INPUT_TOKENS = 500
NOMINAL_OUTPUT_TOKENS = 250
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FIELDS = {"name", "base_url", "model", "api_key_env", "price_per_1k_input", "price_per_1k_output",
           "price_per_request", "timeout_s", "expected_output_tokens", "accuracy"}


_JUDGE_FIELDS = {"base_url", "model", "api_key_env", "budget", "delay_s", "max_concurrent", "price_per_request",
                 "price_per_1k_input", "price_per_1k_output", "timeout_s", "calibrate", "calibrate_within_s"}


class ZooError(ValueError):
    """A zoo file that cannot be used; ``problems`` lists every problem as a sentence."""

    def __init__(self, problems: list[str], source: str = "zoo"):
        self.problems = list(problems)
        super().__init__(f"{source}: " + "; ".join(self.problems))


PRICE = Range(low=0.0, to_float=True)
POSITIVE = Range(low=0.0, low_open=True, to_float=True)


@dataclass(frozen=True)
class ZooModel(Checked):
    """One backend. Prices are in the zoo's currency (e.g. US dollars)."""

    name: str
    base_url: str
    model: str
    api_key_env: str | None = None
    price_per_1k_input: float = param(0.0, PRICE)
    price_per_1k_output: float = param(0.0, PRICE)
    price_per_request: float = param(0.0, PRICE)
    timeout_s: float = param(60.0, POSITIVE)
    expected_output_tokens: float = param(256.0, POSITIVE)
    accuracy: float | None = param(None, Range(low=0.0, high=1.0, optional=True, to_float=True))

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("name must be a non-empty string")
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("model (the backend's model name) must be a non-empty string")
        if not isinstance(self.base_url, str):
            raise ValueError("base_url must be a string such as 'http://127.0.0.1:8001/v1'")
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http(s) URL with a host, got {self.base_url!r}")
        if parts.query or parts.fragment:
            raise ValueError(f"base_url must not carry a query or fragment, got {self.base_url!r}")
        object.__setattr__(self, "base_url", self.base_url.rstrip("/"))
        if self.api_key_env is not None:
            # never echo the value: it may be a pasted key
            if not isinstance(self.api_key_env, str) or not _ENV_NAME.match(self.api_key_env):
                raise ValueError("api_key_env must be the NAME of an environment variable (letters, digits, "
                                 "underscores), not the key itself")
        super().__post_init__()  # prices and positive numbers, as floats

    def price(self, prompt_tokens: float, completion_tokens: float) -> float:
        """Price of one call with these token counts."""
        return (self.price_per_request + self.price_per_1k_input * prompt_tokens / 1000.0
                + self.price_per_1k_output * completion_tokens / 1000.0)

    @property
    def nominal_price(self) -> float:
        return self.price(NOMINAL_INPUT_TOKENS, NOMINAL_OUTPUT_TOKENS)

    @property
    def chat_url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def auth_headers(self) -> dict[str, str]:
        """The Authorization header, read from the environment at each call (never kept)."""
        if self.api_key_env is None:
            return {}
        key = os.environ.get(self.api_key_env)
        return {"Authorization": f"Bearer {key}"} if key else {}

    def public(self) -> dict:
        """What may be shown: everything but the key (only whether its variable is set)."""
        return {"name": self.name, "base_url": self.base_url, "model": self.model,
                "api_key_env": self.api_key_env,
                "api_key_set": None if self.api_key_env is None else bool(os.environ.get(self.api_key_env)),
                "price_per_1k_input": self.price_per_1k_input, "price_per_1k_output": self.price_per_1k_output,
                "price_per_request": self.price_per_request, "timeout_s": self.timeout_s,
                "accuracy": self.accuracy}


@dataclass(frozen=True)
class JudgeEntry(Checked):
    """The zoo's optional LLM judge (see the module docstring)."""

    base_url: str
    model: str
    api_key_env: str | None = None
    budget: float = param(1.0, Range(low=0.0, high=1.0, to_float=True))
    delay_s: float = param(0.0, Range(low=0.0, high=3600.0, to_float=True))
    max_concurrent: int = param(4, Int(low=1, high=256))
    calibrate: bool = param(True, Bool())
    calibrate_within_s: float = param(3600.0, Range(low=0.0, high=86400.0, to_float=True))
    price_per_request: float = 0.0
    price_per_1k_input: float = 0.0
    price_per_1k_output: float = 0.0
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        # the same URL, name, key, price and timeout rules as a backend (and its normalised values)
        m = ZooModel("judge", self.base_url, self.model, self.api_key_env, self.price_per_1k_input,
                     self.price_per_1k_output, self.price_per_request, self.timeout_s)
        for f in ("base_url", "price_per_1k_input", "price_per_1k_output", "price_per_request", "timeout_s"):
            object.__setattr__(self, f, getattr(m, f))
        super().__post_init__()

    #: price of one judge call with these token counts (the backends' formula)
    price = ZooModel.price

    def client(self):
        """The HTTP client (:class:`slarouter_core.judge.JudgeClient`) for this judge."""
        from ..judge import JudgeClient

        return JudgeClient(self.base_url, self.model, api_key_env=self.api_key_env or "SLAROUTER_JUDGE_API_KEY",
                           timeout=self.timeout_s, retries=1, backoff=0.2, deadline=2 * self.timeout_s)

    def public(self) -> dict:
        return {"base_url": self.base_url, "model": self.model, "api_key_env": self.api_key_env,
                "budget": self.budget, "delay_s": self.delay_s, "max_concurrent": self.max_concurrent,
                "calibrate": self.calibrate, "calibrate_within_s": self.calibrate_within_s}


@dataclass(frozen=True)
class Zoo:
    """Validated backends, cheapest first (see the module docstring)."""

    models: tuple[ZooModel, ...]
    judge: JudgeEntry | None = None

    def __post_init__(self) -> None:
        models = tuple(self.models)
        if len(models) < 2:
            raise ZooError([f"a zoo needs at least two models, got {len(models)}"])
        names = [m.name for m in models]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ZooError([f"model names must be unique; repeated: {', '.join(dup)}"])
        stated = [m.name for m in models if m.accuracy is not None]
        if stated and len(stated) < len(models):
            raise ZooError([f"accuracy is given for {', '.join(stated)} only: give it for every model or none"])
        order = sorted(range(len(models)), key=lambda i: (models[i].nominal_price, i))
        object.__setattr__(self, "models", tuple(models[i] for i in order))

    @property
    def stated_levels(self) -> tuple[float, ...]:
        """Every model's stated accuracy in routing order, or () where the file gives none."""
        if any(m.accuracy is None for m in self.models):
            return ()
        return tuple(float(m.accuracy) for m in self.models)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.models)

    def __len__(self) -> int:
        return len(self.models)

    def check_environment(self) -> None:
        """Every named API-key variable is set (names only in the error, never values)."""
        missing = [f"model {m.name!r}: environment variable {m.api_key_env} is not set"
                   for m in self.models if m.api_key_env and not os.environ.get(m.api_key_env)]
        j = self.judge
        if j is not None and j.api_key_env and not os.environ.get(j.api_key_env):
            missing.append(f"judge: environment variable {j.api_key_env} is not set")
        if missing:
            raise ZooError(missing, "API keys")


def parse_zoo(doc: dict, source: str = "zoo") -> Zoo:
    """A zoo from a parsed TOML document; every problem is listed in one :class:`ZooError`."""
    problems: list[str] = []
    extra = sorted(set(doc) - {"models", "judge"})
    if extra:
        problems.append(f"unknown top-level key(s) {', '.join(extra)} (only [[models]] and [judge] are read)")
    judge = None
    if "judge" in doc:
        j = doc["judge"]
        if not isinstance(j, dict):
            problems.append("judge must be a table ([judge])")
        elif unknown := sorted(set(j) - _JUDGE_FIELDS):
            problems.append(f"judge: unknown key(s) {', '.join(unknown)} "
                            f"(allowed: {', '.join(sorted(_JUDGE_FIELDS))})")
        elif not {"base_url", "model"} <= set(j):
            problems.append("judge: missing base_url or model")
        else:
            try:
                judge = JudgeEntry(**j)
            except ValueError as exc:
                problems.append(f"judge: {exc}")
    entries = doc.get("models")
    if not isinstance(entries, list) or not entries:
        raise ZooError(problems + ["no [[models]] tables: name at least two models"], source)
    models = []
    for i, entry in enumerate(entries, start=1):
        label = f"model #{i}" + (f" ({entry.get('name')!r})" if isinstance(entry, dict) and
                                 isinstance(entry.get("name"), str) else "")
        if not isinstance(entry, dict):
            problems.append(f"{label} is not a table")
            continue
        unknown = sorted(set(entry) - _FIELDS)
        if unknown:
            problems.append(f"{label}: unknown key(s) {', '.join(unknown)} "
                            f"(allowed: {', '.join(sorted(_FIELDS))})")
            continue
        missing = [k for k in ("name", "base_url", "model") if k not in entry]
        if missing:
            problems.append(f"{label}: missing {', '.join(missing)}")
            continue
        if not any(k in entry for k in ("price_per_1k_input", "price_per_1k_output", "price_per_request")):
            problems.append(f"{label}: give a price: price_per_1k_input and price_per_1k_output, "
                            "or price_per_request (0 for a free model)")
            continue
        try:
            models.append(ZooModel(**entry))
        except ValueError as exc:
            problems.append(f"{label}: {exc}")
    if problems:
        raise ZooError(problems, source)
    try:
        return Zoo(tuple(models), judge)
    except ZooError as exc:
        raise ZooError(exc.problems, source) from None


def load_zoo(path: str | Path) -> Zoo:
    """Read and validate a zoo TOML file."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ZooError([f"cannot read the file ({exc.strerror or exc})"], str(p)) from None
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ZooError([f"not valid TOML ({exc})"], str(p)) from None
    return parse_zoo(doc, str(p))
