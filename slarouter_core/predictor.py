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
gradients against torch autograd on the same architecture.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

WarmupMode = Literal["partial", "full"]


@dataclass(frozen=True)
class PredictorConfig:
    """Predictor hyper-parameters (paper defaults).

    ``warmup``: the paper differs between Section 2, where each step uses a mini-batch of
    ``min(|D|, B)`` from the first feedback on (``"partial"``, our default: under sparse
    feedback a stream may carry only a few dozen labelled exploration steps, and waiting
    for 16 of them discards a large share of the little signal there is), and Appendix B,
    where training starts only once the buffer holds ``B`` samples (``"full"``).
    """

    dropout: float = 0.1
    lr: float = 0.006
    momentum: float = 0.9
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    batch_size: int = 16
    lr_schedule: Literal["fixed", "diminishing"] = "fixed"
    warmup: WarmupMode = "partial"
    pos_weight: bool = True
    steps_per_feedback: int = 1

    def __post_init__(self) -> None:
        from .validation import check_choice, check_int, check_number

        check_number("dropout", self.dropout, low=0.0, high=1.0, high_open=True)
        for name in ("lr", "clip_norm"):
            check_number(name, getattr(self, name), low=0.0, low_open=True)
        check_number("momentum", self.momentum, low=0.0, high=1.0, high_open=True)
        check_number("weight_decay", self.weight_decay, low=0.0)
        check_int("batch_size", self.batch_size, low=1)
        check_choice("lr_schedule", self.lr_schedule, ("fixed", "diminishing"))
        check_choice("warmup", self.warmup, ("partial", "full"))
        check_int("steps_per_feedback", self.steps_per_feedback, low=1)

    def to_dict(self) -> dict:
        return asdict(self)


PARAM_NAMES = ("w1", "b1", "ln_w", "ln_b", "w2", "b2")
LN_EPS = 1e-5
PREDICT_CHUNK = 1024


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
        """Per-model satisfaction probabilities (eval mode) for a (N, D) or (D,) array."""
        arr = self._check(x)
        out = np.empty((len(arr), self.n_models), np.float64)
        p = self.params
        for start in range(0, len(arr), PREDICT_CHUNK):  # chunks stay in cache
            z = arr[start:start + PREDICT_CHUNK] @ p["w1"].T
            _bias_layernorm_relu(z, p["b1"], p["ln_w"], p["ln_b"])
            out[start:start + PREDICT_CHUNK] = z @ p["w2"].T + p["b2"]
        np.negative(out, out=out)
        np.exp(out, out=out)
        out += 1.0
        np.reciprocal(out, out=out)
        return out[0] if np.ndim(x) == 1 else out

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


def _bias_layernorm_relu(z: np.ndarray, bias: np.ndarray, gain: np.ndarray, shift: np.ndarray) -> None:
    """In place: z <- relu(LayerNorm(z + bias) * gain + shift), one row at a time.

    Compiled with numba when installed (one pass per row instead of six over the array).
    """
    n, d = z.shape
    for i in range(n):
        row = z[i]
        total = 0.0
        for j in range(d):
            row[j] += bias[j]
            total += row[j]
        mu = total / d
        sq = 0.0
        for j in range(d):
            row[j] -= mu
            sq += row[j] * row[j]
        inv = 1.0 / np.sqrt(sq / d + LN_EPS)
        for j in range(d):
            y = row[j] * inv * gain[j] + shift[j]
            row[j] = y if y > 0.0 else 0.0


try:  # pragma: no cover - exercised whenever numba is installed
    from numba import njit

    _bias_layernorm_relu = njit(cache=True, nogil=True, fastmath=False)(_bias_layernorm_relu)
except ImportError:  # pragma: no cover
    pass
