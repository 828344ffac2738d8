"""The service's per-request encoder: the transformer's forward pass in ONNX Runtime.

The model is exported once, offline, from the local weights (``torch.onnx.export``, no
download) to ``<SLAROUTER_CACHE_DIR>/onnx/<encoder cache id>.onnx`` and reused on later
starts. Tokenising and mean pooling stay those of
:class:`slarouter_core.encoders.TransformerEncoder` (ONNX Runtime only replaces the
forward), so vectors match the torch ones to within cosine 0.9999 (tested). Where ONNX
Runtime is missing or the export fails, the service falls back to the TorchScript trace,
then to eager torch, and ``runtime`` / ``trace_problem`` say which and why.
"""

from __future__ import annotations

import logging
import os
import uuid
import warnings
from pathlib import Path

import numpy as np

from ..encoders import TextEncoder, TransformerEncoder, default_cache_dir, get_encoder, layer_forward
from ..validation import check_choice

log = logging.getLogger("slarouter.service")
OPSET = 17
#: the per-request forwards a transformer encoder can run on, preferred first
RUNTIMES = ("onnx", "torchscript", "eager")


class OnnxForward:
    """``forward(input_ids, attention_mask) -> hidden`` on an ORT session, the same call as
    the TorchScript trace it replaces (``hidden``: the last layer's states, or the pooled
    layers' stacked for a ``+layers=`` spec)."""

    def __init__(self, path: Path, threads: int = 1):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])

    def __call__(self, input_ids, attention_mask):
        import torch

        out = self.session.run(None, {"input_ids": input_ids.numpy().astype(np.int64, copy=False),
                                      "attention_mask": attention_mask.numpy().astype(np.int64, copy=False)})[0]
        return torch.from_numpy(out)


def onnx_path(enc: TransformerEncoder, cache_dir: str | Path | None = None) -> Path:
    base = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return base / "onnx" / f"{enc.cache_id()}-opset{OPSET}.onnx"


def export_onnx(enc: TransformerEncoder, path: Path) -> Path:
    """Export ``enc``'s forward to ``path`` (atomically: a temporary file, then a rename)."""
    import torch

    probe = enc.tokenizer(["a short probe text to export the encoder", "two"], padding=True, return_tensors="pt")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    axes = {0: "batch", 1: "tokens"}
    # several layers come out stacked in front: (layers, batch, tokens, width)
    out_axes = axes if enc.layers is None else {1: "batch", 2: "tokens"}
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer warnings; the cosine check vouches for the graph
            torch.onnx.export(layer_forward(enc.model, enc.layers).eval(), (probe["input_ids"], probe["attention_mask"]),
                              str(tmp), input_names=["input_ids", "attention_mask"], output_names=["hidden"],
                              dynamic_axes={"input_ids": axes, "attention_mask": axes, "hidden": out_axes},
                              opset_version=OPSET, dynamo=False)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def use_onnx(enc: TransformerEncoder, cache_dir: str | Path | None = None, threads: int = 1) -> None:
    """Make ``enc`` run its forward in ONNX Runtime (exporting once if not cached); raises
    if that is not possible, or if the ONNX vectors differ from the torch ones."""
    path = onnx_path(enc, cache_dir)
    if not path.exists():
        export_onnx(enc, path)
    fwd = OnnxForward(path, threads)
    probe = ["check the exported encoder", "a second, somewhat longer probe sentence for the check"]
    eager = enc.encode(probe)
    enc.traced_forward = fwd
    got = enc.encode(probe)
    if float(np.min(np.sum(eager * got, axis=1))) < 0.9999:
        enc.traced_forward = None
        raise RuntimeError(f"{path.name}: ONNX vectors differ from torch's (cosine < 0.9999); delete the file")


def service_encoder(spec: str, runtime: str = "onnx", threads: int = 1,
                    cache_dir: str | Path | None = None) -> TextEncoder:
    """The encoder the service runs: ``runtime`` ``"onnx"`` (falling back to
    ``"torchscript"``, then ``"eager"``), ``"torchscript"`` or ``"eager"``."""
    check_choice("runtime", runtime, RUNTIMES)
    enc = get_encoder(spec)
    if not isinstance(enc, TransformerEncoder):
        return enc
    enc.runtime = "eager"
    problems = []
    if runtime == "onnx":
        try:
            use_onnx(enc, cache_dir, threads)
            enc.runtime = "onnx"
            enc.trace_problem = None
            return enc
        except Exception as exc:  # noqa: BLE001 - any ONNX problem means: torch instead
            problems.append(f"onnx: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
            log.warning("ONNX Runtime encoder unavailable, using torch (%s)", problems[-1])
    if runtime in ("onnx", "torchscript"):
        enc.traced_forward = enc._trace()
        if enc.traced_forward is not None:
            enc.runtime = "torchscript"
        else:
            problems.append(f"torchscript: {enc._problem}")
    enc.trace_problem = "; ".join(problems) or None
    return enc
