"""An OpenAI-compatible routing service in front of a zoo of model servers.

``zoo`` (the TOML zoo file, with its optional judge), ``core`` (router, accounting,
feedback, checkpoints, circuit breakers; no HTTP), ``journal`` (the SQLite event journal
that makes every event durable), ``auth`` (API keys), ``api`` (pydantic request models,
strict JSON), ``onnx_encoder`` (the encoder's forward in ONNX Runtime), ``server``
(FastAPI app, uvicorn), ``fake_backend`` (a fake model server that can misbehave),
``monitor`` (polls ``GET /v1/state`` for the dashboard).
"""
