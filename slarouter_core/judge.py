"""An LLM judge as a feedback source: a simulated one (given error rates) and a real client.

* :class:`JudgeModel` -- a simulated judge with false-positive rate ``fpr`` (says 1 when the
  truth is 0) and false-negative rate ``fnr`` (says 0 when the truth is 1). Its agreement
  with the truth follows from the base rate: ``1 - fpr * P(0) - fnr * P(1)``. Presets with
  the paper's measured rates (Appendix, "Judge Feedback Alignment", reasoning enabled):
  ``ACPBENCH_JUDGE`` (94.4% agreement, 6.6% FPR, 4.9% FNR) and ``GPQA_JUDGE`` (87.9%,
  12.9%, 10.9%). Used by :class:`slarouter_core.feedback.FeedbackConfig` (``judge=``).
* :class:`JudgeClient` -- any OpenAI-compatible ``/chat/completions`` endpoint, prompted
  with the paper's template (Listing 1) and parsed for ``{"label": 0|1}``. The API key is
  read from an environment variable at call time and never stored, logged, shown in
  ``repr`` or in error messages. httpx for HTTP, tenacity for the retries.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import json
import os
import re
import time
import urllib.parse
from dataclasses import asdict, dataclass, field

import numpy as np

from .validation import Bool, Checked, Int, Range, param


@dataclass(frozen=True)
class JudgeModel(Checked):
    """Simulated judge: flips true labels with the given error rates."""

    fpr: float = param(check=Range(low=0.0, high=1.0))
    fnr: float = param(check=Range(low=0.0, high=1.0))
    name: str = "judge"

    def agreement(self, base_rate: float) -> float:
        """Expected agreement with the truth when a share ``base_rate`` of labels are 1."""
        return 1.0 - self.fpr * (1.0 - base_rate) - self.fnr * base_rate

    def corrupt(self, labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The judge's verdicts for 0/1 ``labels`` (any shape), int8."""
        y = np.asarray(labels)
        u = rng.random(y.shape)
        flip = np.where(y > 0, u < self.fnr, u < self.fpr)
        return np.where(flip, 1 - y, y).astype(np.int8)

    def to_dict(self) -> dict:
        return asdict(self)


ACPBENCH_JUDGE = JudgeModel(fpr=0.066, fnr=0.049, name="acpbench-gpt5.4-reasoning")
GPQA_JUDGE = JudgeModel(fpr=0.129, fnr=0.109, name="gpqa-gpt5.4-reasoning")
JUDGE_PRESETS = {"acpbench": ACPBENCH_JUDGE, "gpqa": GPQA_JUDGE}


# -- prompt (paper, Appendix: "GPT-5.4 judge prompt template") ----------------------------
SYSTEM_HEAD = "You are an expert evaluator for AI benchmark answers."
SYSTEM_CHOICES = """This question has a fixed set of labeled answer choices - the model must select exactly one.

Follow this process in order:
1. Read the question and all answer choices.
2. Independently determine which choice is correct - do this BEFORE reading the model's response.
3. Compare: does the model's final answer match the correct choice?"""
SYSTEM_OPEN = """This question requires a specific answer (a number, yes/no, word, or sentence completion) - there are no labeled choices.

Follow this process in order:
1. Read the question and any provided passage or context.
2. Independently determine the correct answer using your knowledge and reasoning - do this BEFORE reading the model's response.
   - Math: solve step by step and identify the final numerical answer.
   - Yes/No: derive from the passage or your knowledge.
   - Word/phrase prediction: identify the correct word or phrase from context.
   - Fill-in-the-blank: determine which completion is logically and grammatically correct.
3. Compare: does the model's answer match the correct answer?
   - Numbers: treat equivalent forms as equal ("18", "$18", "18.0" all match 18).
   - Yes/No: treat "True"/"1" as yes and "False"/"0" as no.
   - Words/phrases: accept exact match or an unambiguous paraphrase."""
SYSTEM_SCORING = """Scoring:
- 1 (Correct): Model's final answer matches the correct answer.
- 0 (Incorrect): Model's answer is wrong, ambiguous, or the model failed to commit."""


def build_messages(question: str, response: str, choices: str | None = None,
                   reasoning: bool = True) -> list[dict]:
    """Chat messages for one judgement, following the paper's template.

    The template's conditional blocks (lost in the paper's typesetting) are: the
    multiple-choice or the open-answer instructions, the answer choices when given, and
    the "think first" line when the judge reasons.
    """
    system = "\n\n".join([SYSTEM_HEAD, SYSTEM_CHOICES if choices else SYSTEM_OPEN, SYSTEM_SCORING])
    parts = []
    if reasoning:
        parts.append("Think through the correct answer first, then evaluate the model.")
    parts.append(f"Question:\n{question}")
    if choices:
        parts.append(f"Answer choices:\n{choices}")
    parts.append(f"Model response to evaluate:\n{response}")
    parts.append('Respond ONLY with valid JSON:\n{"label": <0 or 1>}')
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


class JudgeError(RuntimeError):
    """The judge endpoint could not be reached or gave no usable verdict."""


_LABEL_RE = re.compile(r"\{[^{}]*\"label\"[^{}]*\}", re.S)


def parse_label(text: str) -> int:
    """The 0/1 label from a judge answer ``{"label": 0|1}`` (a JSON object, possibly in a
    code fence or after reasoning text). Raises :class:`JudgeError` otherwise."""
    if not isinstance(text, str):
        raise JudgeError("judge answer is not text")
    candidates = [text.strip()] + _LABEL_RE.findall(text)
    for c in candidates:
        c = c.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
        try:
            obj = json.loads(c)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(obj, dict) and "label" in obj:
            v = obj["label"]
            if isinstance(v, bool):
                break
            if isinstance(v, (int, float)) and v in (0, 1):
                return int(v)
            if isinstance(v, str) and v.strip() in ("0", "1"):
                return int(v.strip())
            break
    snippet = text[:80].replace("\n", " ")
    raise JudgeError(f'judge answer has no {{"label": 0|1}}: {snippet!r}')


@dataclass(frozen=True)
class JudgeResult:
    """One verdict and the token usage the judge reported (None if it reported none)."""

    label: int
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Retryable(Exception):
    """An attempt that failed in a way worth another try; ``wait`` is a Retry-After."""

    def __init__(self, message: str, wait: float = 0.0):
        super().__init__(message)
        self.wait = wait


@dataclass(frozen=True)
class JudgeClient(Checked):
    """Client for an OpenAI-compatible chat-completions endpoint (httpx + tenacity).

    ``base_url`` like ``https://api.example.com/v1`` (``/chat/completions`` is appended).
    ``api_key_env`` names the environment variable holding the key (read on each call,
    never stored). ``timeout`` seconds for each whole attempt (connect, send, headers and
    body together, enforced by ``asyncio.timeout``: a server trickling its answer cannot
    stretch it); ``deadline`` optional seconds for the whole call, retries and waits
    included. ``retries`` extra attempts on network errors, timeouts, broken replies, 429
    and 5xx, with exponential ``backoff``; a 429's ``Retry-After`` is honoured up to
    ``max_retry_after`` seconds (a longer one fails at once). Redirects are not followed,
    except a 307/308 (which keeps the method) to the same scheme, host and port: the key
    never goes to another origin. Credentials written into ``base_url`` are redacted from
    ``repr`` and error messages. :meth:`judge` is synchronous; :meth:`averdict` is the
    same call for an event loop (the routing service), with the reported token usage.
    """

    base_url: str
    model: str
    api_key_env: str = "SLAROUTER_JUDGE_API_KEY"
    timeout: float = param(30.0, Range(low=0.0, low_open=True))
    retries: int = param(2, Int(low=0))
    backoff: float = param(0.5, Range(low=0.0))
    temperature: float | None = param(None, Range(low=0.0, optional=True))
    reasoning: bool = param(True, Bool())
    extra_headers: dict = field(default_factory=dict, repr=False)
    max_retry_after: float = param(60.0, Range(low=0.0))
    deadline: float | None = param(None, Range(low=0.0, optional=True))

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not re.match(r"^https?://", self.base_url):
            raise ValueError("base_url must start with http:// or https://")
        if not urllib.parse.urlsplit(self.base_url).hostname:
            raise ValueError(f"base_url has no host: {_redact(self.base_url)!r}")
        if not self.model:
            raise ValueError("model must be a non-empty string")
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", self.api_key_env or ""):
            raise ValueError("api_key_env must be an environment variable name")
        super().__post_init__()  # the numbers (seconds, attempts) and switches

    def __repr__(self) -> str:
        return (f"JudgeClient(base_url={_redact(self.base_url)!r}, model={self.model!r}, "
                f"api_key_env={self.api_key_env!r}, timeout={self.timeout!r}, retries={self.retries!r})")

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def _key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None

    def judge(self, question: str, response: str, choices: str | None = None) -> int:
        """1 if the judge deems ``response`` correct, else 0. Raises :class:`JudgeError`."""
        coro = self.averdict(question, response, choices)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # the usual case: no event loop in this thread
            return asyncio.run(coro).label
        # called from inside an event loop (a notebook): run the call on a thread of its own
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, coro).result().label

    async def averdict(self, question: str, response: str, choices: str | None = None,
                       client: "httpx.AsyncClient | None" = None) -> JudgeResult:
        """The verdict with its usage, in the caller's event loop (``client``: reuse one)."""
        import httpx
        from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

        body = {"model": self.model, "messages": build_messages(question, response, choices, self.reasoning)}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        data = json.dumps(body).encode()
        shown = _redact(self.url)
        call_end = None if self.deadline is None else time.monotonic() + self.deadline
        notes: list[str] = []

        def wait(rs) -> float:  # exponential backoff, or the server's Retry-After if longer
            exc = rs.outcome.exception()
            return max(self.backoff * 2 ** (rs.attempt_number - 1), getattr(exc, "wait", 0.0))

        def out_of_time(rs) -> bool:
            if call_end is not None and time.monotonic() + rs.upcoming_sleep >= call_end:
                notes.append(f"; the call's {self.deadline:g} s deadline left no time to retry")
                return True
            return False

        own = client is None
        http = client if client is not None else httpx.AsyncClient(follow_redirects=False)
        tried = 0
        try:
            retrying = AsyncRetrying(stop=stop_after_attempt(self.retries + 1) | out_of_time, wait=wait,
                                     retry=retry_if_exception_type(_Retryable), reraise=True)
            async for attempt in retrying:
                with attempt:
                    tried += 1
                    end = time.monotonic() + self.timeout
                    if call_end is not None:
                        end = min(end, call_end)
                    return await self._attempt(http, data, shown, end)
        except _Retryable as exc:
            raise JudgeError(f"judge failed after {tried} attempt(s): {exc}{''.join(notes)}") from None
        finally:
            if own:
                await http.aclose()
        raise JudgeError("judge made no attempt")  # pragma: no cover - tenacity always tries once

    async def _attempt(self, http, data: bytes, shown: str, end: float) -> JudgeResult:
        """One attempt (redirects within the same origin included), done by ``end``."""
        import httpx

        headers = {"Content-Type": "application/json", **self.extra_headers}
        key = self._key()
        if key:
            headers["Authorization"] = "Bearer " + key
        url = self.url
        try:
            async with asyncio.timeout(max(0.0, end - time.monotonic())):
                for _ in range(_MAX_REDIRECTS + 1):
                    async with http.stream("POST", url, content=data, headers=headers,
                                           timeout=httpx.Timeout(self.timeout)) as resp:
                        raw = bytearray()
                        async for chunk in resp.aiter_raw():
                            raw += chunk
                            if len(raw) > _MAX_BODY:
                                raise _Retryable(f"broken reply from {shown}: larger than 16 MiB")
                    where = resp.headers.get("Location")
                    if resp.status_code in (307, 308) and where:
                        target = urllib.parse.urljoin(url, where)
                        if _origin(urllib.parse.urlsplit(target)) == _origin(urllib.parse.urlsplit(url)):
                            url = target
                            continue
                    break
                else:
                    raise _Retryable(f"broken reply from {shown}: too many redirects")
        except (TimeoutError, httpx.TimeoutException):
            raise _Retryable(f"{shown} did not answer within {self.timeout:g} s") from None
        except httpx.RemoteProtocolError as exc:
            raise _Retryable(f"broken reply from {shown}: {_protocol_error(exc)}") from None
        except httpx.HTTPError as exc:
            raise _Retryable(f"cannot reach {shown}: {type(exc).__name__}") from None
        status = resp.status_code
        if 300 <= status < 400:
            where = resp.headers.get("Location")
            raise JudgeError(f"HTTP {status} from {shown} redirects to "
                             f"{_redact(urllib.parse.urljoin(url, where)) if where else 'nowhere'}: "
                             "not followed (a redirect must stay on the same scheme, host and port and "
                             "keep the method: 307 or 308); set base_url to the final address")
        if status == 429 or status >= 500:
            last = f"HTTP {status} from {shown}"
            after = _retry_after(resp.headers.get("Retry-After")) if status == 429 else None
            if after is not None and after > self.max_retry_after:
                raise JudgeError(f"{last}: Retry-After asks to wait {after:g} s, more than "
                                 f"max_retry_after ({self.max_retry_after:g} s)")
            raise _Retryable(last, after or 0.0)
        if status >= 400:
            raise JudgeError(f"HTTP {status} from {shown}" + (" (check the API key)" if status in (401, 403) else ""))
        if status != 200:
            raise JudgeError(f"HTTP {status} from {shown}: expected 200 with a chat completion")
        content, usage = _content(bytes(raw))
        return JudgeResult(parse_label(content), *usage)


_MAX_REDIRECTS = 5
_MAX_BODY = 16 << 20


def _origin(parts: urllib.parse.SplitResult) -> tuple:
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or (443 if scheme == "https" else 80)


def _protocol_error(exc: Exception) -> str:
    """A broken reply in the words of :mod:`http.client` (what users search for)."""
    msg = str(exc).lower()
    if "incomplete" in msg or "complete message body" in msg or "expected" in msg:
        return "IncompleteRead"
    if "without sending" in msg or "disconnected" in msg:
        return "RemoteDisconnected"
    return f"BadStatusLine ({str(exc)[:80]})"


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        secs = float(int(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        secs = (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    return max(0.0, secs)


def _redact(url: str) -> str:
    """``url`` without credentials: user:password and query values are replaced by ***."""
    try:
        parts = urllib.parse.urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = "***@" + netloc.rsplit("@", 1)[1]
        query = parts.query
        if query:
            query = "&".join(q.split("=", 1)[0] + "=***" if "=" in q else "***" for q in query.split("&"))
        return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return "<unparseable url>"


def _content(raw: bytes) -> tuple[str, tuple[int | None, int | None]]:
    """The answer's text and its (prompt, completion) token usage (None where not given)."""
    try:
        obj = json.loads(raw)
        content = obj["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise JudgeError("endpoint answer is not an OpenAI-style chat completion") from None
    if not isinstance(content, str):
        raise JudgeError("chat completion has no text content")
    usage = obj.get("usage") if isinstance(obj, dict) else None
    counts = []
    for k in ("prompt_tokens", "completion_tokens"):
        v = usage.get(k) if isinstance(usage, dict) else None
        counts.append(v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10**9 else None)
    return content, (counts[0], counts[1])
