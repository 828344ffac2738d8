"""`slarouter serve` as a user starts it: one command, a real process, SIGTERM checkpoints."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.service.conftest import BACKENDS

SECRET = "sk-test-DO-NOT-SHOW-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def zoo_text(backends) -> str:
    out = []
    for n in ("small", "large"):
        _, _, pin, pout, preq = BACKENDS[n]
        out.append(f'[[models]]\nname = "{n}"\nbase_url = "{backends[n].url}/v1"\nmodel = "fake-{n}"\n'
                   f'api_key_env = "SLR_TEST_KEY"\nprice_per_1k_input = {pin}\nprice_per_1k_output = {pout}\n'
                   f'price_per_request = {preq}\n')
    return "\n".join(out)


def test_serve_starts_with_one_command_and_checkpoints_on_sigterm(backends, tmp_path):
    from openai import OpenAI

    zoo = tmp_path / "zoo.toml"
    zoo.write_text(zoo_text(backends))
    state = tmp_path / "state"
    port = free_port()
    env = {**os.environ, "SLR_TEST_KEY": SECRET}
    cmd = [sys.executable, "-m", "slarouter_core.cli", "serve", "--zoo", str(zoo), "--alpha", "0.8",
           "--mode", "guarded", "--port", str(port), "--encoder", "hashing", "--state-dir", str(state)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.time() < deadline, proc.stdout.read() if proc.poll() else "slow"
            time.sleep(0.2)
        before = {n: httpx.get(f"{s.url}/stats").json()["with_authorization"] for n, s in backends.items()}
        client = OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        comp = client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi there"}])
        assert comp.model in ("small", "large")
        assert httpx.post(f"{url}/v1/feedback", json={"request_id": comp.id, "satisfied": True}).status_code == 200
        after = {n: httpx.get(f"{s.url}/stats").json()["with_authorization"] for n, s in backends.items()}
        assert after[comp.model] == before[comp.model] + 1  # the key was sent to the backend
        state_doc = httpx.get(f"{url}/v1/state").text
        assert SECRET not in state_doc
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    # uvicorn shuts down gracefully, then re-raises the signal it caught
    assert proc.returncode in (0, -signal.SIGTERM) and "Application shutdown complete" in out, out
    assert SECRET not in out
    files = list(Path(state).iterdir())
    assert {f.name for f in files} == {"router.safetensors", "service.json"}
    assert all(SECRET.encode() not in f.read_bytes() for f in files)


def test_serve_reports_zoo_problems_and_missing_keys(tmp_path, backends):
    zoo = tmp_path / "zoo.toml"
    zoo.write_text('[[models]]\nname = "a"\n')
    r = subprocess.run([sys.executable, "-m", "slarouter_core.cli", "serve", "--zoo", str(zoo), "--alpha", "0.8"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "at least two models" not in r.stderr and "missing base_url, model" in r.stderr
    zoo.write_text(zoo_text(backends))
    env = {k: v for k, v in os.environ.items() if k != "SLR_TEST_KEY"}
    r = subprocess.run([sys.executable, "-m", "slarouter_core.cli", "serve", "--zoo", str(zoo), "--alpha", "0.8"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2 and "SLR_TEST_KEY is not set" in r.stderr
    r = subprocess.run([sys.executable, "-m", "slarouter_core.cli", "serve", "--zoo", str(zoo), "--alpha", "1.5"],
                       capture_output=True, text=True, timeout=120, env={**env, "SLR_TEST_KEY": "k"})
    assert r.returncode == 2 and "alpha must be" in r.stderr
