"""The history split and the input checks every method shares."""

from __future__ import annotations

import numpy as np
import pytest

from slarouter_core import baselines as B

from .toy import ALPHA, RATE, make_data


def test_split_history_is_a_seeded_partition():
    data, emb = make_data(n=101)
    s1, e1, h1 = B.split_history(data, emb, 7, 0.3)
    s2, e2, h2 = B.split_history(data, emb, 7, 0.3)
    s3, _, _ = B.split_history(data, emb, 8, 0.3)
    assert h1.n == round(0.3 * 101) and s1.n_requests + h1.n == 101
    ids_s, ids_h = set(s1.frame["doc_id"]), set(h1.data.frame["doc_id"])
    assert not ids_s & ids_h and len(ids_s | ids_h) == 101
    np.testing.assert_array_equal(s1.frame["doc_id"], s2.frame["doc_id"])
    assert not np.array_equal(s1.frame["doc_id"], s3.frame["doc_id"])
    # embeddings travel with their rows
    np.testing.assert_array_equal(e1, emb[s1.frame["doc_id"].to_numpy()])
    np.testing.assert_array_equal(h1.embeddings, emb[h1.data.frame["doc_id"].to_numpy()])
    with pytest.raises(ValueError, match="history_fraction"):
        B.split_history(data, emb, 7, 1.0)


def test_bad_inputs_rejected(split):
    stream, semb, hist = split
    with pytest.raises(ValueError, match="alpha"):
        B.static_mixture(stream, semb, 1.5, 0, RATE)
    with pytest.raises(ValueError, match="out of range"):
        B.single(stream, semb, ALPHA, 0, RATE, model=5)
    with pytest.raises(ValueError, match="embeddings"):
        B.messplus(stream, semb[:10], ALPHA, 0, RATE)
    with pytest.raises(ValueError, match="feedback_rate"):
        B.random_router(stream, semb, ALPHA, 0, 1.5)
    with pytest.raises(ValueError, match="mu"):
        B.carrot(stream, semb, ALPHA, 0, RATE, history=hist, mu=2.0)
    with pytest.raises(ValueError, match="width"):
        B.carrot(stream, semb[:, :4], ALPHA, 0, RATE, history=hist)
