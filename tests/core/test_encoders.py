from __future__ import annotations

import time

import numpy as np
import pytest

from slarouter_core.encoders import (EncoderUnavailableError, LazyEncoder, check_encoder_spec, get_encoder,
                                     split_layers)

TEXTS = ["the cat sat on the mat", "a cat is sitting on a mat", "quarterly tax filing deadline", "the cat sat on the mat"]


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



@pytest.mark.parametrize("spec, canonical, layers", [("minilm+layers=6,2,4", "minilm+layers=2,4,6", (2, 4, 6)),
                                                     (" hf:org/model+layers=3 ", "hf:org/model+layers=3", (3,)),
                                                     ("minilm", "minilm", None)])
def test_a_layer_list_is_read_and_written_one_way(spec, canonical, layers):
    assert check_encoder_spec(spec) == canonical
    assert split_layers(canonical) == (canonical.split("+")[0], layers)


@pytest.mark.parametrize("spec, why", [("minilm+layers=", "Bad layer list"), ("minilm+layers=2,2", "distinct"),
                                       ("minilm+layers=-1", "Bad layer list"), ("minilm+layers=a", "Bad layer list"),
                                       ("minilm+layers=1+layers=2", "one list"),
                                       ("hashing+layers=1", "transformer encoders"),
                                       ("word2vec+layers=1", "Unknown encoder"),
                                       ("minilm+layers=7", "layers 0-6")])
def test_a_bad_layer_list_is_refused_with_the_reason(spec, why):
    with pytest.raises(EncoderUnavailableError, match=why):
        get_encoder(spec)


def test_pooled_layers_are_each_layers_mean_normalised_then_summed():
    import torch

    enc = get_encoder("minilm+layers=2,4,6")
    assert enc.dim == 384 and enc.layers == (2, 4, 6)
    X = enc.encode(TEXTS)
    batch = enc.tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        states = enc.model(**batch, output_hidden_states=True).hidden_states
    mask = batch["attention_mask"].unsqueeze(-1).float()
    want = sum(torch.nn.functional.normalize((states[i] * mask).sum(1) / mask.sum(1), dim=-1) for i in (2, 4, 6))
    np.testing.assert_allclose(X, torch.nn.functional.normalize(want, dim=-1).numpy(), atol=1e-5)
    # the last layer alone is the plain spec, and another layer set is another vector (and cache entry)
    np.testing.assert_allclose(get_encoder("minilm+layers=6").encode(TEXTS), get_encoder("minilm").encode(TEXTS),
                               atol=1e-6)
    assert np.abs(X - get_encoder("minilm").encode(TEXTS)).max() > 0.05
    assert len({enc.cache_id(), get_encoder("minilm").cache_id(), get_encoder("minilm+layers=2,4").cache_id()}) == 3
    # the traced per-request path pools the same layers, one text at a time or batched
    traced = get_encoder("minilm+layers=2,4,6", traced=True)
    assert traced.traced_forward is not None
    np.testing.assert_allclose(np.stack([traced.encode([t])[0] for t in TEXTS]), X, atol=1e-5)


def test_lazy_encoder_serves_the_cache_without_loading_the_model(tmp_path):
    from slarouter_core.embedding_cache import EmbeddingCache

    loads = []

    def loader():
        loads.append(1)
        return get_encoder("minilm")

    texts = ["Quick check: the sum and the ratio.", "Prove rigorously that the orbit is a cell."]
    cache = EmbeddingCache(tmp_path)
    lazy = LazyEncoder("minilm", loader)
    assert not lazy.loaded and lazy.dim == 384
    first = cache.embed(texts, lazy)  # not cached yet: loads the model once
    assert loads == [1]
    again = LazyEncoder("minilm", loader)
    np.testing.assert_array_equal(cache.embed(texts, again), first)
    assert loads == [1] and not again.loaded
    assert again.cache_id() == get_encoder("minilm").cache_id()
    # the spec is read as get_encoder reads it (same cache id), a bad one refused at once
    assert LazyEncoder(" minilm ").cache_id() == again.cache_id()
    with pytest.raises(EncoderUnavailableError):
        LazyEncoder("word2vec")


def test_the_library_and_the_cli_open_cached_texts_without_loading_weights(tmp_path, monkeypatch):
    """embed_texts, load_dataset, the CLI's embedding step and embed_parallel's driver take a
    spec; a run whose texts are all cached must not pay for loading the encoder (seconds per
    command)."""
    from slarouter_core import cli, encoders
    from slarouter_core.embedding_cache import embed_parallel, embed_texts
    from slarouter_core.experiments.datasets import load_dataset
    from slarouter_core.synthetic import generate_demo_frame
    from slarouter_core.data import from_frame

    frame = generate_demo_frame(40, 0)
    path = tmp_path / "demo.parquet"
    frame.to_parquet(path)
    data = from_frame(frame)
    first = embed_texts(data.texts, "minilm", cache=tmp_path / "cache")  # stores them
    real = encoders.TransformerEncoder.__init__
    loads = []

    def counting(self, source, spec, *args, **kwargs):  # loading weights, from any module
        loads.append(spec)
        real(self, source, spec, *args, **kwargs)

    monkeypatch.setattr(encoders.TransformerEncoder, "__init__", counting)
    np.testing.assert_array_equal(embed_texts(data.texts, "minilm", cache=tmp_path / "cache"), first)
    np.testing.assert_array_equal(load_dataset(path, cache_dir=tmp_path / "cache").embeddings, first)
    np.testing.assert_array_equal(cli._embed(data, "minilm", str(tmp_path / "cache")), first)
    assert embed_parallel(data.texts, "minilm", tmp_path / "cache") == 0  # its driver reads keys only
    assert loads == []
    # a text not cached yet loads the encoder, once
    more = embed_texts(list(data.texts) + ["A text no cache has seen."], "minilm", cache=tmp_path / "cache")
    assert loads == ["minilm"] and np.array_equal(more[:-1], first)
