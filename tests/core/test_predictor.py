from __future__ import annotations

import numpy as np
import pytest
import torch

from slarouter_core.predictor import PredictorConfig, SatisfactionPredictor


def test_unobserved_heads_are_left_unchanged():
    p = SatisfactionPredictor(8, 3, seed=0)
    rng = np.random.default_rng(0)
    for i in range(10):  # labels only for heads 0 and 2
        p.add(rng.standard_normal(8), [0, 2][i % 2], i % 3 == 0)
    w2, b2, w1 = p.params["w2"].copy(), p.params["b2"].copy(), p.params["w1"].copy()
    for _ in range(3):
        assert p.train_step(rng)
    assert np.array_equal(p.params["w2"][1], w2[1]) and p.params["b2"][1] == b2[1]
    assert not np.array_equal(p.params["w2"][0], w2[0])
    assert not np.array_equal(p.params["w2"][2], w2[2])
    assert not np.array_equal(p.params["w1"], w1)


def test_gradients_match_torch_autograd():
    D, M, k = 12, 3, 7
    p = SatisfactionPredictor(D, M, seed=1)
    rng = np.random.default_rng(1)
    for i in range(6):
        p.add(rng.standard_normal(D), i % M, float(i % 2 == 0 or i == 5))
    x = rng.standard_normal((k, D)).astype(np.float32)
    models = rng.integers(0, M, k)
    labels = rng.integers(0, 2, k).astype(np.float32)
    d1 = (rng.random((k, D)) > 0.1).astype(np.float32) / 0.9
    d2 = (rng.random((k, D)) > 0.1).astype(np.float32) / 0.9
    grads, observed = p.gradients(x, models, labels, masks=(d1, d2))

    t = {n: torch.tensor(v, requires_grad=True) for n, v in p.params.items()}
    h = torch.nn.functional.linear(torch.tensor(x) * torch.tensor(d1), t["w1"], t["b1"])
    h = torch.nn.functional.layer_norm(h, (D,), t["ln_w"], t["ln_b"], eps=1e-5)
    h = torch.relu(h) * torch.tensor(d2)
    logits = torch.nn.functional.linear(h, t["w2"], t["b2"])
    mask = torch.zeros(k, M)
    mask[np.arange(k), models] = 1
    target = torch.zeros(k, M)
    target[np.arange(k), models] = torch.tensor(labels)
    pw = torch.tensor(p.pos_weights(), dtype=torch.float32)
    loss = (torch.nn.functional.binary_cross_entropy_with_logits(logits, target, pos_weight=pw, reduction="none")
            * mask).sum() / mask.sum()
    loss.backward()
    for n in t:
        np.testing.assert_allclose(grads[n], t[n].grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=n)
    assert list(observed) == [m in set(models.tolist()) for m in range(M)]


def test_positive_class_reweighting():
    p = SatisfactionPredictor(4, 3, seed=0)
    for m, s in [(0, 1), (0, 0), (0, 0), (0, 0), (1, 1), (1, 1)]:
        p.add(np.zeros(4), m, s)
    np.testing.assert_allclose(p.pos_weights(), [3.0, 1.0, 1.0])  # model 1: no negatives yet
    q = SatisfactionPredictor(4, 3, PredictorConfig(pos_weight=False), seed=0)
    q.add(np.zeros(4), 0, 1)
    q.add(np.zeros(4), 0, 0)
    q.add(np.zeros(4), 0, 0)
    np.testing.assert_allclose(q.pos_weights(), [1.0, 1.0, 1.0])


def test_warmup_modes():
    rng = np.random.default_rng(0)
    partial = SatisfactionPredictor(4, 2, PredictorConfig(warmup="partial"), seed=0)
    full = SatisfactionPredictor(4, 2, PredictorConfig(warmup="full", batch_size=4), seed=0)
    assert not partial.train_step(rng)
    for i in range(3):
        partial.add(np.ones(4), 0, 1)
        full.add(np.ones(4), 0, 1)
        assert partial.train_step(rng)
        assert not full.train_step(rng)
    full.add(np.ones(4), 1, 0)
    assert full.train_step(rng)


def test_learns_a_separable_signal():
    rng = np.random.default_rng(0)
    p = SatisfactionPredictor(2, 2, PredictorConfig(lr=0.05), seed=0)
    X = rng.standard_normal((400, 2)).astype(np.float32)
    for x in X:
        p.add(x, 0, float(x[0] > 0))
        p.add(x, 1, float(x[1] > 0))
        p.train_step(rng)
    pred = p.predict(X)
    acc = ((pred[:, 0] > 0.5) == (X[:, 0] > 0)).mean()
    assert acc > 0.85


@pytest.mark.parametrize("kw", [dict(dropout=1.0), dict(lr=0), dict(momentum=1.0), dict(batch_size=0),
                                dict(weight_decay=-1), dict(lr_schedule="cosine"), dict(warmup="later")])
def test_config_validation(kw):
    with pytest.raises(ValueError):
        PredictorConfig(**kw)


def test_predict_matches_torch_eval_forward():
    D, M = 24, 4
    p = SatisfactionPredictor(D, M, seed=3)
    p.params["ln_w"] = np.random.default_rng(0).uniform(0.5, 1.5, D).astype(np.float32)
    p.params["ln_b"] = np.random.default_rng(1).normal(0, 0.1, D).astype(np.float32)
    x = np.random.default_rng(2).standard_normal((50, D)).astype(np.float32)
    t = {n: torch.tensor(v) for n, v in p.params.items()}
    h = torch.nn.functional.linear(torch.tensor(x), t["w1"], t["b1"])
    h = torch.relu(torch.nn.functional.layer_norm(h, (D,), t["ln_w"], t["ln_b"], eps=1e-5))
    expected = torch.sigmoid(torch.nn.functional.linear(h, t["w2"], t["b2"])).numpy()
    np.testing.assert_allclose(p.predict(x), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(p.predict(x[7]), expected[7], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("D", [16, 23, 384])
def test_predictions_do_not_depend_on_the_batch(D):
    """Issue 20: a row gets the same bits alone, in any batch and at any position (BLAS
    rounds one row and many differently); D = 23 leaves a tail after the unrolled sums."""
    p = SatisfactionPredictor(D, 3, seed=5)
    x = np.random.default_rng(6).standard_normal((37, D)).astype(np.float32)
    whole = p.predict(x)
    alone = np.stack([p.predict(row) for row in x])
    assert np.array_equal(whole, alone)
    for k in (1, 3, 8, 9, 16):
        assert np.array_equal(np.concatenate([p.predict(x[a:a + k]) for a in range(0, len(x), k)]), whole)
    assert np.array_equal(p.predict(x[5:]), whole[5:])


def test_predictions_sum_in_the_documented_order():
    """The first layer adds x_k * w1[:, k] for k = 0, 1, ... one float32 rounding at a time
    (no fused multiply-add, no reordering), which is what makes the bits the same on every
    CPU; NumPy's element-wise float32 operations reproduce that order exactly."""
    D = 20
    p = SatisfactionPredictor(D, 2, seed=7)
    x = np.random.default_rng(8).standard_normal((9, D)).astype(np.float32)
    w1, b1 = p.params["w1"], p.params["b1"]
    z = np.zeros((len(x), D), np.float32)
    for k in range(D):
        z = z + x[:, k:k + 1] * w1[:, k][None, :]
    z = z + b1
    mu = np.array([sum(float(v) for v in row) for row in z]) / D  # float64, left to right
    zc = (z - mu[:, None]).astype(np.float32)
    sq = np.array([sum(float(np.float32(v * v)) for v in row) for row in zc])
    inv = 1.0 / np.sqrt(sq / D + 1e-5)
    h = np.maximum(zc * inv[:, None] * p.params["ln_w"] + p.params["ln_b"], 0.0).astype(np.float32)
    logits = np.zeros((len(x), 2), np.float32)
    for j in range(D):
        logits = logits + h[:, j:j + 1] * p.params["w2"][:, j][None, :]
    expected = 1.0 / (1.0 + np.exp(-(logits + p.params["b2"]).astype(np.float64)))
    # 1e-15: the sigmoid's exp (libm in the kernel, NumPy's SIMD here) may differ in the
    # last bit; any other order of the float32 sums would move the result by ~1e-8
    np.testing.assert_allclose(p.predict(x), expected, rtol=0, atol=1e-15)
