"""The service's ONNX Runtime encoder: exported once from the packaged MiniLM, cached,
and within cosine 0.9999 of the torch vectors."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from slarouter_core.encoders import get_encoder  # noqa: E402
from slarouter_core.service.onnx_encoder import onnx_path, service_encoder  # noqa: E402

TEXTS = ["hi", "What is the capital of France?", "Explain, step by step, why the sky is blue at noon. " * 40,
         "émojis 🎉 and accents, naïve café", "x", "A question about routing language models under an SLA"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def onnx_enc(cache):
    return service_encoder("minilm", "onnx", cache_dir=cache)


def test_onnx_vectors_match_torch_within_cosine_0_9999(onnx_enc):
    assert onnx_enc.runtime == "onnx" and onnx_enc.trace_problem is None
    ref = get_encoder("minilm")
    for batch in (TEXTS, TEXTS[:1], TEXTS[2:4]):  # any batch size and length (one is truncated at 256 tokens)
        a, b = onnx_enc.encode(batch), ref.encode(batch)
        cos = np.sum(a * b, axis=1)
        assert a.shape == b.shape and float(cos.min()) >= 0.9999, cos


def test_the_export_is_cached_and_reused(onnx_enc, cache):
    p = onnx_path(onnx_enc, cache)
    assert p.exists() and p.parent == cache / "onnx"
    mtime = p.stat().st_mtime_ns
    again = service_encoder("minilm", "onnx", cache_dir=cache)
    assert again.runtime == "onnx" and p.stat().st_mtime_ns == mtime


def test_a_broken_export_falls_back_to_torch_and_says_why(tmp_path, onnx_enc):
    p = onnx_path(onnx_enc, tmp_path)
    p.parent.mkdir(parents=True)
    p.write_bytes(b"not an onnx model")
    enc = service_encoder("minilm", "onnx", cache_dir=tmp_path)
    assert enc.runtime in ("torchscript", "eager") and "onnx:" in enc.trace_problem
    assert float(np.sum(enc.encode(TEXTS[:2]) * get_encoder("minilm").encode(TEXTS[:2]), axis=1).min()) > 0.9999


def test_non_transformer_encoders_are_returned_as_they_are():
    enc = service_encoder("hashing:32")
    assert enc.dim == 32 and getattr(enc, "runtime", None) is None


def test_an_export_of_several_layers_pools_what_torch_pools(cache):
    enc = service_encoder("minilm+layers=2,4,6", "onnx", cache_dir=cache)
    assert enc.runtime == "onnx" and enc.trace_problem is None
    assert onnx_path(enc, cache) != onnx_path(get_encoder("minilm"), cache)  # its own file, not the last layer's
    ref = get_encoder("minilm+layers=2,4,6")
    for batch in (TEXTS, TEXTS[:1]):
        assert float(np.sum(enc.encode(batch) * ref.encode(batch), axis=1).min()) >= 0.9999
