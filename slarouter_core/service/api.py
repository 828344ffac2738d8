"""Request models and strict JSON for the service's HTTP layer (pydantic, as FastAPI uses).

Chat requests keep every field the client sent (it goes on to the backend untouched);
the fields the service reads are checked: a bad one is a 422 naming it, never a 500.
JSON is parsed strictly: ``NaN``/``Infinity`` are refused, and so are numbers with more
digits than Python converts and nesting deeper than the parser's recursion limit.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError, \
    model_validator

from .records import BadJSON, no_json_constant

MAX_TOKENS_LIMIT = 10_000_000


def strict_json(raw: bytes) -> Any:
    """Parse ``raw`` as UTF-8 JSON, refusing NaN/Infinity, absurd numbers and deep nesting."""
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=no_json_constant)
    except BadJSON:
        raise
    except UnicodeDecodeError:
        raise BadJSON("the body is not UTF-8") from None
    except RecursionError:
        raise BadJSON("the body is nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and int conversion over the digit limit
        msg = str(exc)
        if "digits" in msg:
            raise BadJSON("a number in the body has too many digits") from None
        raise BadJSON(f"the body is not JSON ({msg[:120]})") from None


def dumps(obj: Any) -> bytes:
    """JSON for the wire: ASCII (lone surrogates survive as escapes), no NaN."""
    return json.dumps(obj, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: StrictStr
    text: StrictStr | None = None

    @model_validator(mode="after")
    def _text_part_has_text(self) -> "ContentPart":
        if self.type == "text" and self.text is None:
            raise ValueError("a text content part needs a string 'text'")
        return self


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: StrictStr
    content: StrictStr | list[ContentPart] | None = None


Number = StrictInt | StrictFloat


class ChatRequest(BaseModel):
    """The fields of an OpenAI chat-completions request that the service reads."""

    model_config = ConfigDict(extra="allow")
    messages: list[Message] = Field(min_length=1)
    stream: StrictBool | None = None
    stream_options: dict | None = None
    max_tokens: StrictInt | None = Field(None, ge=1, le=MAX_TOKENS_LIMIT)
    max_completion_tokens: StrictInt | None = Field(None, ge=1, le=MAX_TOKENS_LIMIT)
    temperature: Number | None = Field(None, ge=0, le=2, allow_inf_nan=False)
    top_p: Number | None = Field(None, ge=0, le=1, allow_inf_nan=False)
    n: StrictInt | None = Field(None, ge=1, le=1)

    @property
    def user_text(self) -> str | None:
        """The text of the last user message (string content or its text parts)."""
        for m in reversed(self.messages):
            if m.role == "user":
                if isinstance(m.content, str):
                    return m.content
                if isinstance(m.content, list):
                    return " ".join(p.text or "" for p in m.content if p.type == "text")
                return None
        return None

    @property
    def prompt_chars(self) -> int:
        total = 0
        for m in self.messages:
            if isinstance(m.content, str):
                total += len(m.content)
            elif isinstance(m.content, list):
                total += sum(len(p.text or "") for p in m.content)
        return total

    @property
    def token_limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


class FeedbackRequest(BaseModel):
    """``{"request_id": ..., "satisfied": true|false}`` and nothing else."""

    model_config = ConfigDict(extra="forbid")
    request_id: StrictStr = Field(min_length=1, max_length=200)
    satisfied: StrictBool


def describe(exc: Any) -> str:
    """A validation error (pydantic's, or FastAPI's ``RequestValidationError``) as one line
    naming each bad field (never echoing the input)."""
    errors = exc.errors(include_input=False, include_url=False) if isinstance(exc, ValidationError) else exc.errors()
    parts = []
    for e in errors[:5]:
        loc = ".".join(str(x) for x in e.get("loc", ())) or "body"
        parts.append(f"{loc}: {e.get('msg', 'invalid')}")
    more = len(errors) - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


