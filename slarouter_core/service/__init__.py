"""An OpenAI-compatible routing service in front of a zoo of model servers.

``zoo`` (the TOML zoo file), ``core`` (router, accounting, feedback, checkpoints; no
HTTP), ``server`` (FastAPI app, uvicorn), ``fake_backend`` (a fake model server),
``monitor`` (polls ``GET /v1/state`` for the dashboard).
"""
