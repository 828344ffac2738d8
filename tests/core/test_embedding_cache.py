from __future__ import annotations

import numpy as np
import pytest

from slarouter_core.embedding_cache import EmbeddingCache
from slarouter_core.encoders import HashingEncoder

TEXTS = ["the cat sat on the mat", "a cat is sitting on a mat", "quarterly tax filing deadline", "the cat sat on the mat"]


def test_hashing_cache_round_trip(tmp_path, monkeypatch):
    cache = EmbeddingCache(tmp_path)
    enc = HashingEncoder(64)
    a = cache.embed(TEXTS, enc)
    assert a.shape == (4, 64) and np.array_equal(a[0], a[3])
    monkeypatch.setattr(enc, "encode", lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
    assert np.array_equal(cache.embed(TEXTS, enc), a)


def test_only_missing_texts_are_encoded_and_corrupt_shards_ignored(tmp_path):
    cache = EmbeddingCache(tmp_path)
    enc = HashingEncoder(32)
    cache.embed(TEXTS[:2], enc)
    seen = []
    orig = enc.encode
    enc.encode = lambda texts, progress=None: (seen.extend(texts), orig(texts, progress))[1]
    cache.embed(TEXTS, enc)
    assert sorted(seen) == sorted(set(TEXTS) - set(TEXTS[:2]))
    shard_dir = next(tmp_path.iterdir())
    (shard_dir / "shard-99999-0.npz").write_bytes(b"torn write")
    out = cache.embed(TEXTS, enc)
    assert out.shape == (4, 32)


# -- hardening (issue 11) -------------------------------------------------------------------

class CountingEncoder:
    """Cheap deterministic vectors (from the text's hash) that count what they encode."""

    def __init__(self, dim=16, name="counting"):
        self.dim, self.spec, self.calls = dim, name, []

    def cache_id(self):
        return f"{self.spec}-{self.dim}"

    def encode(self, texts, progress=None):
        self.calls.append(len(texts))
        import zlib
        out = np.empty((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            out[i] = np.random.default_rng(zlib.crc32(t.encode("utf-8", "surrogatepass"))).standard_normal(self.dim)
        if progress:
            progress(len(texts), len(texts))
        return out


def test_lone_surrogate_in_a_prompt_is_a_clear_error(tmp_path):
    from slarouter_core.embedding_cache import embed_texts
    texts = ["fine", "broken \ud800 text", "fine too"]
    with pytest.raises(ValueError, match=r"text 1 is not valid Unicode.*surrogate.*'\\ud800'.*fix or drop"):
        embed_texts(texts, "hashing:16", cache=tmp_path)


def test_a_lookup_reads_only_the_keys_it_needs(tmp_path):
    import tracemalloc
    enc = CountingEncoder(dim=32)
    cache = EmbeddingCache(tmp_path)
    big = [f"cached request {i}" for i in range(60_000)]  # 60k x 32 float32 = 7.7 MB cached
    cache.embed(big, enc)
    wanted = big[100:110] + ["a new one"]
    tracemalloc.start()
    out = EmbeddingCache(tmp_path).embed(wanted, enc)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert np.array_equal(out[:10], enc.encode(big[100:110]))
    assert enc.calls[-2] == 1  # only the new text was encoded
    assert peak < 1_500_000, peak  # far below the 7.7 MB of cached vectors


def test_the_previous_cache_format_is_read_and_converted(tmp_path):
    from slarouter_core.embedding_cache import text_keys
    enc = HashingEncoder(16)
    texts = [f"old text {i}" for i in range(50)]
    vecs = enc.encode(texts)
    d = tmp_path / enc.cache_id()
    d.mkdir()
    (d / "encoder.json").write_text('{"spec": "hashing:16", "dim": 16}')
    np.savez(d / "shard-00000-1.npz", keys=text_keys(texts[:30]), vectors=vecs[:30])  # the old layout
    np.savez(d / "shard-00001-1.npz", keys=text_keys(texts[20:]), vectors=vecs[20:])
    calls = []
    orig = enc.encode
    enc.encode = lambda t, progress=None: (calls.append(len(t)), orig(t, progress))[1]
    out = EmbeddingCache(tmp_path).embed(texts + ["new"], enc)
    assert np.array_equal(out[:50], vecs) and calls == [1]
    assert not list(d.glob("*.npz")) and len(list(d.glob("part-*.emb"))) == 3


def test_torn_parts_are_ignored_and_duplicates_resolved(tmp_path):
    enc = CountingEncoder(dim=8)
    cache = EmbeddingCache(tmp_path)
    ref = cache.embed(["a", "b", "c", "a"], enc)
    assert np.array_equal(ref[0], ref[3]) and enc.calls == [3]
    part = next((tmp_path / enc.cache_id()).glob("part-*.emb"))
    data = part.read_bytes()
    part.write_bytes(data[:-5])  # torn
    assert np.array_equal(cache.embed(["a", "b", "c"], enc), ref[:3]) and enc.calls == [3, 3]


def test_cache_info_compact_and_clear(tmp_path, capsys):
    from slarouter_core.cli import main
    enc = CountingEncoder(dim=8)
    cache = EmbeddingCache(tmp_path)
    for k in range(5):
        cache.embed([f"text {k} {i}" for i in range(20)] + ["shared"], enc)
    (info,) = cache.info()
    assert info["encoder"] == "counting" and info["vectors"] == 101 and info["parts"] == 5
    before = cache.embed([f"text {k} {i}" for k in range(5) for i in range(20)], enc)
    assert main(["cache", "compact", "--cache-dir", str(tmp_path)]) == 0
    assert "5 -> 1 part" in capsys.readouterr().out
    (info,) = cache.info()
    assert info["vectors"] == 101 and info["parts"] == 1
    calls = len(enc.calls)
    assert np.array_equal(cache.embed([f"text {k} {i}" for k in range(5) for i in range(20)], enc), before)
    assert len(enc.calls) == calls  # nothing recomputed after compaction
    assert main(["cache", "info", "--cache-dir", str(tmp_path)]) == 0
    assert "counting" in capsys.readouterr().out
    keep = tmp_path / "notes.txt"
    keep.write_text("the user's own file")
    assert main(["cache", "clear", "--cache-dir", str(tmp_path)]) == 0
    assert cache.info() == [] and keep.read_text() == "the user's own file"
    assert main(["cache", "info", "--cache-dir", str(tmp_path)]) == 0
    assert "empty" in capsys.readouterr().out


def test_many_small_parts_are_merged(tmp_path, monkeypatch):
    import slarouter_core.embedding_cache as embedding_cache
    monkeypatch.setattr(embedding_cache, "MERGE_SMALL_PARTS", 3)
    enc = CountingEncoder(dim=4)
    cache = EmbeddingCache(tmp_path)
    texts = []
    for k in range(6):
        texts += [f"t{k}-{i}" for i in range(5)]
        cache.embed(texts, enc)
    assert cache.info()[0]["parts"] <= 4 and cache.info()[0]["vectors"] == 30
    n = len(enc.calls)
    cache.embed(texts, enc)
    assert len(enc.calls) == n


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_parallel_workers_fill_the_shared_cache(tmp_path, backend, capsys):
    from slarouter_core.cli import main
    from slarouter_core.data import write_parquet
    from tests.conftest import make_frame
    if backend == "ray":
        pytest.importorskip("ray")
    path = write_parquet(make_frame(n=50), tmp_path / "d.parquet")
    root = tmp_path / "shared-cache"
    EmbeddingCache(root).embed([f"question number {i} about topic {i % 7}" for i in range(10)], HashingEncoder(384))
    argv = ["embed", "--data", str(path), "--encoder", "hashing", "--cache-dir", str(root),
            "--backend", backend, "--jobs", "2", "--chunk", "15"]
    assert main(argv) == 0, capsys.readouterr().err
    assert "40 new embeddings of 50 texts" in capsys.readouterr().out
    (info,) = EmbeddingCache(root).info()
    assert info["vectors"] == 50
    if backend == "local":
        from slarouter_core.embedding_cache import embed_texts
        texts = [f"question number {i} about topic {i % 7}" for i in range(50)]
        assert np.array_equal(embed_texts(texts, "hashing", cache=root), HashingEncoder(384).encode(texts))
        assert len(EmbeddingCache(root).missing(texts + ["new"], HashingEncoder(384))) == 1


def test_the_cache_lives_in_its_own_module_only():
    """Issue 20: encoders.py no longer re-exports the cache (that made an import cycle)."""
    import slarouter_core.encoders as encoders

    assert not hasattr(encoders, "EmbeddingCache") and not hasattr(encoders, "embed_texts")
