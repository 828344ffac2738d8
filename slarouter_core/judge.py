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
  ``repr`` or in error messages. Standard library only (``urllib``).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field

import numpy as np


@dataclass(frozen=True)
class JudgeModel:
    """Simulated judge: flips true labels with the given error rates."""

    fpr: float
    fnr: float
    name: str = "judge"

    def __post_init__(self) -> None:
        for k in ("fpr", "fnr"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 <= v <= 1.0):
                raise ValueError(f"{k} must be a probability in [0, 1], got {v!r}")

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
class JudgeClient:
    """Client for an OpenAI-compatible chat-completions endpoint.

    ``base_url`` like ``https://api.example.com/v1`` (``/chat/completions`` is appended).
    ``api_key_env`` names the environment variable holding the key (read on each call,
    never stored). ``timeout`` seconds per attempt; ``retries`` extra attempts on network
    errors, timeouts, 429 and 5xx, with exponential ``backoff``.
    """

    base_url: str
    model: str
    api_key_env: str = "SLAROUTER_JUDGE_API_KEY"
    timeout: float = 30.0
    retries: int = 2
    backoff: float = 0.5
    temperature: float | None = None
    reasoning: bool = True
    extra_headers: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not re.match(r"^https?://", self.base_url):
            raise ValueError("base_url must start with http:// or https://")
        if not self.model:
            raise ValueError("model must be a non-empty string")
        if not (isinstance(self.timeout, (int, float)) and math.isfinite(self.timeout) and self.timeout > 0):
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout!r}")
        if not (isinstance(self.retries, int) and self.retries >= 0):
            raise ValueError(f"retries must be an integer >= 0, got {self.retries!r}")
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", self.api_key_env or ""):
            raise ValueError("api_key_env must be an environment variable name")

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def _key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None

    def judge(self, question: str, response: str, choices: str | None = None) -> int:
        """1 if the judge deems ``response`` correct, else 0. Raises :class:`JudgeError`."""
        body = {"model": self.model,
                "messages": build_messages(question, response, choices, self.reasoning)}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        data = json.dumps(body).encode()
        last = "no attempt made"
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            headers = {"Content-Type": "application/json", **self.extra_headers}
            key = self._key()
            if key:
                headers["Authorization"] = "Bearer " + key
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read()
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code} from {self.url}"
                if exc.code == 429 or exc.code >= 500:
                    continue
                raise JudgeError(last + (" (check the API key)" if exc.code in (401, 403) else "")) from None
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                if isinstance(reason, TimeoutError) or "timed out" in str(reason):
                    last = f"{self.url} did not answer within {self.timeout:g} s"
                else:
                    last = f"cannot reach {self.url}: {type(reason).__name__}"
                continue
            return parse_label(_content(raw))
        raise JudgeError(f"judge failed after {self.retries + 1} attempt(s): {last}")


def _content(raw: bytes) -> str:
    try:
        obj = json.loads(raw)
        content = obj["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise JudgeError("endpoint answer is not an OpenAI-style chat completion") from None
    if not isinstance(content, str):
        raise JudgeError("chat completion has no text content")
    return content
