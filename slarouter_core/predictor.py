"""Satisfaction predictor: an MLP head on frozen embeddings, one sigmoid per model.

Architecture and defaults follow the paper's Appendix B: Dropout(0.1) -> Linear(D, D) ->
LayerNorm -> ReLU -> Dropout(0.1) -> Linear(D, M); SGD lr 0.006, momentum 0.9, weight
decay 0.01, gradient clipping at L2-norm 1.0, mini-batch 16 from a replay buffer, one
step per new feedback. The loss is a masked BCE: only heads with an observed label get
gradient, and the output-layer rows of unobserved heads are left exactly unchanged in
that step (no gradient, no weight decay, no momentum), as Section 2 describes.

The network is small enough that forward and backward are written out in NumPy: a
training step costs tens of microseconds instead of a torch graph's milliseconds, there is
no thread-pool contention with NumPy's BLAS, and the full state (weights, momentum,
buffer, counts, RNG) round-trips through safetensors without pickle. The tests check the
gradients against torch autograd on the same architecture. Inference is a compiled kernel
that sums in one fixed order (:func:`_forward_rows`), so the decisions a prediction feeds
are the same for one request or a batch, on any CPU; training still uses BLAS (the same
calls on every serving path).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
from numba import njit

from .validation import Bool, Checked, Choice, Int, Range, param

WarmupMode = Literal["partial", "full"]


@dataclass(frozen=True)
class PredictorConfig(Checked):
    """Predictor hyper-parameters (paper defaults).

    ``warmup``: the paper differs between Section 2, where each step uses a mini-batch of
    ``min(|D|, B)`` from the first feedback on (``"partial"``, our default: under sparse
    feedback a stream may carry only a few dozen labelled exploration steps, and waiting
    for 16 of them discards a large share of the little signal there is), and Appendix B,
    where training starts only once the buffer holds ``B`` samples (``"full"``).
    """

    dropout: float = param(0.1, Range(low=0.0, high=1.0, high_open=True))
    lr: float = param(0.006, Range(low=0.0, low_open=True))
    momentum: float = param(0.9, Range(low=0.0, high=1.0, high_open=True))
    weight_decay: float = param(0.01, Range(low=0.0))
    clip_norm: float = param(1.0, Range(low=0.0, low_open=True))
    batch_size: int = param(16, Int(low=1))
    lr_schedule: Literal["fixed", "diminishing"] = param("fixed", Choice(("fixed", "diminishing")))
    warmup: WarmupMode = param("partial", Choice(("partial", "full")))
    pos_weight: bool = param(True, Bool())
    steps_per_feedback: int = param(1, Int(low=1))

    def to_dict(self) -> dict:
        return asdict(self)


PARAM_NAMES = ("w1", "b1", "ln_w", "ln_b", "w2", "b2")
LN_EPS = 1e-5


class SatisfactionPredictor:
    """Masked multi-label MLP trained online from a replay buffer of one-sided labels."""

    def __init__(self, dim: int, n_models: int, config: PredictorConfig = PredictorConfig(),
                 seed: int = 0):
        if dim < 1 or n_models < 1:
            raise ValueError("dim and n_models must be positive")
        self.dim = int(dim)
        self.n_models = int(n_models)
        self.config = config
        self.rng = np.random.Generator(np.random.PCG64(int(seed)))
        self.params = self._init_params()
        self.momentum_buf = {k: np.zeros_like(v) for k, v in self.params.items()}
        # momentum starts per output row for the heads (their rows update only when observed)
        self.momentum_started = {k: np.zeros(self.n_models if k in ("w2", "b2") else 1, bool)
                                 for k in PARAM_NAMES}
        self.steps = 0
        self.version = 0
        self.n_pos = np.zeros(self.n_models, np.int64)
        self.n_neg = np.zeros(self.n_models, np.int64)
        self._buf_x = np.zeros((64, self.dim), np.float32)
        self._buf_m = np.zeros(64, np.int64)
        self._buf_s = np.zeros(64, np.float32)
        self._size = 0
        self._w1_t_cache: tuple[int, np.ndarray, np.ndarray] | None = None

    # -- parameters -------------------------------------------------------------------
    def _linear_init(self, fan_out: int, fan_in: int) -> tuple[np.ndarray, np.ndarray]:
        bound = 1.0 / math.sqrt(fan_in)  # torch nn.Linear's default range
        w = self.rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32)
        b = self.rng.uniform(-bound, bound, fan_out).astype(np.float32)
        return w, b

    def _init_params(self) -> dict[str, np.ndarray]:
        w1, b1 = self._linear_init(self.dim, self.dim)
        w2, b2 = self._linear_init(self.n_models, self.dim)
        return {"w1": w1, "b1": b1, "ln_w": np.ones(self.dim, np.float32),
                "ln_b": np.zeros(self.dim, np.float32), "w2": w2, "b2": b2}

    # -- inference --------------------------------------------------------------------
    def _hidden(self, x: np.ndarray, drop1: np.ndarray | None = None):
        p = self.params
        x1 = x if drop1 is None else x * drop1
        z = x1 @ p["w1"].T
        z += p["b1"]
        z -= z.mean(axis=1, keepdims=True)
        inv_std = 1.0 / np.sqrt(np.einsum("ij,ij->i", z, z)[:, None] / self.dim + LN_EPS)
        z *= inv_std  # z is now x-hat
        y = z * p["ln_w"]
        y += p["ln_b"]
        return x1, z, inv_std, y

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Per-model satisfaction probabilities (eval mode) for a (N, D) or (D,) array.

        Each row is computed on its own in a fixed order of operations (:func:`_forward_rows`),
        so a request gets the same bits alone or in a batch of any size, on any CPU given
        the same weights (BLAS products round differently for one row and many, and with the
        SIMD width; the training step's products do, so weights trained on Intel's AVX-512
        kernels differ in the last bits: README, "Reproducibility")."""
        arr = self._check(x)
        out = np.empty((len(arr), self.n_models), np.float64)
        p = self.params
        _forward_rows(arr, self._w1_t(), p["b1"], p["ln_w"], p["ln_b"], p["w2"], p["b2"], out)
        return out[0] if np.ndim(x) == 1 else out

    def _w1_t(self) -> np.ndarray:
        """``w1`` transposed (contiguous), kept per predictor version: the kernel adds its
        rows, so the inner loop runs over contiguous memory."""
        w1 = self.params["w1"]
        cached = self._w1_t_cache
        if cached is None or cached[0] != self.version or cached[1] is not w1:
            cached = self._w1_t_cache = (self.version, w1, np.ascontiguousarray(w1.T))
        return cached[2]

    def _check(self, x: np.ndarray) -> np.ndarray:
        arr = np.asarray(x, dtype=np.float32)
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.ndim != 2 or arr.shape[1] != self.dim:
            raise ValueError(f"expected embeddings of width {self.dim}, got shape {np.shape(x)}")
        return arr

    # -- replay buffer ----------------------------------------------------------------
    @property
    def buffer_size(self) -> int:
        return self._size

    def buffer(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = self._size
        return self._buf_x[:n], self._buf_m[:n], self._buf_s[:n]

    def add(self, x: np.ndarray, model: int, satisfied: float) -> None:
        """Store one labelled observation (embedding, served model, 0/1 feedback)."""
        if not 0 <= model < self.n_models:
            raise ValueError(f"model index {model} out of range")
        if self._size == len(self._buf_m):
            cap = 2 * len(self._buf_m)
            self._buf_x = np.concatenate([self._buf_x, np.zeros_like(self._buf_x)])[:cap]
            self._buf_m = np.concatenate([self._buf_m, np.zeros_like(self._buf_m)])[:cap]
            self._buf_s = np.concatenate([self._buf_s, np.zeros_like(self._buf_s)])[:cap]
        self._buf_x[self._size] = np.asarray(x, np.float32)
        self._buf_m[self._size] = model
        self._buf_s[self._size] = float(satisfied)
        self._size += 1
        if satisfied >= 0.5:
            self.n_pos[model] += 1
        else:
            self.n_neg[model] += 1

    def ready(self) -> bool:
        need = self.config.batch_size if self.config.warmup == "full" else 1
        return self._size >= need

    def pos_weights(self) -> np.ndarray:
        """p_m = N-_m / N+_m (1 where a model has no positive or no negative yet)."""
        w = np.ones(self.n_models)
        if self.config.pos_weight:
            ok = (self.n_pos > 0) & (self.n_neg > 0)
            w[ok] = self.n_neg[ok] / self.n_pos[ok]
        return w

    def current_lr(self) -> float:
        if self.config.lr_schedule == "fixed":
            return self.config.lr
        # Lemma 1's eta_k = min(4 / (mu (k+1)), 1 / (2L)), with mu the weight decay and the
        # constant cap 1/(2L) taken as the base rate (L is unknown in practice).
        mu = max(self.config.weight_decay, 1e-12)
        return min(self.config.lr, 4.0 / (mu * (self.steps + 1)))

    # -- training ---------------------------------------------------------------------
    def train_step(self, rng: np.random.Generator) -> bool:
        """SGD step(s) on a random mini-batch of the buffer; False if not ready yet."""
        if not self.ready():
            return False
        for _ in range(self.config.steps_per_feedback):
            n = self._size
            k = min(n, self.config.batch_size)
            idx = np.sort(rng.choice(n, size=k, replace=False)) if k < n else np.arange(n)
            grads, observed = self.gradients(self._buf_x[idx], self._buf_m[idx], self._buf_s[idx])
            self._apply(grads, observed)
        return True

    def _dropout_mask(self, shape: tuple[int, ...]) -> np.ndarray | None:
        p = self.config.dropout
        if p == 0:
            return None
        return (self.rng.random(shape) >= p).astype(np.float32) / np.float32(1.0 - p)

    def gradients(self, x: np.ndarray, models: np.ndarray, labels: np.ndarray,
                  masks: tuple[np.ndarray | None, np.ndarray | None] | None = None
                  ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Gradients of the masked, positive-reweighted BCE for one mini-batch.

        Returns the gradients and the boolean mask of heads that had a label.
        ``masks`` (dropout masks) are drawn from the predictor's RNG unless given.
        """
        p = self.params
        k = len(models)
        x = np.asarray(x, np.float32)
        if masks is None:
            masks = (self._dropout_mask(x.shape), self._dropout_mask((k, self.dim)))
        drop1, drop2 = masks
        rows = np.arange(k)
        mask = np.zeros((k, self.n_models), np.float32)
        mask[rows, models] = 1.0
        target = np.zeros((k, self.n_models), np.float32)
        target[rows, models] = labels
        x1, xhat, inv_std, y = self._hidden(x, drop1)
        r = np.maximum(y, 0.0)
        h2 = r if drop2 is None else r * drop2
        logits = h2 @ p["w2"].T + p["b2"]
        sig = 1.0 / (1.0 + np.exp(-logits))
        pw = self.pos_weights().astype(np.float32)
        # d/dz of -(pw t log s + (1-t) log(1-s)) = s (pw t + 1 - t) - pw t
        dlogits = (sig * (pw * target + 1.0 - target) - pw * target) * mask / mask.sum()
        g = {"w2": dlogits.T @ h2, "b2": dlogits.sum(axis=0)}
        dr = dlogits @ p["w2"]
        if drop2 is not None:
            dr *= drop2
        dy = dr * (y > 0)
        g["ln_w"] = (dy * xhat).sum(axis=0)
        g["ln_b"] = dy.sum(axis=0)
        dxhat = dy * p["ln_w"]
        dz = inv_std * (dxhat - dxhat.mean(axis=1, keepdims=True)
                        - xhat * (dxhat * xhat).mean(axis=1, keepdims=True))
        g["w1"] = dz.T @ x1
        g["b1"] = dz.sum(axis=0)
        return {n: g[n].astype(np.float32) for n in PARAM_NAMES}, mask.any(axis=0)

    def _apply(self, grads: dict[str, np.ndarray], observed: np.ndarray) -> None:
        """Clipped SGD with momentum and weight decay; unobserved heads' rows untouched."""
        cfg = self.config
        total = math.sqrt(sum(float(np.dot(g.ravel(), g.ravel())) for g in grads.values()))
        scale = np.float32(min(1.0, cfg.clip_norm / (total + 1e-6)))
        lr = np.float32(self.current_lr())
        mom = np.float32(cfg.momentum)
        wd = np.float32(cfg.weight_decay)
        for name in PARAM_NAMES:
            param = self.params[name]
            buf = self.momentum_buf[name]
            started = self.momentum_started[name]
            d = grads[name] * scale + wd * param
            if name in ("w2", "b2"):
                for j in np.flatnonzero(observed):
                    buf[j] = mom * buf[j] + d[j] if (started[j] and mom) else d[j]
                    param[j] -= lr * buf[j]
                started |= observed
            else:
                if started[0] and mom:
                    buf *= mom
                    buf += d
                else:
                    buf[...] = d
                    started[0] = True
                param -= lr * buf
        self.steps += 1
        self.version += 1

    # -- state ------------------------------------------------------------------------
    def state_arrays(self, prefix: str = "predictor.") -> dict[str, np.ndarray]:
        out = {f"{prefix}param.{k}": v.copy() for k, v in self.params.items()}
        out.update({f"{prefix}momentum.{k}": v.copy() for k, v in self.momentum_buf.items()})
        out.update({f"{prefix}momentum_started.{k}": v.astype(np.uint8)
                    for k, v in self.momentum_started.items()})
        x, m, s = self.buffer()
        out[f"{prefix}buffer.x"] = x.copy()
        out[f"{prefix}buffer.m"] = m.copy()
        out[f"{prefix}buffer.s"] = s.copy()
        out[f"{prefix}n_pos"] = self.n_pos.copy()
        out[f"{prefix}n_neg"] = self.n_neg.copy()
        return out

    def state_meta(self) -> dict:
        return {"dim": self.dim, "n_models": self.n_models, "steps": self.steps,
                "version": self.version, "config": self.config.to_dict(),
                "rng": self.rng.bit_generator.state}

    @classmethod
    def from_state(cls, meta: dict, arrays: dict[str, np.ndarray],
                   prefix: str = "predictor.") -> "SatisfactionPredictor":
        pred = cls(int(meta["dim"]), int(meta["n_models"]), PredictorConfig(**meta["config"]))
        for k in PARAM_NAMES:
            param = np.array(arrays[f"{prefix}param.{k}"], np.float32)
            if param.shape != pred.params[k].shape:
                raise ValueError(f"checkpoint weights {k} have shape {param.shape}, "
                                 f"expected {pred.params[k].shape}")
            pred.params[k] = param
            pred.momentum_buf[k] = np.array(arrays[f"{prefix}momentum.{k}"], np.float32).reshape(param.shape)
            pred.momentum_started[k] = np.array(arrays[f"{prefix}momentum_started.{k}"]).astype(bool)
        x = np.array(arrays[f"{prefix}buffer.x"], np.float32).reshape(-1, pred.dim)
        m = np.array(arrays[f"{prefix}buffer.m"], np.int64)
        s = np.array(arrays[f"{prefix}buffer.s"], np.float32)
        if not (len(x) == len(m) == len(s)):
            raise ValueError("checkpoint replay buffer arrays disagree in length")
        pred._size = len(m)
        cap = max(64, len(m))
        pred._buf_x = np.zeros((cap, pred.dim), np.float32)
        pred._buf_m = np.zeros(cap, np.int64)
        pred._buf_s = np.zeros(cap, np.float32)
        pred._buf_x[:len(m)], pred._buf_m[:len(m)], pred._buf_s[:len(m)] = x, m, s
        pred.n_pos = np.array(arrays[f"{prefix}n_pos"], np.int64)
        pred.n_neg = np.array(arrays[f"{prefix}n_neg"], np.int64)
        pred.rng.bit_generator.state = meta["rng"]
        pred.steps = int(meta["steps"])
        pred.version = int(meta["version"])
        return pred


@njit(cache=True, nogil=True)
def _first_layer_8(X, a, w1_t, Z):
    """Z[r] = X[a + r] @ w1_t for r < 8, adding the terms k = 0, 1, 2, ... in order (no
    fastmath, so no fused multiply-adds). Eight rows share each load of ``w1_t``'s rows and
    the loop over the hidden units vectorises without reordering any sum (about 15% slower
    than single-threaded BLAS, which fuses), and the bits are those of
    :func:`_first_layer_row`."""
    d = X.shape[1]
    z0, z1, z2, z3, z4, z5, z6, z7 = Z[0], Z[1], Z[2], Z[3], Z[4], Z[5], Z[6], Z[7]
    Z[:] = 0
    k = 0
    while k + 4 <= d:
        wa, wb, wc, wd = w1_t[k], w1_t[k + 1], w1_t[k + 2], w1_t[k + 3]
        x00, x01, x02, x03 = X[a, k], X[a, k + 1], X[a, k + 2], X[a, k + 3]
        x10, x11, x12, x13 = X[a + 1, k], X[a + 1, k + 1], X[a + 1, k + 2], X[a + 1, k + 3]
        x20, x21, x22, x23 = X[a + 2, k], X[a + 2, k + 1], X[a + 2, k + 2], X[a + 2, k + 3]
        x30, x31, x32, x33 = X[a + 3, k], X[a + 3, k + 1], X[a + 3, k + 2], X[a + 3, k + 3]
        x40, x41, x42, x43 = X[a + 4, k], X[a + 4, k + 1], X[a + 4, k + 2], X[a + 4, k + 3]
        x50, x51, x52, x53 = X[a + 5, k], X[a + 5, k + 1], X[a + 5, k + 2], X[a + 5, k + 3]
        x60, x61, x62, x63 = X[a + 6, k], X[a + 6, k + 1], X[a + 6, k + 2], X[a + 6, k + 3]
        x70, x71, x72, x73 = X[a + 7, k], X[a + 7, k + 1], X[a + 7, k + 2], X[a + 7, k + 3]
        for j in range(w1_t.shape[1]):
            A, B, C, D = wa[j], wb[j], wc[j], wd[j]
            z0[j] = (((z0[j] + x00 * A) + x01 * B) + x02 * C) + x03 * D
            z1[j] = (((z1[j] + x10 * A) + x11 * B) + x12 * C) + x13 * D
            z2[j] = (((z2[j] + x20 * A) + x21 * B) + x22 * C) + x23 * D
            z3[j] = (((z3[j] + x30 * A) + x31 * B) + x32 * C) + x33 * D
            z4[j] = (((z4[j] + x40 * A) + x41 * B) + x42 * C) + x43 * D
            z5[j] = (((z5[j] + x50 * A) + x51 * B) + x52 * C) + x53 * D
            z6[j] = (((z6[j] + x60 * A) + x61 * B) + x62 * C) + x63 * D
            z7[j] = (((z7[j] + x70 * A) + x71 * B) + x72 * C) + x73 * D
        k += 4
    for kk in range(k, d):
        for r in range(8):
            xk = X[a + r, kk]
            for j in range(w1_t.shape[1]):
                Z[r, j] += xk * w1_t[kk, j]


@njit(cache=True, nogil=True)
def _first_layer_row(x, w1_t, z):
    """z = x @ w1_t, the terms added in order k = 0, 1, 2, ... (as :func:`_first_layer_8`)."""
    z[:] = 0
    for k in range(x.shape[0]):
        xk = x[k]
        for j in range(w1_t.shape[1]):
            z[j] += xk * w1_t[k, j]


@njit(cache=True, nogil=True)
def _forward_rows(X, w1_t, b1, ln_w, ln_b, w2, b2, out):
    """out[i] = sigmoid(Linear(relu(LayerNorm(Linear(X[i]))))) for each row, in float32
    like the training path, every sum in one fixed order: the first layer as in
    :func:`_first_layer_8`, the LayerNorm and output sums left to right. A row's result is
    thus the same alone or in any batch, and on any CPU (BLAS products round differently
    for one row and for many, and with the SIMD width)."""
    n = X.shape[0]
    h = w1_t.shape[1]
    n_out = w2.shape[0]
    Z = np.empty((8, h), np.float32)
    S = np.empty((8, n_out), np.float32)
    tot = np.empty(8)
    sq = np.empty(8)
    for a in range(0, n, 8):
        nb = min(8, n - a)
        if nb == 8:
            _first_layer_8(X, a, w1_t, Z)
        else:
            for r in range(nb):
                _first_layer_row(X[a + r], w1_t, Z[r])
        # LayerNorm: each row's sums left to right (float64), the block's rows side by side
        tot[:] = 0.0
        for j in range(h):
            bj = b1[j]
            for r in range(nb):
                v = Z[r, j] + bj
                Z[r, j] = v
                tot[r] += v
        for r in range(nb):
            tot[r] /= h  # the mean
        sq[:] = 0.0
        for j in range(h):
            for r in range(nb):
                v = np.float32(Z[r, j] - tot[r])
                Z[r, j] = v
                sq[r] += v * v
        for r in range(nb):
            row = Z[r]
            inv = 1.0 / np.sqrt(sq[r] / h + LN_EPS)
            for j in range(h):
                y = row[j] * inv * ln_w[j] + ln_b[j]
                row[j] = y if y > 0.0 else 0.0
        # output layer: each sum left to right over the hidden units (eight rows' sums side
        # by side in registers for a full block)
        if nb == 8:
            z0, z1, z2, z3, z4, z5, z6, z7 = Z[0], Z[1], Z[2], Z[3], Z[4], Z[5], Z[6], Z[7]
            for m in range(n_out):
                s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = np.float32(0.0)
                for j in range(h):
                    w = w2[m, j]
                    s0 += z0[j] * w
                    s1 += z1[j] * w
                    s2 += z2[j] * w
                    s3 += z3[j] * w
                    s4 += z4[j] * w
                    s5 += z5[j] * w
                    s6 += z6[j] * w
                    s7 += z7[j] * w
                S[0, m], S[1, m], S[2, m], S[3, m], S[4, m], S[5, m], S[6, m], S[7, m] = s0, s1, s2, s3, s4, s5, s6, s7
        else:
            for r in range(nb):
                for m in range(n_out):
                    acc = np.float32(0.0)
                    for j in range(h):
                        acc += Z[r, j] * w2[m, j]
                    S[r, m] = acc
        for r in range(nb):
            for m in range(n_out):
                logit = np.float64(S[r, m] + b2[m])
                out[a + r, m] = 1.0 / (1.0 + np.exp(-logit))
