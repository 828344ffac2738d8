"""The HTTP layer of the routing service (FastAPI on uvicorn, httpx to the backends).

Endpoints: ``POST /v1/chat/completions`` (OpenAI-compatible, streaming or not),
``POST /v1/feedback``, ``GET /v1/state``, ``GET /healthz``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from .core import FeedbackError, RoutingService, Ticket

log = logging.getLogger("slarouter.service")
REQUEST_ID_HEADER = "x-slarouter-request-id"
MODEL_HEADER = "x-slarouter-model"
CHOSEN_HEADER = "x-slarouter-chosen"


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def last_user_text(body: Any) -> str | None:
    """The text of the last user message (string content or the text parts of a list)."""
    msgs = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(msgs, list):
        return None
    for msg in reversed(msgs):
        if isinstance(msg, dict) and msg.get("role") == "user":
            c = msg.get("content")
            if isinstance(c, str):
                return c
            if isinstance(c, list):
                return " ".join(p.get("text", "") for p in c if isinstance(p, dict) and p.get("type") == "text")
            return None
    return None


class BackendFailure(Exception):
    pass


def create_app(service: RoutingService, transport: httpx.AsyncBaseTransport | None = None) -> FastAPI:
    """The ASGI app for one service; checkpoints on a timer and at shutdown."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.client = httpx.AsyncClient(transport=transport, limits=httpx.Limits(max_connections=512))
        stop = asyncio.Event()

        async def timer() -> None:
            while True:
                try:
                    await asyncio.wait_for(stop.wait(), service.config.checkpoint_every_s)
                    return
                except asyncio.TimeoutError:
                    try:
                        await run_in_threadpool(service.checkpoint)
                    except Exception:  # keep serving; the next tick tries again
                        log.exception("checkpoint failed")

        task = asyncio.create_task(timer()) if service.state_dir is not None else None
        try:
            yield
        finally:
            stop.set()
            if task is not None:
                await task
            await app.state.client.aclose()
            service.checkpoint()

    app = FastAPI(title="SLARouter service", lifespan=lifespan)

    def _headers(ticket: Ticket, served: int) -> dict[str, str]:
        return {REQUEST_ID_HEADER: ticket.request_id, MODEL_HEADER: service.zoo.names[served],
                CHOSEN_HEADER: service.zoo.names[ticket.model]}

    async def _open(client: httpx.AsyncClient, idx: int, body: dict, stream: bool) -> httpx.Response:
        m = service.zoo.models[idx]
        payload = {**body, "model": m.model}
        if stream:
            so = body.get("stream_options")
            payload["stream_options"] = {**(so if isinstance(so, dict) else {}), "include_usage": True}
        req = client.build_request("POST", m.chat_url, json=payload, headers=m.auth_headers(),
                                   timeout=httpx.Timeout(m.timeout_s))
        try:
            resp = await client.send(req, stream=stream)
        except httpx.HTTPError as exc:
            raise BackendFailure(f"{m.name}: {type(exc).__name__}") from None
        if resp.status_code != 200:
            await resp.aclose()
            raise BackendFailure(f"{m.name}: HTTP {resp.status_code}")
        return resp

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "the body must be a JSON object")
        if not isinstance(body, dict):
            return _error(400, "the body must be a JSON object")
        text = last_user_text(body)
        if text is None:
            return _error(400, "messages must be a list with at least one user message with text content")
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        max_tokens = max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else None
        prompt_chars = sum(len(m.get("content")) for m in body["messages"]
                           if isinstance(m, dict) and isinstance(m.get("content"), str))
        ticket = await run_in_threadpool(service.route, text, prompt_chars, max_tokens)
        stream = bool(body.get("stream"))
        client: httpx.AsyncClient = request.app.state.client
        errors = []
        for idx in ticket.order:
            try:
                resp = await _open(client, idx, body, stream)
            except BackendFailure as exc:
                errors.append(str(exc))
                service.record_failure(ticket, idx)
                continue
            if stream:
                return StreamingResponse(_relay(resp, ticket, idx, body), media_type="text/event-stream",
                                         headers=_headers(ticket, idx))
            try:
                data = resp.json()
            except ValueError:
                errors.append(f"{service.zoo.names[idx]}: answer is not JSON")
                service.record_failure(ticket, idx)
                continue
            service.complete(ticket, idx, data.get("usage") if isinstance(data, dict) else None)
            data["id"] = ticket.request_id
            data["model"] = service.zoo.names[idx]
            data["slarouter"] = {"request_id": ticket.request_id, "model": service.zoo.names[idx],
                                 "chosen": service.zoo.names[ticket.model], "explored": ticket.explored,
                                 "t": ticket.t, "failed_first": errors}
            return JSONResponse(data, headers=_headers(ticket, idx))
        service.fail(ticket)
        return JSONResponse({"error": {"message": "every backend tried failed: " + "; ".join(errors),
                                       "type": "backend_error", "code": 502},
                             "slarouter": {"request_id": ticket.request_id}},
                            status_code=502, headers={REQUEST_ID_HEADER: ticket.request_id})

    async def _relay(resp: httpx.Response, ticket: Ticket, idx: int, body: dict) -> AsyncIterator[bytes]:
        so = body.get("stream_options")
        want_usage = isinstance(so, dict) and bool(so.get("include_usage"))
        usage = None
        name = service.zoo.names[idx]
        ok = False
        try:
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                raw = line[5:].strip()
                if raw == "[DONE]":
                    ok = True
                    yield b"data: [DONE]\n\n"
                    break
                try:
                    chunk = json.loads(raw)
                except json.JSONDecodeError:
                    continue
                if isinstance(chunk, dict):
                    if chunk.get("usage"):
                        usage = chunk["usage"]
                        if not chunk.get("choices") and not want_usage:
                            continue
                        if not want_usage:
                            chunk["usage"] = None
                    chunk["id"] = ticket.request_id
                    chunk["model"] = name
                yield f"data: {json.dumps(chunk)}\n\n".encode()
        except httpx.HTTPError:
            log.warning("stream from %s broke off", name)
        finally:
            await resp.aclose()
            if ok:
                service.complete(ticket, idx, usage)
            else:
                service.record_failure(ticket, idx)
                service.fail(ticket)

    @app.post("/v1/feedback")
    async def feedback(request: Request):
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "the body must be JSON: {\"request_id\": ..., \"satisfied\": true|false}")
        if not isinstance(body, dict) or set(body) - {"request_id", "satisfied"}:
            return _error(422, "the body must be {\"request_id\": ..., \"satisfied\": true|false} and nothing else")
        try:
            return service.feedback(body.get("request_id"), body.get("satisfied"))
        except FeedbackError as exc:
            return _error(exc.status, str(exc), "feedback_error")

    @app.get("/v1/state")
    async def state(history: int = 0):
        return service.state(history=max(0, min(int(history), service.config.history)))

    @app.get("/healthz")
    async def healthz():
        return {"status": "ok", "t": service.router.t, "models": list(service.zoo.names)}

    return app


@dataclass
class BackgroundServer:
    """A uvicorn server on 127.0.0.1 in a thread (tests, benchmarks, the fake backends)."""

    app: Any
    port: int = 0
    host: str = "127.0.0.1"

    def __post_init__(self) -> None:
        import uvicorn

        cfg = uvicorn.Config(self.app, host=self.host, port=self.port, log_level="warning", lifespan="on",
                             timeout_graceful_shutdown=10)
        self.server = uvicorn.Server(cfg)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, timeout: float = 30.0) -> "BackgroundServer":
        self.thread.start()
        deadline = time.time() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.time() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def __enter__(self) -> "BackgroundServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(service: RoutingService, host: str = "127.0.0.1", port: int = 8000, torch_threads: int | None = 1) -> None:
    """Run the service in the foreground until SIGINT/SIGTERM (checkpoint on the way out).

    ``torch_threads`` (process-wide): one request's embedding is a tiny batch, for which
    one intra-op thread is about as fast as several and, on a machine whose cores are
    busy with other work, much steadier (threads that wait for each other stall).
    """
    import uvicorn

    if torch_threads is not None:
        if isinstance(torch_threads, bool) or not isinstance(torch_threads, int) or torch_threads < 1:
            raise ValueError(f"torch_threads must be a positive integer, got {torch_threads!r}")
        import torch

        torch.set_num_threads(torch_threads)

    uvicorn.run(create_app(service), host=host, port=port, log_level="info", access_log=False,
                timeout_graceful_shutdown=10)
