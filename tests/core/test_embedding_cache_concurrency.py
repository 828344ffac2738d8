"""Several processes on one embedding-cache folder (the dashboard and the CLI, parallel
benchmark workers): nothing raises, nothing cached is recomputed, and every text comes
back with the same bits in every process. The long version is
``benchmarks/bench_cache_race.py``."""

from __future__ import annotations

import threading
import time

import numpy as np

import slarouter_core.embedding_cache as ec
from slarouter_core.embedding_cache import EmbeddingCache, text_keys
from slarouter_core.encoders import HashingEncoder
from tests.core.cache_stress import BatchSensitiveEncoder, Config, NumpyEncoder, run


def test_processes_sharing_a_cache_get_the_same_bits_and_lose_nothing(tmp_path):
    """3 spawned workers for ~2.5 s: overlapping and own texts, merges every few calls,
    compact()/info() meanwhile, old-format shards converted by all at once. The old code
    failed this in each of our runs (texts with two bit patterns, compact() raising or
    skipping the folder, cached texts encoded again)."""
    cfg = Config(workers=3, seconds=2.5, encoder="numpy", batch_sensitive=True, legacy=True,
                 pre=300, shared=800, own=2000)
    summary = run(str(tmp_path), cfg)
    assert summary["ok"], (summary["problems"], summary["tracebacks"])
    assert summary["calls"] >= 24 and summary["compactions"] >= 2, summary


class _Texts:
    def __init__(self, encoder):
        self.enc, self.dim, self.spec, self.calls = encoder, encoder.dim, encoder.spec, []

    def cache_id(self):
        return self.enc.cache_id()

    def encode(self, texts, progress=None):
        self.calls.append(list(texts))
        return self.enc.encode(texts, progress)


def test_a_part_merged_away_after_the_listing_is_not_a_miss(tmp_path, monkeypatch):
    """Reader lists parts P1..P3; another process merges them into M (newer name) and
    removes them; the reader's open of P1..P3 fails. Before: those texts were encoded
    again (with MiniLM, other bits than the cached ones). Now: looked up again under the
    commit lock, where merges swap parts."""
    enc = _Texts(HashingEncoder(16))
    cache = EmbeddingCache(tmp_path)
    texts = [f"text {i}" for i in range(30)]
    for a in range(0, 30, 10):
        cache.embed(texts[a:a + 10], enc)
    d = cache._dir(enc)
    assert len(ec._list_parts(d)) == 3
    listing = ec._list_parts
    merged = []

    def list_then_merge(folder):
        names = listing(folder)
        if not merged:  # the other process, right after this one listed the folder
            merged.append(True)
            other = EmbeddingCache(tmp_path)
            assert other._merge(folder, other._parts(folder, 16), 16)
        return names
    monkeypatch.setattr(ec, "_list_parts", list_then_merge)
    calls = len(enc.calls)
    out = EmbeddingCache(tmp_path).embed(texts, enc)
    assert merged and len(enc.calls) == calls  # nothing encoded again
    assert np.array_equal(out, HashingEncoder(16).encode(texts))
    assert len(listing(d)) == 1


def test_two_processes_encoding_one_text_return_the_first_committed_bits(tmp_path):
    """A misses text t and encodes it; meanwhile B (another batch, so other last bits)
    encodes and commits t. A must return B's committed vector and not store t twice:
    before, A returned its own bits while later runs read B's (or, after a merge, A's)."""
    base = HashingEncoder(16)
    text = "the same text, asked for by two processes"

    class A(_Texts):
        def encode(self, texts, progress=None):
            EmbeddingCache(tmp_path).embed([text, "b's other text"], b)  # B commits first
            return super().encode(texts, progress)
    b = BatchSensitiveEncoder(base)  # batch of 2: factor 1 + 2 * 2^-22
    a = A(b)                          # batch of 1: factor 1 + 2^-22
    got = EmbeddingCache(tmp_path).embed([text], a)
    expect = EmbeddingCache(tmp_path).embed([text, "b's other text"], b)[:1]
    assert a.calls == [[text]] and got.tobytes() == expect.tobytes()
    assert got.tobytes() != b.encode([text]).tobytes()  # A's own bits were different
    (info,) = EmbeddingCache(tmp_path).info()
    assert info["vectors"] == 2  # t stored once


def test_a_commit_of_a_block_partly_committed_elsewhere_stores_only_the_rest(tmp_path):
    enc = NumpyEncoder(8)
    other = ["x", "y"]

    class Racing(_Texts):
        def encode(self, texts, progress=None):
            EmbeddingCache(tmp_path).embed(other, enc)
            return super().encode(texts, progress)
    texts = ["w", "x", "y", "z"]
    out = EmbeddingCache(tmp_path).embed(texts, Racing(enc))
    assert np.array_equal(out, enc.encode(texts))
    (info,) = EmbeddingCache(tmp_path).info()
    assert info["vectors"] == 4 and info["parts"] == 2


def test_compact_waits_for_a_merge_in_another_process(tmp_path):
    """Before, compact() raised 'being compacted by another process' whenever a writer's
    automatic small-part merge held the lock."""
    enc = NumpyEncoder(8)
    cache = EmbeddingCache(tmp_path)
    for k in range(3):
        cache.embed([f"t{k}-{i}" for i in range(5)], enc)
    d = cache._dir(enc)
    held, release = threading.Event(), threading.Event()

    def merger():  # flock is per open file: a second open in this process is "another process"
        with EmbeddingCache(tmp_path)._locked(d) as got:
            assert got
            held.set()
            release.wait(5)
    t = threading.Thread(target=merger)
    t.start()
    held.wait(5)
    threading.Timer(0.3, release.set).start()
    t0 = time.monotonic()
    (done,) = cache.compact()
    t.join()
    assert time.monotonic() - t0 >= 0.25 and done["parts_after"] == 1


def test_a_lock_file_removed_by_clear_is_not_held_twice(tmp_path, monkeypatch):
    """W waits on the lock file; clear() removes it; N locks the new file. When the old
    holder lets go, W must not think it holds the lock while N does."""
    d = tmp_path / "enc"
    d.mkdir()
    order = []
    h_has, w_opened, n_has = (threading.Event() for _ in range(3))

    def opening(path, mode):  # tells when W has opened the (old) lock file
        fh = open(path, mode)
        if threading.current_thread().name == "W":
            w_opened.set()
        return fh
    monkeypatch.setattr(ec, "open", opening, raising=False)

    def holder():
        with ec._flock(d, ".lock", wait=True):
            h_has.set()
            w_opened.wait(5)
            (d / ".lock").unlink()    # clear()
            order.append("removed")
            newcomer = threading.Thread(target=new)
            newcomer.start()
            n_has.wait(5)
        newcomer.join()

    def new():
        with ec._flock(d, ".lock", wait=True):
            order.append("N in")
            n_has.set()
            time.sleep(0.3)
            order.append("N out")

    def waiter():
        h_has.wait(5)
        with ec._flock(d, ".lock", wait=True):
            order.append("W in")
    threads = [threading.Thread(target=holder), threading.Thread(target=waiter, name="W")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert order == ["removed", "N in", "N out", "W in"], order


def test_encoder_json_is_replaced_atomically_and_only_when_it_differs(tmp_path, monkeypatch):
    """It was rewritten in place on every call that encoded something, so a concurrent
    compact() or info() could read it empty and skip (or misname) the folder."""
    import pathlib
    writes = []
    write_text = pathlib.Path.write_text
    monkeypatch.setattr(pathlib.Path, "write_text", lambda self, *a, **k: (writes.append(self.name),
                                                                           write_text(self, *a, **k))[1])
    enc = NumpyEncoder(8)
    cache = EmbeddingCache(tmp_path)
    cache.embed(["a"], enc)
    cache.embed(["b"], enc)
    assert "encoder.json" not in writes and len(writes) == 1  # one temporary file, renamed
    assert (cache._dir(enc) / "encoder.json").read_text() == '{"spec": "numpy:8", "dim": 8}'
    assert not list(cache._dir(enc).glob(".tmp-*"))


def test_old_format_shards_converted_by_two_processes_are_stored_once(tmp_path):
    """Two processes converting one shard at once stored its keys twice (harmless with
    equal bits, but a merge could then pick either copy of a duplicated key)."""
    enc = NumpyEncoder(8)
    texts = [f"old {i}" for i in range(20)]
    d = tmp_path / enc.cache_id()
    d.mkdir()
    (d / "encoder.json").write_text('{"spec": "numpy:8", "dim": 8}')
    np.savez(d / "shard-00000-1.npz", keys=text_keys(texts), vectors=enc.encode(texts))
    load = np.load
    seen = []

    def load_then_other_converts(path, *a, **k):
        z = load(path, *a, **k)
        if not seen:  # the second process converts the same shard meanwhile
            seen.append(path)
            EmbeddingCache(tmp_path)._migrate(d, 8)
        return z
    import unittest.mock as mock
    with mock.patch.object(ec.np, "load", load_then_other_converts):
        out = EmbeddingCache(tmp_path).embed(texts + ["new"], _Texts(enc))
    assert np.array_equal(out[:20], enc.encode(texts))
    (info,) = EmbeddingCache(tmp_path).info()
    assert info["vectors"] == 21 and info["legacy_shards"] == 0
