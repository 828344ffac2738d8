"""Several processes using one embedding-cache folder at once (the stress harness behind
``test_embedding_cache_concurrency.py`` and ``benchmarks/bench_cache_race.py``).

Each worker (a spawned process) loops for a while over requests that mix

* texts the parent cached before the workers started (``pre``): never to be encoded again,
* texts every worker asks for (``shared``): encoded by whoever misses them first, and
* the worker's own texts (``own``): no other worker asks for them,

with sizes drawn so that parts of both kinds ("small" and "big", see ``ENCODE_BLOCK``)
are written and small-part merges trigger often (the thresholds are lowered in the
workers); some workers also call ``compact()``, ``info()`` and ``missing()`` as the
dashboard or the CLI would. Everything a worker's cache calls raise is recorded.

Checks, whatever the encoder (hashing, a numpy-only stand-in that starts fast, or the
packaged MiniLM):

* nothing raises; a text cached before the workers started is never encoded again;
* every returned vector equals a fresh encoding bit for bit (up to the batch factor with
  ``batch_sensitive``; not checked for MiniLM);
* a text comes back with the same bits from every call in every worker, and those are the
  bits the cache holds at the end: a run never sees other numbers than the runs before and
  after it. This matters because encoders are not bit-stable across batches: MiniLM
  returns a text encoded alone and in a batch of 60 with differences of ~1e-7 in about
  half the texts. ``batch_sensitive`` wraps the encoder so that its last bits depend on
  the batch size, to show the same with a cheap encoder.
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import time
import traceback
from dataclasses import asdict, dataclass, field

import numpy as np


class NumpyEncoder:
    """Deterministic vectors from the text's SHA-1 (numpy only: a spawned worker starts in
    a fraction of the second the hashing encoder's scikit-learn import takes)."""

    def __init__(self, dim: int = 16):
        self.dim = dim

    @property
    def spec(self) -> str:
        return f"numpy:{self.dim}"

    def cache_id(self) -> str:
        return f"numpy-{self.dim}-v1"

    def encode(self, texts, progress=None):
        out = np.empty((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha1(t.encode()).digest()[:8], "little")
            out[i] = np.random.default_rng(seed).standard_normal(self.dim)
        return out


class BatchSensitiveEncoder:
    """An encoder's vectors scaled by a factor that depends on the batch size (1 + k 2^-22):
    the same text encoded in batches of other sizes differs in its last bits, like a
    transformer's padded batches (MiniLM: ~1e-7)."""

    def __init__(self, base):
        self.base, self.dim = base, base.dim

    @property
    def spec(self) -> str:
        return f"batchsensitive-{self.base.spec}"

    def cache_id(self) -> str:
        return f"batchsensitive-{self.base.cache_id()}"

    def encode(self, texts, progress=None):
        out = self.base.encode(texts, progress)
        return out * np.float32(1 + (len(texts) % 5) * 2.0 ** -22)


class Recording:
    """Wraps an encoder; remembers every text it was asked to encode."""

    def __init__(self, enc):
        self.enc, self.dim, self.seen = enc, enc.dim, []

    @property
    def spec(self):
        return self.enc.spec

    def cache_id(self):
        return self.enc.cache_id()

    def encode(self, texts, progress=None):
        self.seen.extend(texts)
        return self.enc.encode(texts, progress)


def make_encoder(cfg: "Config", fresh: bool = False):
    """The workers' encoder (``fresh``: its batch-independent reference, None for MiniLM)."""
    from slarouter_core.encoders import HashingEncoder, get_encoder
    if cfg.encoder == "minilm":
        return None if fresh else get_encoder("minilm")
    base = HashingEncoder(cfg.dim) if cfg.encoder == "hashing" else NumpyEncoder(cfg.dim)
    return base if fresh or not cfg.batch_sensitive else BatchSensitiveEncoder(base)


@dataclass
class Config:
    workers: int = 4
    seconds: float = 3.0
    min_calls: int = 8           # per worker, however long they take (a busy machine)
    encoder: str = "hashing"     # "hashing", "numpy" (fast start) or "minilm" (the real thing, slow)
    batch_sensitive: bool = False
    dim: int = 16
    pre: int = 300               # texts cached before the workers start
    pre_parts: int = 6           # ... in this many parts
    legacy: bool = False         # ... of which half as old-format shards (migrated at once by all)
    shared: int = 1500           # texts every worker asks for
    own: int = 3000              # texts per worker that only it asks for
    block: int = 64              # ENCODE_BLOCK in the workers (parts >= this are "big")
    merge: int = 3               # MERGE_SMALL_PARTS in the workers
    compactors: int = 1          # workers that also call compact()/info()
    seed: int = 0


@dataclass
class WorkerResult:
    worker: int
    calls: int = 0
    compactions: int = 0
    errors: list = field(default_factory=list)        # tracebacks, first few
    error_count: int = 0
    error_kinds: dict = field(default_factory=dict)   # "what: exception type" -> count
    wrong: int = 0                                    # exact: vectors != a fresh encoding
    pre_reencoded: int = 0                            # cached-before-start texts encoded again
    compact_skipped: int = 0                          # compact() that did not see the encoder
    digests: dict = field(default_factory=dict)       # text -> set of vector digests


def texts_of(cfg: Config):
    pre = [f"cached before the start {i} about topic {i % 13}" for i in range(cfg.pre)]
    shared = [f"shared request {i} about subject {i % 17}" for i in range(cfg.shared)]
    own = [[f"worker {w} own request {i} on {i % 11}" for i in range(cfg.own)] for w in range(cfg.workers)]
    return pre, shared, own


def prefill(root: str, cfg: Config) -> None:
    """The ``pre`` texts, cached in ``pre_parts`` parts (half of them as legacy shards)."""
    from slarouter_core.embedding_cache import EmbeddingCache, text_keys
    enc = make_encoder(cfg)
    pre, _, _ = texts_of(cfg)
    cache = EmbeddingCache(root)
    chunks = np.array_split(np.arange(len(pre)), cfg.pre_parts)
    for k, idx in enumerate(chunks):
        texts = [pre[i] for i in idx]
        if cfg.legacy and k % 2:
            d = cache._dir(enc)
            d.mkdir(parents=True, exist_ok=True)
            np.savez(d / f"shard-{k:05d}-1.npz", keys=text_keys(texts), vectors=enc.encode(texts))
        else:
            cache.embed(texts, enc)


def _digest(v: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(v, np.float32).tobytes()).hexdigest()[:16]


def worker(w: int, root: str, cfg: Config, barrier, queue) -> None:
    import slarouter_core.embedding_cache as ec
    ec.ENCODE_BLOCK, ec.MERGE_SMALL_PARTS = cfg.block, cfg.merge
    res = WorkerResult(w)
    pre, shared, own = texts_of(cfg)
    pre_set = set(pre)
    mine = own[w]
    rng = np.random.default_rng([cfg.seed, w])
    enc = Recording(make_encoder(cfg))
    fresh = make_encoder(cfg, fresh=True)
    digests: dict[str, set] = {}

    def fail(what: str) -> None:
        res.error_count += 1
        kind = f"{what}: {traceback.format_exc().strip().splitlines()[-1].split(':')[0]}"
        res.error_kinds[kind] = res.error_kinds.get(kind, 0) + 1
        if len(res.errors) < 5:
            res.errors.append(f"worker {w} {what}:\n{traceback.format_exc()}")

    enc.enc.encode(["warm up"])  # imports (seconds on a busy machine) before the start line
    barrier.wait()
    stop = time.monotonic() + cfg.seconds
    pos = 0
    while time.monotonic() < stop or res.calls + res.error_count < cfg.min_calls:
        cache = ec.EmbeddingCache(root)  # a new object, as a new process or run would make
        if w < cfg.compactors and res.calls % 4 == 3:
            try:
                done = cache.compact()
                res.compactions += 1
                if not any(r["encoder"] == enc.spec for r in done):
                    res.compact_skipped += 1
                cache.info()
            except Exception:  # noqa: BLE001 - recorded, the check fails on it
                fail("compact/info")
        # a request: some cached-before texts, some shared ones, a slice of its own
        big = rng.random() < 0.15
        n_own = int(rng.integers(cfg.block, 2 * cfg.block + 1)) if big else int(rng.integers(1, cfg.block // 2 + 2))
        req = [pre[i] for i in rng.choice(len(pre), int(rng.integers(0, 40)), replace=False)] if pre else []
        req += [shared[i] for i in rng.choice(len(shared), int(rng.integers(1, 60)), replace=False)]
        req += [mine[(pos + i) % len(mine)] for i in range(n_own)]
        pos += n_own
        rng.shuffle(req)
        enc.seen = []
        try:
            if rng.random() < 0.1:
                cache.missing(req, enc)
            out = cache.embed(req, enc)
        except Exception:  # noqa: BLE001
            fail("embed")
            continue
        res.calls += 1
        res.pre_reencoded += sum(t in pre_set for t in enc.seen)
        if fresh is not None:
            ref = fresh.encode(req)
            if cfg.batch_sensitive:  # equal up to the batch factor
                res.wrong += int((~np.isclose(out, ref, rtol=4e-6, atol=0)).any(1).sum())
            else:  # bit for bit
                res.wrong += int((out.view(np.uint32) != ref.view(np.uint32)).any(1).sum())
        for t, v in zip(req, out):
            digests.setdefault(t, set()).add(_digest(v))
    res.digests = digests
    queue.put(asdict(res))


def run(root: str, cfg: Config) -> dict:
    """Run the workers against ``root`` (prefilled here); returns the summary with every
    problem found (``ok`` is True when there is none)."""
    from slarouter_core.embedding_cache import EmbeddingCache
    prefill(root, cfg)
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(cfg.workers), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(w, root, cfg, barrier, queue)) for w in range(cfg.workers)]
    for p in procs:
        p.start()
    results = []
    deadline = time.monotonic() + cfg.seconds + 300
    try:
        while len(results) < len(procs) and time.monotonic() < deadline:
            try:
                results.append(queue.get(timeout=1))
            except Exception:  # noqa: BLE001 - queue.Empty: is anyone still working?
                if not any(p.is_alive() for p in procs):
                    break
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    # what the cache holds now, read by a fresh process-like object that must not encode
    everything: dict[str, set] = {}
    for r in results:
        for t, ds in r["digests"].items():
            everything.setdefault(t, set()).update(ds)

    class Refuse:
        def __init__(self, e):
            self.dim, self.spec, self.cache_id, self.e = e.dim, e.spec, e.cache_id, e

        def encode(self, texts, progress=None):
            raise AssertionError(f"{len(texts)} text(s) returned earlier are not in the cache")

    texts = sorted(everything)
    enc = make_encoder(cfg)
    problems = []
    final = {}
    try:
        final = dict(zip(texts, map(_digest, EmbeddingCache(root).embed(texts, Refuse(enc)))))
    except AssertionError as exc:
        problems.append(str(exc))
    pre_set = set(texts_of(cfg)[0])
    flipped = sum(len(ds) > 1 for ds in everything.values())
    flipped_pre = sum(len(ds) > 1 for t, ds in everything.items() if t in pre_set)
    unlike_cache = sum(final and final.get(t) not in ds for t, ds in everything.items())
    summary = {
        "config": asdict(cfg),
        "calls": sum(r["calls"] for r in results),
        "compactions": sum(r["compactions"] for r in results),
        "errors": sum(r["error_count"] for r in results),
        "error_kinds": {k: sum(r["error_kinds"].get(k, 0) for r in results)
                        for k in sorted({k for r in results for k in r["error_kinds"]})},
        "wrong_vectors": sum(r["wrong"] for r in results),
        "pre_reencoded": sum(r["pre_reencoded"] for r in results),
        "compact_skipped": sum(r["compact_skipped"] for r in results),
        "texts_with_several_bit_patterns": flipped,
        "of_which_cached_before_the_start": flipped_pre,
        "texts_unlike_the_cache": unlike_cache,
        "tracebacks": [e for r in results for e in r["errors"]][:5],
    }
    if len(results) < cfg.workers:
        problems.append(f"only {len(results)} of {cfg.workers} workers reported")
    for key in ("errors", "wrong_vectors", "pre_reencoded", "compact_skipped",
                "texts_with_several_bit_patterns", "texts_unlike_the_cache"):
        if summary[key]:
            problems.append(f"{key}: {summary[key]}")
    summary["problems"] = problems
    summary["ok"] = not problems
    summary["parts_left"] = [(i["parts"], i["vectors"]) for i in EmbeddingCache(root).info()]
    return summary


if __name__ == "__main__":  # pragma: no cover - a quick manual run
    import json
    import sys
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        s = run(tmp, Config(encoder=sys.argv[1] if len(sys.argv) > 1 else "hashing",
                            batch_sensitive="batch" in sys.argv[2:]))
    print(json.dumps({k: v for k, v in s.items() if k != "config"}, indent=1))
    os._exit(0 if s["ok"] else 1)
