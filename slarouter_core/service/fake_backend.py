"""A tiny OpenAI-compatible fake model server, for examples, tests and benchmarks.

    python -m slarouter_core.service.fake_backend --name small --port 9001 --latency-ms 20

It answers ``POST /v1/chat/completions`` (streaming or not) after ``latency_ms`` with a
canned answer of ``completion_tokens`` words and reports token usage (prompt tokens =
words in the messages). ``fail`` makes it answer HTTP 500 (``"error"``), never answer
(``"hang"``), or misbehave as real servers do (the other :data:`FAIL_MODES`: broken usage,
a body that is not a chat completion, a stream that breaks off or stalls, a client error);
``POST /control {"fail": ...}`` changes that while it runs, and ``GET /stats`` counts the
calls. Listens on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ..validation import Checked, Choice, Int, Range, param

FAIL_MODES = ("none", "error", "hang", "negative_usage", "text_usage", "nan_usage", "list_body", "null_body",
              "bad_bytes", "drop_stream", "hang_stream", "client_400", "client_429")


@dataclass(frozen=True)
class FakeSpec(Checked):
    name: str = "fake"
    latency_ms: float = param(0.0, Range(low=0.0))
    completion_tokens: int = param(16, Int(low=1))
    fail: str = param("none", Choice(FAIL_MODES))


def create_fake_app(spec: FakeSpec) -> FastAPI:
    app = FastAPI(title=f"fake model {spec.name}")
    state = {"fail": spec.fail, "calls": 0, "authorization": []}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        state["calls"] += 1
        state["authorization"].append(request.headers.get("authorization") is not None)
        if state["fail"] == "hang":
            await asyncio.sleep(3600)
        if spec.latency_ms:
            await asyncio.sleep(spec.latency_ms / 1000.0)
        fail = state["fail"]
        if fail == "error":
            return JSONResponse({"error": {"message": f"{spec.name} is failing on purpose"}}, status_code=500)
        if fail == "client_400":
            return JSONResponse({"error": {"message": "context length exceeded"}}, status_code=400)
        if fail == "client_429":
            return JSONResponse({"error": {"message": "rate limit reached"}}, status_code=429,
                                headers={"Retry-After": "7"})
        if fail in ("list_body", "null_body", "bad_bytes"):
            raw = {"list_body": b"[1, 2]", "null_body": b"null", "bad_bytes": b'{"choices": [\xff\xfe]}'}[fail]
            return Response(raw, media_type="application/json")
        msgs = body.get("messages") or []
        prompt = sum(len(str(m.get("content", "")).split()) for m in msgs if isinstance(m, dict))
        n = spec.completion_tokens
        if isinstance(body.get("max_tokens"), int):
            n = max(1, min(n, body["max_tokens"]))
        words = [f"{spec.name}"] + ["word"] * (n - 1)
        usage = {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}
        if fail == "negative_usage":
            usage = {"prompt_tokens": -1000, "completion_tokens": -5000, "total_tokens": -6000}
        elif fail == "text_usage":
            usage = {"prompt_tokens": "many", "completion_tokens": "lots"}
        cid, created, model = f"chatcmpl-{uuid.uuid4().hex[:12]}", int(time.time()), body.get("model", spec.name)
        if not body.get("stream"):
            doc = {"id": cid, "object": "chat.completion", "created": created, "model": model,
                   "choices": [{"index": 0, "finish_reason": "stop",
                                "message": {"role": "assistant", "content": " ".join(words)}}],
                   "usage": usage}
            if fail == "nan_usage":
                return Response(json.dumps({**doc, "usage": {"prompt_tokens": float("nan"),
                                                             "completion_tokens": 3}}).encode(),
                                media_type="application/json")
            return doc
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        async def events():
            base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}
            for i, w in enumerate(words):
                delta = {"role": "assistant", "content": w} if i == 0 else {"content": " " + w}
                yield f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': delta, 'finish_reason': None}]})}\n\n"
                if i == 1 and fail == "drop_stream":
                    raise RuntimeError("the fake backend drops the stream on purpose")
                if i == 1 and fail == "hang_stream":
                    await asyncio.sleep(3600)
            yield f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'stop'}]})}\n\n"
            if include_usage:
                yield f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/control")
    async def control(request: Request):
        body = await request.json()
        if body.get("fail") not in FAIL_MODES:
            return JSONResponse({"error": f"fail must be one of {', '.join(FAIL_MODES)}"}, status_code=422)
        state["fail"] = body["fail"]
        return {"fail": state["fail"]}

    @app.get("/stats")
    async def stats():
        return {"name": spec.name, "calls": state["calls"], "fail": state["fail"],
                "with_authorization": sum(state["authorization"])}

    return app


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    ap = argparse.ArgumentParser(prog="python -m slarouter_core.service.fake_backend", description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", default="fake")
    ap.add_argument("--port", type=int, default=9001)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--completion-tokens", type=int, default=16)
    ap.add_argument("--fail", choices=FAIL_MODES, default="none")
    a = ap.parse_args(argv)
    spec = FakeSpec(a.name, a.latency_ms, a.completion_tokens, a.fail)
    uvicorn.run(create_fake_app(spec), host="127.0.0.1", port=a.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
