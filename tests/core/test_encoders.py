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
