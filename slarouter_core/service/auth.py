"""API keys of the routing service (Bearer tokens), LiteLLM-style.

Keys come from the environment variable ``SLAROUTER_MASTER_KEY`` (one key, like
LiteLLM's ``LITELLM_MASTER_KEY``) and/or a keys file (``--api-keys-file``: one key per
line, ``#`` comments), never from the command line (it shows in ``ps``). Only SHA-256
digests are kept; a presented key is compared with :func:`hmac.compare_digest` against
every digest (constant time per key, and the same work whichever key matches). A key's
public id (the first 12 hex digits of its digest) names the caller, so thumbs are taken
only from the key that made the request.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass
from pathlib import Path

MASTER_KEY_ENV = "SLAROUTER_MASTER_KEY"
#: a key shorter than this is refused: it could be guessed
MIN_KEY_LENGTH = 16


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True)
class ApiKeys:
    """The accepted keys as digests (validated on construction)."""

    digests: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if not self.digests:
            raise ValueError("no API keys: set SLAROUTER_MASTER_KEY or give a keys file")
        if any(not isinstance(d, bytes) or len(d) != 32 for d in self.digests):
            raise ValueError("digests must be 32-byte SHA-256 values")

    @classmethod
    def from_keys(cls, keys: list[str] | tuple[str, ...]) -> "ApiKeys":
        bad = [i for i, k in enumerate(keys, 1) if not isinstance(k, str) or len(k.strip()) < MIN_KEY_LENGTH
               or any(c.isspace() for c in k.strip())]
        if bad:
            # never echo a key
            raise ValueError(f"API key(s) number {', '.join(map(str, bad))} must be at least "
                             f"{MIN_KEY_LENGTH} characters without spaces")
        return cls(tuple(dict.fromkeys(_digest(k.strip()) for k in keys)))

    @classmethod
    def load(cls, keys_file: str | Path | None = None, environ: dict | None = None) -> "ApiKeys | None":
        """Keys from ``SLAROUTER_MASTER_KEY`` and ``keys_file``; None if neither gives one."""
        env = os.environ if environ is None else environ
        keys = []
        if env.get(MASTER_KEY_ENV):
            keys.append(env[MASTER_KEY_ENV])
        if keys_file is not None:
            p = Path(keys_file)
            try:
                lines = p.read_text().splitlines()
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"{p}: cannot read the API keys file ({exc})") from None
            keys += [s.strip() for s in lines if s.strip() and not s.strip().startswith("#")]
            if not keys:
                raise ValueError(f"{p}: the API keys file holds no key")
        return cls.from_keys(keys) if keys else None

    def identify(self, presented: str | None) -> str | None:
        """The caller's key id if ``presented`` is an accepted key, else None."""
        if not presented:
            return None
        d = _digest(presented)
        found = None
        for ref in self.digests:  # no early exit: the same work for every key
            if hmac.compare_digest(d, ref):
                found = ref
        return None if found is None else found.hex()[:12]


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None
