from __future__ import annotations

import time

import numpy as np
import pytest

from slarouter_core.encoders import EmbeddingCache, EncoderUnavailableError, HashingEncoder, get_encoder

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


@pytest.mark.parametrize("spec", ["word2vec", "", "hashing:abc", "hf:", "hf:/nonexistent/model/path",
                                  "hf:some-org/surely-not-cached-model-xyz"])
def test_unavailable_encoders_fail_fast(spec):
    start = time.time()
    with pytest.raises(EncoderUnavailableError):
        get_encoder(spec)
    assert time.time() - start < 10


def test_local_hf_encoder(tmp_path):
    from transformers import BertConfig, BertModel, BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "tax"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab))
    tok = BertTokenizerFast(vocab_file=str(tmp_path / "vocab.txt"))
    model = BertModel(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=37))
    out = tmp_path / "tiny"
    tok.save_pretrained(out)
    model.save_pretrained(out)
    enc = get_encoder(f"hf:{out}")
    X = enc.encode(["the cat sat", "tax"])
    assert X.shape == (2, 32)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=1e-5)
    assert np.array_equal(X, enc.encode(["the cat sat", "tax"]))
    # length-bucketed batches: a text's vector does not depend on what it is batched with
    enc.max_batch_tokens = 4
    texts = ["the cat sat on the mat", "tax", "the cat", "cat sat on the mat the tax"]
    one_by_one = np.stack([enc.encode([t])[0] for t in texts])
    np.testing.assert_allclose(enc.encode(texts), one_by_one, atol=1e-5)
    enc.max_batch_tokens = 4096
    np.testing.assert_allclose(enc.encode(texts), one_by_one, atol=1e-5)


def test_packaged_minilm_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    enc = get_encoder("minilm")
    X = enc.encode(TEXTS[:3])
    assert X.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=1e-5)
    assert X[0] @ X[1] > X[0] @ X[2] + 0.2  # paraphrase closer than an unrelated sentence


def test_traced_minilm_gives_the_eager_vectors_for_any_length_and_batch():
    eager = get_encoder("minilm")
    traced = get_encoder("minilm", traced=True)
    assert traced.traced_forward is not None and traced.trace_problem is None
    assert eager.traced_forward is None
    texts = ["hi", "a much longer request about the tax code of a small country " * 6] + TEXTS[:3]
    np.testing.assert_allclose(traced.encode(texts), eager.encode(texts), atol=1e-5)
    # one text at a time (the service's path) and batched with padding agree too
    np.testing.assert_allclose(np.stack([traced.encode([t])[0] for t in texts]), eager.encode(texts), atol=1e-5)


def test_a_model_that_does_not_trace_stays_eager(monkeypatch):
    import torch

    def broken_trace(*a, **k):
        raise RuntimeError("unsupported op")
    monkeypatch.setattr(torch.jit, "trace", broken_trace)
    enc = get_encoder("minilm", traced=True)
    assert enc.traced_forward is None and "unsupported op" in enc.trace_problem
    assert enc.encode(["still works"]).shape == (1, 384)


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
    from slarouter_core.encoders import embed_texts
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
    from slarouter_core.encoders import text_keys
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
    import slarouter_core.encoders as encoders
    monkeypatch.setattr(encoders, "MERGE_SMALL_PARTS", 3)
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
        from slarouter_core.encoders import embed_texts
        texts = [f"question number {i} about topic {i % 7}" for i in range(50)]
        assert np.array_equal(embed_texts(texts, "hashing", cache=root), HashingEncoder(384).encode(texts))
        assert len(EmbeddingCache(root).missing(texts + ["new"], HashingEncoder(384))) == 1
