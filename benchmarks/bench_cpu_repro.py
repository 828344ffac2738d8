"""Same seed, another CPU: how far the figures move when NumPy, OpenBLAS and PyTorch take
another SIMD code path.

    python benchmarks/bench_cpu_repro.py                          # 20 seeds, every stream
    python benchmarks/bench_cpu_repro.py --seeds 5 --streams demo four0

A seeded run repeats bit for bit on one machine. Across machines the numeric libraries
choose their code by the CPU they find: NumPy sends exp, log and its reductions to AVX-512
code where the CPU has it, OpenBLAS picks kernels per CPU family (Haswell's on AVX2
machines and on AMD's, SkylakeX's on Intel's AVX-512 ones), PyTorch and MKL likewise. So
CI (AVX2) and a user's AVX-512 machine round differently in the last bits. Each kind of
CPU below is emulated in a process of its own by selecting those code paths (the
libraries choose them when they load, so only a new process can change them):

* ``avx2``: an AVX2 machine (CI): NumPy without its AVX-512 paths, OpenBLAS's Haswell
  kernels, PyTorch's AVX2 kernels and MKL's AVX2 branch;
* ``avx512-amd``: an AMD AVX-512 machine (Zen 4): NumPy's and PyTorch's AVX-512 paths,
  OpenBLAS's Haswell kernels;
* ``avx512-intel``: an Intel AVX-512 machine: the same with OpenBLAS's SkylakeX kernels.

The AVX-512 kinds run only on a CPU that has AVX-512 (they are emulated on it, not on the
other vendor's chip). Measured, against the first kind:

* the default encoder's embeddings of the same texts (``--texts`` of the shared Llama-3
  stream, or the demo's without it), encoded in each kind's process;
* NumPy's ``exp`` and ``log`` of the same 100,000 logits and probabilities: how many
  values each kind rounds differently;
* the contextual, paper and guarded routers on the honest-SLA streams
  (``bench_honest_sla.py``'s demo, Llama-3 8 mixed, unseen 4-model zoo 0 and 11-model zoo
  0, the demo and Llama-3 also with the judge), every kind on the *same* embeddings (the
  cache's), so that only the router's own arithmetic differs: the seeds whose numbers
  differ at all (the served models or the queue, bit for bit), those whose decisions part
  and the first request at which they do, the seeds meeting alpha, and the largest change
  of a seed's satisfaction and of the stream's cost over the static mixture.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: NumPy's AVX-512 dispatch targets (the names of NumPy 2.x; unknown names are ignored)
NUMPY_AVX512 = "X86_V4 AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR AVX512_KNL AVX512_KNM"
#: each kind's code paths, as environment variables read when the libraries load
KINDS: dict[str, dict[str, str]] = {
    "avx2": {"NPY_DISABLE_CPU_FEATURES": NUMPY_AVX512, "OPENBLAS_CORETYPE": "Haswell",
             "ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"},
    "avx512-amd": {"OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx512"},
    "avx512-intel": {"OPENBLAS_CORETYPE": "SkylakeX", "ATEN_CPU_CAPABILITY": "avx512"},
}
STREAMS = ("demo", "demo+judge", "llama", "llama+judge", "four0", "hard0")
#: values at which each kind evaluates NumPy's ``exp`` and ``log`` (the contextual router's
#: sigmoids and log losses read them on logits and probabilities in these ranges)
UFUNC_VALUES = 100_000
UFUNCS = ("exp", "log")
MODES = ("contextual", "paper", "guarded")


def cpu_features() -> dict[str, bool]:
    """NumPy's view of this CPU (and of what it may dispatch to)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # NumPy 1.x
        from numpy.core._multiarray_umath import __cpu_features__
    return dict(__cpu_features__)


def has_avx512() -> bool:
    return bool(cpu_features().get("AVX512F"))


def kinds_here() -> list[str]:
    return list(KINDS) if has_avx512() else ["avx2"]


def available(name: str) -> bool:
    """A stream can run here (the Llama-3 ones need the shared data)."""
    from bench_honest_sla import SHARED

    return not name.startswith("llama") or SHARED.exists()


@functools.lru_cache(maxsize=None)
def ufunc_inputs() -> dict[str, np.ndarray]:
    """The same inputs in every kind's process: logits for ``exp``, probabilities for ``log``."""
    return {"exp": np.linspace(-30.0, 30.0, UFUNC_VALUES), "log": np.linspace(1e-6, 1.0, UFUNC_VALUES)}


def ufunc_differences(ref: np.ndarray, other: np.ndarray) -> tuple[int, float]:
    """How many of a function's values two kinds round differently, and the largest
    relative difference."""
    diff = ref != other
    rel = np.abs(other - ref) / np.maximum(np.abs(ref), np.finfo(float).tiny)
    return int(diff.sum()), float(rel.max()) if len(rel) else 0.0


@functools.lru_cache(maxsize=None)
def load_base(base: str):
    """``(data, alpha)`` of a stream as ``bench_honest_sla.py`` builds it
    (``build_streams``), read once per process (a stream with and without the judge
    shares it)."""
    from bench_honest_sla import build_streams

    scenario, name = BASES[base]
    return next((data, alpha) for title, data, alpha, *_ in build_streams([scenario]) if title.startswith(name))


#: each stream's scenario of ``bench_honest_sla.py`` and the start of its name there
BASES = {"demo": ("demo", "demo (mixed)"), "llama": ("llama", "llama-3, 8 mixed"),
         "four0": ("unseen", "unseen 4-model zoo 0"), "hard0": ("unseen", "unseen 11-model zoo 0")}


def child(kind: str, work: Path, streams: list[str], modes: list[str], seeds: list[int], texts: int) -> None:
    """One kind's measurements, written to ``work/<kind>.npz`` (run with its environment)."""
    import threadpoolctl

    from slarouter_core.baselines import static_mixture_lp
    from slarouter_core.encoders import get_encoder
    from slarouter_core.feedback import FeedbackConfig, judge_calls
    from slarouter_core.judge import JUDGE_PRESETS
    from slarouter_core.router import RouterConfig
    from slarouter_core.simulator import SimulationConfig, simulate

    out: dict[str, np.ndarray] = {}
    sample = json.loads((work / "texts.json").read_text())[:texts]
    out["embeddings"] = get_encoder().encode(sample)
    for fn, x in ufunc_inputs().items():
        out[f"ufunc/{fn}"] = getattr(np, fn)(x)
    import torch

    np.ones((2, 2)) @ np.ones(2)  # OpenBLAS loaded, so that its kernels can be read
    blas = [i.get("architecture") for i in threadpoolctl.threadpool_info() if i["internal_api"] == "openblas"]
    features = cpu_features()
    paths = {"numpy_avx512": bool(features.get("X86_V4") or features.get("AVX512_SKX")),
             "openblas": blas[0] if blas else None, "torch": torch.backends.cpu.get_cpu_capability()}
    (work / f"{kind}.json").write_text(json.dumps(paths))
    for name in streams:
        base, judge = name.split("+")[0], name.endswith("+judge")
        data, alpha = load_base(base)
        X = np.load(work / f"{base}.npy")
        fb = FeedbackConfig(judge_fill=JUDGE_PRESETS["acpbench"]) if judge else FeedbackConfig()
        call = float(data.costs.mean(0).min()) if judge else 0.0
        mix = static_mixture_lp(data.solved.mean(0), data.costs.mean(0), alpha)[1]
        for mode in modes:
            for seed in seeds:
                sim = simulate(data, X, SimulationConfig(RouterConfig(alpha=alpha, mode=mode),
                                                         feedback_rate=0.2, seed=seed, feedback=fb))
                a = sim.arrays()
                calls = judge_calls(a["feedback"]) / len(a["feedback"])
                key = f"{name}/{mode}/{seed}"
                out[f"{key}/model"] = a["model"].astype(np.int8)
                out[f"{key}/q"] = a["q"]
                out[f"{key}/figures"] = np.array([
                    a["satisfied"].mean(), (a["cost"].mean() + calls * call) / mix, alpha])
    np.savez(work / f"{kind}.npz", **out)


def parting(a: np.ndarray, b: np.ndarray) -> int | None:
    """The first request (1-based) at which two runs' decisions differ; None if never."""
    diff = np.flatnonzero(a != b)
    return int(diff[0]) + 1 if len(diff) else None


def compare(ref: dict, other: dict, name: str, seeds: list[int]) -> dict:
    """One stream's (and mode's: ``name`` is their key) figures under two kinds: seeds
    whose numbers differ at all, seeds whose decisions part (and where), seeds meeting alpha
    under each, the largest change of a seed's satisfaction, the change of the mean cost
    over the static mixture."""
    parts = [parting(ref[f"{name}/{s}/model"], other[f"{name}/{s}/model"]) for s in seeds]
    differ = sum(p is not None or not np.array_equal(ref[f"{name}/{s}/q"], other[f"{name}/{s}/q"])
                 for s, p in zip(seeds, parts))
    fig_a = np.array([ref[f"{name}/{s}/figures"] for s in seeds])
    fig_b = np.array([other[f"{name}/{s}/figures"] for s in seeds])
    alpha = fig_a[0, 2]
    return {"stream": name, "seeds": len(seeds), "parted": [p for p in parts if p is not None], "differ": differ,
            "met": (int((fig_a[:, 0] >= alpha).sum()), int((fig_b[:, 0] >= alpha).sum())),
            "sat": float(np.abs(fig_a[:, 0] - fig_b[:, 0]).max()),
            "cost": (float(fig_a[:, 1].mean()), float(fig_b[:, 1].mean())),
            "length": len(ref[f"{name}/{seeds[0]}/model"])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--streams", nargs="+", default=list(STREAMS), choices=STREAMS)
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--texts", type=int, default=1000, help="texts encoded in each kind's process")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--work", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    seeds = list(range(args.seeds))
    if args.child:
        child(args.child, Path(args.work), args.streams, args.modes, seeds, args.texts)
        return 0

    from slarouter_core.embedding_cache import embed_texts

    t0 = time.perf_counter()
    kinds = kinds_here()
    if len(kinds) < 2:
        print("this CPU has no AVX-512: only one code path (avx2) can run here, nothing to compare")
        return 0
    streams = [s for s in args.streams if available(s)]
    skipped = sorted(set(args.streams) - set(streams))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for base in dict.fromkeys(s.split("+")[0] for s in streams):
            np.save(work / f"{base}.npy", embed_texts(load_base(base)[0].texts))  # every kind routes on these
        # the texts each kind encodes: the shared Llama-3 stream's where it is here
        source = load_base("llama" if available("llama") else "demo")[0]
        (work / "texts.json").write_text(json.dumps([str(t) for t in source.texts[:args.texts]]))
        env0 = {k: v for k, v in os.environ.items() if k not in {e for kind in KINDS.values() for e in kind}}
        procs = []
        for kind in kinds:  # one process per kind, at most two at a time
            cmd = [sys.executable, __file__, "--child", kind, "--work", str(work), "--seeds", str(args.seeds),
                   "--texts", str(args.texts), "--streams", *streams, "--modes", *args.modes]
            procs.append(subprocess.Popen(cmd, env={**env0, **KINDS[kind]}, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True))
            if len(procs) >= 2:
                _wait(procs.pop(0))
        for p in procs:
            _wait(p)
        runs = {k: dict(np.load(work / f"{k}.npz")) for k in kinds}
        paths = {k: json.loads((work / f"{k}.json").read_text()) for k in kinds}
    report(kinds, runs, paths, streams, args.modes, seeds, args.texts)
    if skipped:
        print(f"\nskipped (the shared Llama-3 data is absent): {', '.join(skipped)}")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


def _wait(p: subprocess.Popen) -> None:
    err = p.communicate()[1]
    if p.returncode:
        raise SystemExit(f"a kind's process failed:\n{err[-2000:]}")


def report(kinds: list[str], runs: dict, paths: dict, streams: list[str], modes: list[str], seeds: list[int],
           texts: int) -> None:
    ref = kinds[0]
    print("code paths (as each process found them):")
    for k in kinds:
        p = paths[k]
        print(f"- {k}: NumPy AVX-512 {'on' if p['numpy_avx512'] else 'off'}, OpenBLAS {p['openblas']}, "
              f"PyTorch {p['torch']}")
    print(f"\nembeddings of {texts} texts, the default encoder, against {ref}:\n")
    print("| kind | identical rows | largest difference |")
    print("|---|---|---|")
    E0 = runs[ref]["embeddings"]
    for k in kinds[1:]:
        E = runs[k]["embeddings"]
        same = int(np.all(E == E0, axis=1).sum())
        print(f"| {k} | {same}/{len(E0)} | {float(np.abs(E - E0).max()):.1e} |")
    print(f"\nNumPy's exp and log of {UFUNC_VALUES:,} values each, against {ref}:\n")
    print("| kind | exp: values that differ | largest relative difference | log: values that differ | "
          "largest relative difference |")
    print("|---|---|---|---|---|")
    for k in kinds[1:]:
        cells = []
        for fn in UFUNCS:
            n, rel = ufunc_differences(runs[ref][f"ufunc/{fn}"], runs[k][f"ufunc/{fn}"])
            cells += [f"{n} ({100 * n / UFUNC_VALUES:.2f}%)", f"{rel:.1e}"]
        print(f"| {k} | " + " | ".join(cells) + " |")
    print(f"\nthe routers on the same embeddings, {len(seeds)} seeds, against {ref}:\n")
    print("| stream | mode | kind | seeds whose numbers differ | seeds whose decisions part | first parting "
          "(request of stream) | seeds >= alpha | largest change of a seed's satisfaction | cost / static mixture |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in streams:
        for mode in modes:
            for k in kinds[1:]:
                c = compare(runs[ref], runs[k], f"{name}/{mode}", seeds)
                first = f"{min(c['parted'])} of {c['length']}" if c["parted"] else "–"
                print(f"| {name} | {mode} | {k} | {c['differ']}/{c['seeds']} | {len(c['parted'])}/{c['seeds']} | "
                      f"{first} | {c['met'][0]} -> {c['met'][1]} | {100 * c['sat']:.2f} points | "
                      f"{c['cost'][0]:.3f}x -> {c['cost'][1]:.3f}x |", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
