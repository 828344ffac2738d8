"""Routing-service figures (issue 12): the latency the service adds per request (p50 and
p99, embedding included) against calling a backend directly, and requests per second
with fake backends, on this machine.

    .venv/bin/python benchmarks/bench_service.py [--encoder minilm] [--n 300] [--seconds 10]

Starts two fake backends (``python -m slarouter_core.service.fake_backend``, no added
latency) and ``slarouter serve`` in front of them, each in its own process on 127.0.0.1,
then times the same kind of requests sent directly to a backend and through the service
(one client, sequential; then ``--concurrency`` clients for throughput).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{url} exited early:\n{proc.stdout.read() if proc.stdout else ''}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not come up in {timeout} s")


def body(i: int) -> dict:
    return {"model": "auto", "max_tokens": 16,
            "messages": [{"role": "user", "content": f"Request {i}: explain briefly why the sky looks blue "
                                                     f"at noon and red at sunset, case {i * 7919 % 1000}."}]}


def sequential(client: httpx.Client, url: str, n: int, offset: int) -> np.ndarray:
    out = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        r = client.post(url, json=body(offset + i))
        out[i] = time.perf_counter() - t0
        r.raise_for_status()
    return out


def throughput(url: str, seconds: float, workers: int, offset: int) -> tuple[float, int]:
    stop = time.perf_counter() + seconds
    counts = [0] * workers

    def worker(k: int) -> None:
        with httpx.Client(timeout=30) as c:
            i = 0
            while time.perf_counter() < stop:
                c.post(url, json=body(offset + k * 1_000_000 + i)).raise_for_status()
                counts[k] += 1
                i += 1

    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(workers) as pool:
        list(pool.map(worker, range(workers)))
    total = sum(counts)
    return total / (time.perf_counter() - t0), total


def encoder_paths(spec: str, n: int) -> None:
    """Per-request embedding latency of the eager and the traced forward, interleaved in
    one process (the ratio is what the service gains from tracing)."""
    from slarouter_core.encoders import get_encoder

    eager, traced = get_encoder(spec), get_encoder(spec, traced=True)
    if getattr(traced, "traced_forward", None) is None:
        print(f"encoder {spec}: no traced path ({getattr(traced, 'trace_problem', 'not a transformer')})")
        return
    te, tt = np.empty(n), np.empty(n)
    for i in range(n + 10):
        text = body(i)["messages"][0]["content"]
        t0 = time.perf_counter()
        eager.encode([text])
        t1 = time.perf_counter()
        traced.encode([text])
        t2 = time.perf_counter()
        if i >= 10:
            te[i - 10], tt[i - 10] = t1 - t0, t2 - t1
    print(f"one text per call, {n} calls each, interleaved (ms): eager p50 {np.median(te) * 1e3:.2f}, "
          f"traced p50 {np.median(tt) * 1e3:.2f} (traced/eager {np.median(tt) / np.median(te):.2f})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--encoder", default="minilm")
    ap.add_argument("--mode", default="guarded")
    ap.add_argument("--n", type=int, default=300, help="sequential requests per path")
    ap.add_argument("--seconds", type=float, default=10.0, help="throughput run length")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1, help="the service's torch threads (serve --threads)")
    a = ap.parse_args()
    procs = []
    tmp = Path(tempfile.mkdtemp(prefix="slarouter-bench-"))
    try:
        ports = {}
        for name in ("small", "large"):
            ports[name] = free_port()
            p = subprocess.Popen([PY, "-m", "slarouter_core.service.fake_backend", "--name", name,
                                  "--port", str(ports[name]), "--completion-tokens", "16"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            procs.append(p)
            wait_up(f"http://127.0.0.1:{ports[name]}/stats", p)
        (tmp / "zoo.toml").write_text(
            f'[[models]]\nname = "small"\nbase_url = "http://127.0.0.1:{ports["small"]}/v1"\nmodel = "s"\n'
            'price_per_1k_input = 0.1\nprice_per_1k_output = 0.2\n\n'
            f'[[models]]\nname = "large"\nbase_url = "http://127.0.0.1:{ports["large"]}/v1"\nmodel = "l"\n'
            'price_per_1k_input = 1.0\nprice_per_1k_output = 2.0\n')
        sport = free_port()
        sp = subprocess.Popen([PY, "-m", "slarouter_core.cli", "serve", "--zoo", str(tmp / "zoo.toml"),
                               "--alpha", "0.8", "--mode", a.mode, "--port", str(sport), "--encoder", a.encoder,
                               "--state-dir", str(tmp / "state"), "--threads", str(a.threads)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(sp)
        service = f"http://127.0.0.1:{sport}"
        wait_up(f"{service}/healthz", sp)
        direct = f"http://127.0.0.1:{ports['small']}/v1/chat/completions"
        routed = f"{service}/v1/chat/completions"
        encoder_paths(a.encoder, 200)
        print(f"cores: {os.cpu_count()}; load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())}; "
              f"encoder {a.encoder} ({a.threads} torch thread(s)); mode {a.mode}; fake backends with no added latency")
        with httpx.Client(timeout=30) as c:
            sequential(c, direct, 30, 10_000_000)  # warm-up both paths
            sequential(c, routed, 30, 20_000_000)
            d, s = [], []
            for k in range(5):  # interleave so that load changes hit both paths alike
                d.append(sequential(c, direct, a.n // 5, k * a.n))
                s.append(sequential(c, routed, a.n // 5, 30_000_000 + k * a.n))
        d, s = np.concatenate(d) * 1e3, np.concatenate(s) * 1e3
        p = lambda x, q: float(np.percentile(x, q))  # noqa: E731
        print(f"sequential, {len(d)} requests per path (ms): direct to a backend p50 {p(d, 50):.2f}, "
              f"p99 {p(d, 99):.2f}; through the service p50 {p(s, 50):.2f}, p99 {p(s, 99):.2f}")
        print(f"added by the service (embedding included): p50 {p(s, 50) - p(d, 50):.2f} ms "
              f"(target <= 15 ms), p99 {p(s, 99) - p(d, 99):.2f} ms")
        tm = httpx.get(f"{service}/v1/state").json()["timings_ms"]
        print("inside the service (ms, last 1000 requests): embedding p50 {embed_p50:.2f} p99 {embed_p99:.2f}; "
              "decision under the lock p50 {decide_p50:.2f} p99 {decide_p99:.2f}".format(**tm))
        print(f"added p50 outside the embedding (HTTP hop, routing, accounting): "
              f"{p(s, 50) - p(d, 50) - tm['embed_p50']:.2f} ms")
        rps_d, nd = throughput(direct, a.seconds, a.concurrency, 40_000_000)
        rps_s, ns = throughput(routed, a.seconds, a.concurrency, 50_000_000)
        st = httpx.get(f"{service}/v1/state").json()
        print(f"throughput, {a.concurrency} concurrent clients, {a.seconds:g} s: direct {rps_d:.0f} requests/s "
              f"({nd}); through the service {rps_s:.0f} requests/s ({ns}); service routed {st['t']} in all, "
              f"{st['requests_failed']} failed; calls " + ", ".join(f"{m['name']} {m['served']}" for m in st["models"]))
        print(f"load average at the end {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
