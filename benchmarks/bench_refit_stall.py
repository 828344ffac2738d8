"""What a refit of the contextual router's text model costs the requests around it, in
the routing service, with the refit in the request that made it due (as before) and on
the service's refit worker (now), side by side in one run.

    .venv/bin/python benchmarks/bench_refit_stall.py [--labels 5000 20000] [--rate 200] [--seconds 1.0]

For each label count and each way, a service (contextual mode, 384-dimensional embeddings as MiniLM's,
the default label ring of 20,000) is filled with that many thumbs, its text model last
fitted at 1/1.25 of them (so the measured refit is warm-started from a fit on 25% fewer
labels, as a running service's is). Then one client thread routes
``--rate`` requests a second (0: back to back, which takes a core from the refit: it then
runs several times as long) while a second gives the thumbs that make the next refit due, and
the script prints the routing latency (p50, p99, max) over the refit, and how long the
refit took. The encoder is a hashing encoder (no model forward: what is measured is the
router, not the text encoder), the backends are not called (the service core in one
process). To make the refit due at a chosen moment the script sets the policy's next
refit point to the next label (a benchmark's shortcut; the refit is the same one).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slarouter_core.encoders import HashingEncoder  # noqa: E402
from slarouter_core.service.core import RoutingService, ServiceConfig  # noqa: E402
from slarouter_core.service.zoo import Zoo, ZooModel  # noqa: E402

DIM = 384


def zoo() -> Zoo:
    return Zoo(tuple(ZooModel(n, "http://127.0.0.1:1/v1", n, price_per_request=p)
                     for n, p in (("small", 0.1), ("medium", 0.4), ("large", 1.0))))


def filled_service(labels: int, seed: int) -> RoutingService:
    """A contextual service holding ``labels`` thumbs, its text model last fitted when it
    held ``labels / 1.25`` of them (a refit falls due each time the count grows by 25%)."""
    svc = RoutingService(zoo(), ServiceConfig(alpha=0.8, mode="contextual", seed=seed), encoder=HashingEncoder(DIM))
    r = svc.router
    rng = np.random.default_rng(seed)
    skill = rng.standard_normal((DIM, 3)) / np.sqrt(DIM) * 3
    X = rng.standard_normal((labels, DIM)).astype(np.float32)
    costs = np.array([0.1, 0.4, 1.0])
    r.defer_refits(True)  # no refits while filling but the one at labels / 1.25
    last_fit = int(labels / 1.25)
    for i in range(labels):
        if i == last_fit:
            job = r.take_refit()
            r.apply_refit(job.run())
        d = r.decide(X[i], costs)
        p = 1.0 / (1.0 + np.exp(-(X[i] @ skill[:, d.model] + d.model)))
        r.observe(d, int(rng.random() < p))
    r.take_refit()  # (dropped: the measured refit is the next one)
    return svc


def measure(svc: RoutingService, worker: bool, seconds: float, rate: float) -> dict:
    """Route back to back while one thumbs makes a refit due; latencies over the refit."""
    svc.router.defer_refits(worker)
    pol = svc.router.policy
    version = pol.version
    ticket = svc.route("the request whose thumbs make the refit due")
    svc.complete(ticket, ticket.model, None)
    lat: list[float] = []
    stop = threading.Event()

    def client():
        k, start = 0, time.perf_counter()
        while not stop.is_set():
            if rate > 0:  # paced: the k-th request is due at start + k / rate
                time.sleep(max(0.0, start + k / rate - time.perf_counter()))
            t0 = time.perf_counter()
            svc.route(f"client request {k} about routing cost and quality")
            lat.append(time.perf_counter() - t0)
            k += 1

    th = threading.Thread(target=client)
    th.start()
    time.sleep(seconds / 4)
    pol.next_fit = pol.n_feedback + pol.n_judge_labels + 1  # the next label makes a refit due
    t0 = time.perf_counter()
    svc.feedback(ticket.request_id, True)
    feedback_s = time.perf_counter() - t0
    svc.wait_refits(600)
    refit_s = time.perf_counter() - t0
    time.sleep(seconds / 4)
    stop.set()
    th.join()
    assert pol.version == version + 1, "the refit did not install"
    a = np.array(lat) * 1e3
    return {"feedback_ms": feedback_s * 1e3, "refit_s": refit_s, "n": len(a), "p50": np.percentile(a, 50),
            "p99": np.percentile(a, 99), "max": a.max()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--labels", type=int, nargs="+", default=[5000, 20000])
    ap.add_argument("--seconds", type=float, default=1.0, help="routing before and after the refit")
    ap.add_argument("--rate", type=float, default=200.0, help="client requests per second (0: back to back)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    pace = f"{args.rate:g} requests/s" if args.rate > 0 else "back to back"
    print(f"contextual service core, {DIM}-dim hashing embeddings, one routing client at {pace}; "
          "latency over the refit")
    print("| labels | refit runs | refit (s) | thumbs call (ms) | requests routed | route p50 (ms) | p99 (ms) | max (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.labels:
        for worker in (False, True):  # each on its own service, filled alike (the same refit)
            m = measure(filled_service(n, args.seed), worker, args.seconds, args.rate)
            where = "on the refit worker (now)" if worker else "in the request (before)"
            print(f"| {n:,} | {where} | {m['refit_s']:.2f} | {m['feedback_ms']:.0f} | {m['n']:,} | {m['p50']:.2f} | "
                  f"{m['p99']:.1f} | {m['max']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
