"""Routing-service figures (issue 22): what the service adds per request for one client,
throughput and tail latency for concurrent clients, and the service's memory growth,
each beside the same load sent straight to a backend, on this machine.

    .venv/bin/python benchmarks/bench_service.py [--encoder minilm] [--runtime onnx] \
        [--n 200] [--seconds 10] [--concurrency 16]

Starts two fake backends (``python -m slarouter_core.service.fake_backend``, no added
latency) and ``slarouter serve`` (with an API key) in front of them, each in its own
process on 127.0.0.1. Clients are asyncio httpx clients in this process. Two prompt
kinds: short (about 15 words) and realistic (20-60 words). Targets (issue 22): added p50
<= 10 ms for one client; >= 150 requests/s with p99 <= 250 ms at 16 clients; RSS growth
<= 150 MB over that load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slarouter_core.encoders import DEFAULT_ENCODER_THREADS  # noqa: E402
from slarouter_core.service.onnx_encoder import RUNTIMES  # noqa: E402

PY = sys.executable
KEY = "sk-bench-" + "0123456789abcdef"
WORDS = ("routing model answer question cost quality service latency budget feedback user prompt token "
         "language large small cheap expensive accurate fast slow network server request reply").split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen, timeout: float = 180) -> None:
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


def body(i: int, kind: str) -> dict:
    if kind == "short":
        text = f"Request {i}: explain briefly why the sky is blue, case {i * 7919 % 1000}."
    else:
        rng = random.Random(i)
        text = f"Request {i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60))) + "?"
    return {"model": "auto", "max_tokens": 16, "messages": [{"role": "user", "content": text}]}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def sequential(url: str, n: int, offset: int, kind: str, headers: dict) -> np.ndarray:
    out = np.empty(n)
    async with httpx.AsyncClient(timeout=30, headers=headers) as c:
        for i in range(n):
            t0 = time.perf_counter()
            r = await c.post(url, json=body(offset + i, kind))
            out[i] = time.perf_counter() - t0
            r.raise_for_status()
    return out


async def load(url: str, seconds: float, clients: int, offset: int, kind: str, headers: dict):
    """``clients`` concurrent clients, each sending its next request when the last returns."""
    lat: list[float] = []
    stop = time.perf_counter() + seconds

    async def client(k: int) -> None:
        async with httpx.AsyncClient(timeout=60, headers=headers) as c:
            i = 0
            while time.perf_counter() < stop:
                t0 = time.perf_counter()
                r = await c.post(url, json=body(offset + k * 1_000_000 + i, kind))
                lat.append(time.perf_counter() - t0)
                r.raise_for_status()
                i += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    took = time.perf_counter() - t0
    return len(lat) / took, np.asarray(lat) * 1e3


def encoder_paths(spec: str, n: int) -> None:
    """Per-text embedding latency of the runtimes, interleaved in one process, one thread
    each (as the service runs them by default)."""
    import torch

    from slarouter_core.service.onnx_encoder import service_encoder

    torch.set_num_threads(1)
    encs = {r: service_encoder(spec, r) for r in ("eager", "torchscript", "onnx")}
    if getattr(encs["onnx"], "runtime", None) is None:
        print(f"encoder {spec}: not a transformer (no runtime choice)")
        return
    times = {r: np.empty(n) for r in encs}
    for i in range(n + 10):
        text = body(i, "realistic")["messages"][0]["content"]
        for r, e in encs.items():
            t0 = time.perf_counter()
            e.encode([text])
            if i >= 10:
                times[r][i - 10] = time.perf_counter() - t0
    print(f"one text per call, {n} calls each, interleaved (ms): "
          + ", ".join(f"{r} ({encs[r].runtime}) p50 {np.median(t) * 1e3:.2f}" for r, t in times.items()))
    # the encoder's ceiling: batches of 16 as under load, tokens per second on one thread
    onnx = encs["onnx"]
    for kind in ("short", "realistic"):
        texts = [body(50_000 + i, kind)["messages"][0]["content"] for i in range(16)]
        tokens = sum(len(x) for x in onnx.tokenizer(texts)["input_ids"]) / 16
        onnx.encode(texts)
        t0 = time.perf_counter()
        for _ in range(5):
            onnx.encode(texts)
        per_req = (time.perf_counter() - t0) / (5 * 16)
        print(f"[{kind} prompts] {tokens:.0f} tokens per prompt; the ONNX encoder in batches of 16 takes "
              f"{per_req * 1e3:.2f} ms per prompt: at most {1 / per_req:.0f} requests/s on one thread for the "
              "embedding alone")
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        a = np.random.default_rng(0).random((512, 512), dtype=np.float32)
        a @ a
        t0 = time.perf_counter()
        for _ in range(20):
            a @ a
        gflops = 2 * 512 ** 3 * 20 / (time.perf_counter() - t0) / 1e9
    print(f"this core: {gflops:.0f} GFLOP/s in a float32 matmul (numpy, one thread); MiniLM-L6 needs about "
          "21 MFLOP per token (6 layers of 4 x 384^2 + 2 x 384 x 1536 multiply-adds)")


def pct(x, q) -> float:
    return float(np.percentile(x, q))


async def run(a, service: str, direct: str, spid: int) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    routed = f"{service}/v1/chat/completions"
    for kind in ("short", "realistic"):
        await sequential(direct, 20, 10_000_000, kind, {})  # warm-up both paths
        await sequential(routed, 20, 20_000_000, kind, auth)
        d, s = [], []
        for k in range(5):  # interleave so that load changes hit both paths alike
            d.append(await sequential(direct, a.n // 5, k * a.n, kind, {}))
            s.append(await sequential(routed, a.n // 5, 30_000_000 + k * a.n, kind, auth))
        d, s = np.concatenate(d) * 1e3, np.concatenate(s) * 1e3
        print(f"[{kind} prompts] one client, {len(d)} requests per path (ms): direct p50 {pct(d, 50):.2f} "
              f"p99 {pct(d, 99):.2f}; service p50 {pct(s, 50):.2f} p99 {pct(s, 99):.2f}; "
              f"added p50 {pct(s, 50) - pct(d, 50):.2f} (target <= 10)")
    tm = httpx.get(f"{service}/v1/state", headers=auth).json()["timings_ms"]
    print("  inside the service (ms, last 1000 requests): embedding p50 {embed_p50:.2f} p99 {embed_p99:.2f}; "
          "decision under the lock p50 {decide_p50:.2f} p99 {decide_p99:.2f}".format(**tm))
    rss0 = rss_mb(spid)
    for kind in ("short", "realistic"):
        rps_d, ld = await load(direct, a.seconds, a.concurrency, 40_000_000, kind, {})
        rps_s, ls = await load(routed, a.seconds, a.concurrency, 50_000_000, kind, auth)
        print(f"[{kind} prompts] {a.concurrency} clients, {a.seconds:g} s: direct {rps_d:.0f} req/s "
              f"(p50 {pct(ld, 50):.1f} ms, p99 {pct(ld, 99):.1f}); service {rps_s:.0f} req/s "
              f"(p50 {pct(ls, 50):.1f} ms, p99 {pct(ls, 99):.1f}) (targets >= 150 req/s, p99 <= 250 ms)")
    rss1 = rss_mb(spid)
    st = httpx.get(f"{service}/v1/state", headers=auth).json()
    print(f"service RSS {rss0:.0f} MB before the concurrent load, {rss1:.0f} MB after: growth {rss1 - rss0:.0f} MB "
          f"(target <= 150); routed {st['t']} in all, {st['requests_failed']} failed; encoder runtime "
          f"{st['encoder_runtime']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--encoder", default="minilm")
    ap.add_argument("--runtime", default="onnx", choices=RUNTIMES)
    ap.add_argument("--mode", default="guarded")
    ap.add_argument("--n", type=int, default=200, help="sequential requests per path and prompt kind")
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each concurrent run")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--threads", type=int, default=DEFAULT_ENCODER_THREADS,
                    help="the encoder's threads (serve --threads; the same default)")
    ap.add_argument("--embed-wait-ms", type=float, default=2.0)
    ap.add_argument("--skip-encoders", action="store_true", help="skip the in-process encoder comparison")
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
                               "--encoder-runtime", a.runtime, "--embed-wait-ms", str(a.embed_wait_ms),
                               "--state-dir", str(tmp / "state"), "--threads", str(a.threads)],
                              env={**os.environ, "SLAROUTER_MASTER_KEY": KEY},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(sp)
        service = f"http://127.0.0.1:{sport}"
        wait_up(f"{service}/healthz", sp)
        if not a.skip_encoders:
            encoder_paths(a.encoder, 100)
        print(f"cores: {os.cpu_count()}; load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())}; "
              f"encoder {a.encoder} ({a.runtime}, {a.threads} thread(s)); mode {a.mode}; "
              "fake backends with no added latency")
        asyncio.run(run(a, service, f"http://127.0.0.1:{ports['small']}/v1/chat/completions", sp.pid))
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
