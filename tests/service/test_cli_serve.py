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
MASTER = "sk-master-key-for-the-cli-test-42"
AUTH = {"Authorization": f"Bearer {MASTER}"}


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
    env = {**os.environ, "SLR_TEST_KEY": SECRET, "SLAROUTER_MASTER_KEY": MASTER}
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
        assert httpx.get(f"{url}/v1/state").status_code == 401
        client = OpenAI(base_url=f"{url}/v1", api_key=MASTER, max_retries=0)
        comp = client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi there"}])
        assert comp.model in ("small", "large")
        assert httpx.post(f"{url}/v1/feedback", json={"request_id": comp.id, "satisfied": True},
                          headers=AUTH).status_code == 200
        after = {n: httpx.get(f"{s.url}/stats").json()["with_authorization"] for n, s in backends.items()}
        assert after[comp.model] == before[comp.model] + 1  # the key was sent to the backend
        state_doc = httpx.get(f"{url}/v1/state", headers=AUTH).text
        assert SECRET not in state_doc
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    # uvicorn shuts down gracefully, then re-raises the signal it caught
    assert proc.returncode in (0, -signal.SIGTERM) and "Application shutdown complete" in out, out
    assert SECRET not in out and MASTER not in out
    files = list(Path(state).iterdir())
    names = {f.name for f in files}
    assert {"service.json", "journal.sqlite3"} <= names and sum(n.startswith("router-") for n in names) == 1
    assert all(SECRET.encode() not in f.read_bytes() and MASTER.encode() not in f.read_bytes() for f in files)
    # state files are private (issue 22: service.json holds every live request id)
    assert all(f.stat().st_mode & 0o777 == 0o600 for f in files), {f.name: oct(f.stat().st_mode) for f in files}
    assert Path(state).stat().st_mode & 0o777 == 0o700


def serve_error(argv: list[str], env: dict[str, str], monkeypatch, capsys) -> tuple[int, str]:
    """``slarouter serve`` in this process (a refusal never gets as far as serving):
    its exit status and what it wrote to stderr."""
    from slarouter_core.cli import main

    for k in ("SLR_TEST_KEY", "SLAROUTER_MASTER_KEY"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    capsys.readouterr()
    try:
        code = main(["serve", *argv])
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


def test_serve_reports_zoo_problems_and_missing_keys(tmp_path, backends, monkeypatch, capsys):
    zoo = tmp_path / "zoo.toml"
    zoo.write_text('[[models]]\nname = "a"\n')
    # one real process: the refusal is its exit status
    r = subprocess.run([sys.executable, "-m", "slarouter_core.cli", "serve", "--zoo", str(zoo), "--alpha", "0.8"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "at least two models" not in r.stderr and "missing base_url, model" in r.stderr
    zoo.write_text(zoo_text(backends))
    args = ["--zoo", str(zoo), "--alpha", "0.8"]
    code, err = serve_error(args, {}, monkeypatch, capsys)
    assert code == 2 and "SLR_TEST_KEY is not set" in err
    args = ["--zoo", str(zoo), "--alpha", "1.5"]
    code, err = serve_error(args, {"SLR_TEST_KEY": "k"}, monkeypatch, capsys)
    assert code == 2 and "no API keys: set SLAROUTER_MASTER_KEY" in err
    code, err = serve_error(args, {"SLR_TEST_KEY": "k", "SLAROUTER_MASTER_KEY": "short"}, monkeypatch, capsys)
    assert code == 2 and "at least 16 characters" in err and "short" not in err.split(":")[-1]
    code, err = serve_error(args, {"SLR_TEST_KEY": "k", "SLAROUTER_MASTER_KEY": MASTER}, monkeypatch, capsys)
    assert code == 2 and "alpha must be" in err
    args = ["--zoo", str(zoo), "--alpha", "0.8", "--mode", "contextual", "--set", "sla_window=500",
            "--set", "explore_k=2"]
    code, err = serve_error(args, {"SLR_TEST_KEY": "k", "SLAROUTER_MASTER_KEY": MASTER}, monkeypatch, capsys)
    assert code == 2 and "explore_k" in err  # a setting the policy does not have: said, not ignored


def start_serve(zoo: Path, state: Path, port: int, mode: str = "guarded") -> subprocess.Popen:
    env = {**os.environ, "SLR_TEST_KEY": SECRET, "SLAROUTER_MASTER_KEY": MASTER}
    cmd = [sys.executable, "-m", "slarouter_core.cli", "serve", "--zoo", str(zoo), "--alpha", "0.8",
           "--mode", mode, "--port", str(port), "--encoder", "hashing", "--state-dir", str(state),
           "--checkpoint-every", "3600"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 90
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        assert proc.poll() is None and time.time() < deadline, proc.stdout.read() if proc.poll() else "slow"
        time.sleep(0.2)


def test_kill_9_after_300_chats_with_thumbs_loses_nothing(backends, tmp_path):
    """Issue 22 #5: every decision and thumb is journaled before its reply returns."""
    zoo = tmp_path / "zoo.toml"
    zoo.write_text(zoo_text(backends))
    state = tmp_path / "state"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_serve(zoo, state, port)
    ids, thumbs = [], []
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=30) as http:
            for i in range(300):
                r = http.post("/v1/chat/completions",
                              json={"messages": [{"role": "user", "content": f"question {i} " + "w " * (i % 7)}]})
                assert r.status_code == 200, r.text
                ids.append(r.json()["id"])
                ok = i % 3 != 0
                thumbs.append(ok)
                assert http.post("/v1/feedback", json={"request_id": ids[-1], "satisfied": ok}).status_code == 200
            before = http.get("/v1/state").json()
    finally:
        proc.kill()  # SIGKILL: no shutdown, no checkpoint
        proc.communicate(timeout=60)
    assert before["t"] == 300
    assert not (state / "service.json").exists()  # nothing was checkpointed: all of it is in the journal
    proc = start_serve(zoo, state, port)
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=30) as http:
            after = http.get("/v1/state").json()
            assert after["restored"] is True and after["replayed_events"] >= 600
            assert after["t"] == 300
            assert after["feedback"]["satisfied"] == sum(thumbs) and after["feedback"]["unsatisfied"] == 300 - sum(thumbs)
            for key in ("q", "models", "cost_total", "decision_queue"):
                assert after[key] == before[key], key
            # a thumb already given is still a duplicate; the routing goes on from step 301
            assert http.post("/v1/feedback", json={"request_id": ids[7], "satisfied": True}).status_code == 409
            r = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "after the crash"}]})
            assert r.status_code == 200 and r.json()["slarouter"]["t"] == 301
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def test_serve_says_at_start_whether_a_zoo_with_stated_accuracies_can_be_certified(backends, tmp_path, capsys,
                                                                                   monkeypatch):
    import slarouter_core.service.server as server
    from slarouter_core.cli import main

    served = []
    monkeypatch.setattr(server, "serve", lambda service, **kw: served.append(service))
    zoo = tmp_path / "zoo.toml"
    text = zoo_text(backends).replace('model = "fake-small"\n', 'model = "fake-small"\naccuracy = 0.6\n')
    zoo.write_text(text.replace('model = "fake-large"\n', 'model = "fake-large"\naccuracy = 0.99\n'))
    monkeypatch.setenv("SLR_TEST_KEY", SECRET)
    assert main(["serve", "--zoo", str(zoo), "--alpha", "0.97", "--mode", "contextual", "--encoder", "hashing",
                 "--state-dir", str(tmp_path / "s"), "--no-auth"]) == 0
    err = capsys.readouterr().err
    assert served and "pre-flight (thumbs rate assumed" in err
    assert "certifiable: yes. Serving large (99.0%)" in err and "a certifying router delivers" in err
    # without stated accuracies: nothing to check, nothing said
    zoo.write_text(zoo_text(backends))
    assert main(["serve", "--zoo", str(zoo), "--alpha", "0.8", "--mode", "guarded", "--encoder", "hashing",
                 "--state-dir", str(tmp_path / "s2"), "--no-auth"]) == 0
    assert "pre-flight" not in capsys.readouterr().err
