"""The HTTP layer of the routing service (FastAPI on uvicorn, httpx to the backends).

Endpoints: ``POST /v1/chat/completions`` (OpenAI-compatible, streaming or not),
``POST /v1/feedback``, ``GET /v1/state`` (all three need ``Authorization: Bearer <key>``
when the service has keys) and ``GET /healthz`` (open).

Every request body is capped (``max_body_bytes``, 413), parsed strictly and validated
with pydantic (:mod:`.api`): bad input is a 4xx JSON error. A chat is tried on every
model in the router's order of preference (models whose circuit is open last); a
backend's 400/413/422/429 goes back to the client with its message and Retry-After (the
client's fault, not the backend's); a stream that breaks off ends with an OpenAI-style
error event; a client that hangs up is not a backend failure. With a ``[judge]`` in the
zoo, answered requests are judged in the background after the reply (never delaying it),
on the budget's draw; with its ``calibrate`` on, a rated answer outside the draw is judged
when its thumbs come, to calibrate the judge only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, AsyncIterator

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from .api import BadJSON, ChatRequest, FeedbackRequest, describe, dumps, strict_json
from .auth import ApiKeys, bearer
from .core import FeedbackError, RoutingService, Ticket

log = logging.getLogger("slarouter.service")
REQUEST_ID_HEADER = "x-slarouter-request-id"
MODEL_HEADER = "x-slarouter-model"
CHOSEN_HEADER = "x-slarouter-chosen"
#: a backend's answers that are the client's fault: passed on, not failed over
CLIENT_ERRORS = frozenset({400, 413, 422, 429})
#: answers kept for a calibration read once their thumbs come (the newest; see
#: RoutingService.judge_calibrates): an answer older than the zoo judge's
#: ``calibrate_within_s``, or pushed out by newer ones, is not judged
ANSWERS_KEPT = 2048
OPEN_PATHS = frozenset({"/healthz"})


class SafeJSONResponse(JSONResponse):
    """ASCII JSON (a lone surrogate from a backend cannot break the reply), no NaN."""

    def render(self, content: Any) -> bytes:
        return dumps(content)


def _error(status: int, message: str, kind: str = "invalid_request_error",
           headers: dict | None = None) -> SafeJSONResponse:
    return SafeJSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status,
                            headers=headers)


class Guard:
    """ASGI middleware: Bearer keys on every path but /healthz (401), then the body cap
    (413). The body is read here (at most the cap) and handed on whole."""

    def __init__(self, app, keys: ApiKeys | None, max_body: int):
        self.app, self.keys, self.max_body = app, keys, max_body

    def _too_big(self) -> SafeJSONResponse:
        return _error(413, f"the body is larger than {self.max_body:,} bytes")

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self.keys is not None and scope.get("path") not in OPEN_PATHS:
            key_id = self.keys.identify(bearer(headers.get("authorization")))
            if key_id is None:
                resp = _error(401, "missing or wrong API key: send 'Authorization: Bearer <key>'",
                              "authentication_error", {"WWW-Authenticate": "Bearer"})
                return await resp(scope, receive, send)
            scope["slarouter.key"] = key_id
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        try:
            declared = int(headers.get("content-length", "0") or 0)
        except ValueError:
            return await _error(400, "bad Content-Length")(scope, receive, send)
        if declared > self.max_body:
            return await self._too_big()(scope, receive, send)
        chunks, size = [], 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body = msg.get("body", b"")
            size += len(body)
            if size > self.max_body:
                return await self._too_big()(scope, receive, send)
            chunks.append(body)
            if not msg.get("more_body"):
                break
        whole = b"".join(chunks)
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": whole, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


class BackendFailure(Exception):
    """The backend failed (fail over to the next model; counts against its circuit)."""


class ClientFault(Exception):
    """The backend refused the request as the client's fault (pass it on, no failover)."""

    def __init__(self, status: int, message: str, retry_after: str | None):
        super().__init__(message)
        self.status, self.retry_after = status, retry_after


def _backend_message(raw: bytes) -> str:
    try:
        doc = json.loads(raw)
        msg = doc["error"]["message"] if isinstance(doc.get("error"), dict) else doc.get("error") or doc.get("detail")
    except Exception:  # noqa: BLE001 - any shape: fall back to the text
        msg = raw.decode("utf-8", "replace")
    return str(msg)[:500]


def _answer_text(data: dict) -> str:
    try:
        c = data["choices"][0]["message"]["content"]
        return c if isinstance(c, str) else ""
    except (KeyError, IndexError, TypeError):
        return ""


def create_app(service: RoutingService, transport: httpx.AsyncBaseTransport | None = None,
               api_keys: ApiKeys | None = None) -> FastAPI:
    """The ASGI app for one service; checkpoints on a timer and at shutdown. ``api_keys``
    None: no authentication (tests, a service only reachable by its owner)."""
    judge_client = service.zoo.judge.client() if service.zoo.judge is not None else None

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.client = httpx.AsyncClient(transport=transport, limits=httpx.Limits(max_connections=512))
        app.state.judge_tasks = set()
        app.state.answers = OrderedDict()  # request id -> (ticket, answer, reply time): calibration reads
        app.state.closing = False
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
            app.state.closing = True
            if task is not None:
                await task
            pending = list(app.state.judge_tasks)
            if pending:  # judge calls still out: give them a moment, then drop them
                _, late = await asyncio.wait(pending, timeout=2.0)
                for t in late:
                    t.cancel()
            await app.state.client.aclose()
            service.checkpoint()

    app = FastAPI(title="SLARouter service", lifespan=lifespan)
    app.add_middleware(Guard, keys=api_keys, max_body=service.config.max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        return _error(422, describe(exc))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception):  # a bug: still JSON, and logged
        log.exception("unexpected error on %s", request.url.path)
        return _error(500, f"internal error ({type(exc).__name__})", "server_error")

    def _headers(ticket: Ticket, served: int) -> dict[str, str]:
        return {REQUEST_ID_HEADER: ticket.request_id, MODEL_HEADER: service.zoo.names[served],
                CHOSEN_HEADER: service.zoo.names[ticket.model]}

    def _launch(ticket: Ticket, answer: str, calibration: bool = False) -> None:
        """One judge call in the background; its verdict (None where the call failed: no
        label) reaches the service, as a calibration read where ``calibration``."""

        async def run() -> None:
            try:
                res = await judge_client.averdict(ticket.text, answer, client=app.state.client)
            except Exception as exc:  # noqa: BLE001 - a failed judge call only means no label
                log.info("judge call for %s failed: %s", ticket.request_id, exc)
                service.judge_result(ticket, None, calibration=calibration)
                return
            service.judge_result(ticket, res.label, res.prompt_tokens, res.completion_tokens,
                                 calibration=calibration)

        tasks: set = app.state.judge_tasks
        t = asyncio.create_task(run())
        tasks.add(t)
        t.add_done_callback(tasks.discard)

    def _judge(ticket: Ticket, answer: str) -> None:
        """Judge an answered request in the background, ``delay_s`` after the reply, if the
        budget's draw (made now, whatever the user's thumbs will be) says so, within the
        concurrency bound; otherwise keep the answer for a calibration read."""
        if judge_client is None:
            return
        if not service.judge_assign(ticket):
            if service.calibrates_judge and service.zoo.judge.calibrate_within_s > 0:
                kept: OrderedDict = app.state.answers
                kept[ticket.request_id] = (ticket, answer, time.monotonic())
                while len(kept) > ANSWERS_KEPT:
                    kept.popitem(last=False)
            return

        def start() -> None:
            if app.state.closing:
                return  # the restart drops the call (Service._release_lost_judge_calls)
            if not service.judge_wanted(ticket.request_id):
                service.judge_dropped(ticket, "rated")
                return
            if len(app.state.judge_tasks) >= service.zoo.judge.max_concurrent:
                service.judge_dropped(ticket, "skipped")
                return
            _launch(ticket, answer)

        delay = service.zoo.judge.delay_s
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, start)
        else:
            start()

    def _calibrate(request_id: str) -> None:
        """A rated answer the judge's draw left out: judged now, if it is still kept and
        within the concurrency bound, its verdict only calibrating the judge."""
        kept = app.state.answers.pop(request_id, None) if judge_client is not None else None
        if kept is None:
            return
        ticket, answer, replied = kept
        if (app.state.closing or time.monotonic() - replied > service.zoo.judge.calibrate_within_s
                or len(app.state.judge_tasks) >= service.zoo.judge.max_concurrent
                or not service.judge_calibrates(request_id)):
            return  # nothing was drawn or waits on it: no call, no journal entry
        _launch(ticket, answer, calibration=True)

    async def _open(client: httpx.AsyncClient, idx: int, body: dict, stream: bool) -> httpx.Response:
        m = service.zoo.models[idx]
        payload = {**body, "model": m.model}
        if stream:
            so = body.get("stream_options")
            payload["stream_options"] = {**(so if isinstance(so, dict) else {}), "include_usage": True}
        req = client.build_request("POST", m.chat_url, content=dumps(payload),
                                   headers={**m.auth_headers(), "Content-Type": "application/json"},
                                   timeout=httpx.Timeout(m.timeout_s))
        try:
            resp = await client.send(req, stream=True)
        except httpx.HTTPError as exc:
            raise BackendFailure(f"{m.name}: {type(exc).__name__}") from None
        if resp.status_code == 200:
            return resp
        try:
            raw = await resp.aread()
        except httpx.HTTPError:
            raw = b""
        finally:
            await resp.aclose()
        if resp.status_code in CLIENT_ERRORS:
            raise ClientFault(resp.status_code, f"{m.name}: {_backend_message(raw)}", resp.headers.get("retry-after"))
        raise BackendFailure(f"{m.name}: HTTP {resp.status_code}")

    async def _read_json(resp: httpx.Response, name: str) -> dict:
        try:
            raw = await resp.aread()
        except httpx.HTTPError as exc:
            raise BackendFailure(f"{name}: {type(exc).__name__} while reading the answer") from None
        finally:
            await resp.aclose()
        try:
            data = strict_json(raw)
        except BadJSON as exc:
            raise BackendFailure(f"{name}: answer is not JSON ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise BackendFailure(f"{name}: answer is not a chat completion")
        return data

    async def _first_event(resp: httpx.Response, name: str) -> tuple[AsyncIterator[str], list[str]]:
        """The stream's lines up to its first data event (a failure here still fails over)."""
        lines = resp.aiter_lines()
        head = []
        try:
            async for line in lines:
                head.append(line)
                if line.startswith("data:"):
                    return lines, head
        except httpx.HTTPError as exc:
            await resp.aclose()
            raise BackendFailure(f"{name}: {type(exc).__name__} before the first event") from None
        await resp.aclose()
        raise BackendFailure(f"{name}: the stream ended before its first event")

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        try:
            raw = strict_json(await request.body())
        except BadJSON as exc:
            return _error(400, str(exc))
        if not isinstance(raw, dict):
            return _error(400, "the body must be a JSON object")
        try:
            req = ChatRequest.model_validate(raw)
        except ValidationError as exc:
            return _error(422, describe(exc))
        text = req.user_text
        if text is None:
            return _error(400, "messages must include a user message with text content")
        service.incoming += 1
        try:
            ticket = await service.aroute(text, req.prompt_chars, req.token_limit, request.scope.get("slarouter.key"))
        finally:
            service.incoming -= 1
        stream = bool(req.stream)
        client: httpx.AsyncClient = request.app.state.client
        errors = []
        for idx in ticket.order:
            name = service.zoo.names[idx]
            try:
                resp = await _open(client, idx, raw, stream)
                if stream:
                    lines, head = await _first_event(resp, name)
                    return StreamingResponse(_relay(resp, lines, head, ticket, idx, raw),
                                             media_type="text/event-stream", headers=_headers(ticket, idx))
                data = await _read_json(resp, name)
            except BackendFailure as exc:
                errors.append(str(exc))
                service.record_failure(ticket, idx)
                continue
            except ClientFault as exc:
                service.fail(ticket)
                hdrs = {REQUEST_ID_HEADER: ticket.request_id}
                if exc.retry_after:
                    hdrs["Retry-After"] = exc.retry_after[:64]
                return _error(exc.status, str(exc), "invalid_request_error" if exc.status != 429 else "rate_limit_error",
                              hdrs)
            service.complete(ticket, idx, data.get("usage"))
            data["id"] = ticket.request_id
            data["model"] = name
            data["slarouter"] = {"request_id": ticket.request_id, "model": name,
                                 "chosen": service.zoo.names[ticket.model], "explored": ticket.explored,
                                 "t": ticket.t, "failed_first": errors}
            _judge(ticket, _answer_text(data))
            return SafeJSONResponse(data, headers=_headers(ticket, idx))
        service.fail(ticket)
        return SafeJSONResponse({"error": {"message": "every backend tried failed: " + "; ".join(errors),
                                           "type": "backend_error", "code": 502},
                                 "slarouter": {"request_id": ticket.request_id}},
                                status_code=502, headers={REQUEST_ID_HEADER: ticket.request_id})

    async def _relay(resp: httpx.Response, lines: AsyncIterator[str], head: list[str], ticket: Ticket, idx: int,
                     body: dict) -> AsyncIterator[bytes]:
        so = body.get("stream_options")
        want_usage = isinstance(so, dict) and bool(so.get("include_usage"))
        usage = None
        name = service.zoo.names[idx]
        answer: list[str] = []
        outcome = "client gone"  # what ended the stream, unless changed below

        async def all_lines():
            for line in head:
                yield line
            async for line in lines:
                yield line

        def event(chunk: Any) -> bytes:
            return b"data: " + dumps(chunk) + b"\n\n"

        try:
            try:
                async for line in all_lines():
                    if not line.startswith("data:"):
                        continue
                    raw = line[5:].strip()
                    if raw == "[DONE]":
                        outcome = "done"
                        service.complete(ticket, idx, usage)  # before the client can send thumbs
                        yield b"data: [DONE]\n\n"
                        break
                    try:
                        chunk = strict_json(raw.encode())
                    except BadJSON:
                        continue
                    if not isinstance(chunk, dict):
                        continue
                    if isinstance(chunk.get("error"), dict):  # the backend reported an error mid-stream
                        raise BackendFailure(f"{name}: {str(chunk['error'].get('message'))[:300]}")
                    if chunk.get("usage"):
                        usage = chunk["usage"]
                        if not chunk.get("choices") and not want_usage:
                            continue
                        if not want_usage:
                            chunk["usage"] = None
                    for ch in chunk.get("choices") or []:
                        delta = ch.get("delta") if isinstance(ch, dict) else None
                        if isinstance(delta, dict) and isinstance(delta.get("content"), str):
                            answer.append(delta["content"])
                    chunk["id"] = ticket.request_id
                    chunk["model"] = name
                    yield event(chunk)
                else:
                    raise BackendFailure(f"{name}: the stream ended without [DONE]")
            except (httpx.HTTPError, BackendFailure) as exc:
                outcome = "backend broke"
                msg = str(exc) if isinstance(exc, BackendFailure) else f"{name}: {type(exc).__name__}"
                log.warning("stream broke off: %s", msg)
                yield event({"error": {"message": f"the answer broke off: {msg}", "type": "backend_error",
                                       "code": 502}})
        finally:
            # bookkeeping first: after a client hang-up every await here is cancelled
            if outcome == "done":
                _judge(ticket, "".join(answer))
            elif outcome == "backend broke":
                service.record_failure(ticket, idx)
                service.fail(ticket)
            else:  # the client hung up: what it got was served (no backend failure)
                service.complete(ticket, idx, None)
            await resp.aclose()

    @app.post("/v1/feedback")
    async def feedback(request: Request):
        try:
            raw = strict_json(await request.body())
        except BadJSON as exc:
            return _error(400, f"{exc}: send {{\"request_id\": ..., \"satisfied\": true|false}}")
        try:
            fb = FeedbackRequest.model_validate(raw)
        except ValidationError as exc:
            return _error(422, "the body must be {\"request_id\": ..., \"satisfied\": true|false} and nothing "
                               "else: " + describe(exc))
        try:
            out = service.feedback(fb.request_id, fb.satisfied, request.scope.get("slarouter.key"))
        except FeedbackError as exc:
            return _error(exc.status, str(exc), "feedback_error")
        _calibrate(fb.request_id)
        return SafeJSONResponse(out)

    @app.get("/v1/state")
    async def state(history: int = 0):
        return SafeJSONResponse(service.state(history=max(0, min(int(history), service.config.history))))

    @app.get("/healthz")
    async def healthz():
        open_ = service.open_circuits()
        ok = len(open_) < len(service.zoo)
        return SafeJSONResponse({"status": "ok" if ok else "degraded", "t": service.router.t,
                                 "models": list(service.zoo.names), "circuits_open": open_},
                                status_code=200 if ok else 503)

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

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop, letting requests in flight finish for ``grace_s`` seconds; then close
        what is left (a fake backend's hanging reply would otherwise hold its port)."""
        self.server.should_exit = True
        self.thread.join(timeout=grace_s)
        if self.thread.is_alive():
            self.server.force_exit = True
            self.thread.join(timeout=30)

    def __enter__(self) -> "BackgroundServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(service: RoutingService, host: str = "127.0.0.1", port: int = 8000, torch_threads: int | None = 1,
          api_keys: ApiKeys | None = None) -> None:
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

    uvicorn.run(create_app(service, api_keys=api_keys), host=host, port=port, log_level="info", access_log=False,
                timeout_graceful_shutdown=10)
