"""Same seed, another CPU: the benchmark runs each kind of CPU on its own code paths and
reports where two kinds' decisions part."""

import numpy as np
import pytest

from ._scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("bench_cpu_repro")


def test_parting_is_the_first_request_at_which_decisions_differ(bench):
    a = np.array([0, 1, 2, 2, 1], np.int8)
    assert bench.parting(a, a.copy()) is None
    b = a.copy()
    b[3] = 0
    assert bench.parting(a, b) == 4  # 1-based, as the stream counts requests


def test_a_stream_compared_under_two_kinds(bench):
    seeds = [0, 1, 2]
    models = {s: np.zeros(10, np.int8) for s in seeds}
    ref = {f"s/{k}/model": m for k, m in models.items()}
    other = {f"s/{k}/model": m.copy() for k, m in models.items()}
    other["s/2/model"][6:] = 1  # seed 2 parts at request 7
    ref.update({f"s/{k}/q": np.linspace(0, 1, 10) for k in seeds})
    other.update({f"s/{k}/q": np.linspace(0, 1, 10) for k in seeds})
    other["s/1/q"][9] += 1e-12  # seed 1's numbers differ in the last bits, its decisions do not
    # (satisfaction, cost over the static mixture, alpha) per seed
    ref.update({"s/0/figures": np.array([0.80, 1.1, 0.79]), "s/1/figures": np.array([0.78, 1.2, 0.79]),
                "s/2/figures": np.array([0.795, 1.0, 0.79])})
    other.update({"s/0/figures": np.array([0.80, 1.1, 0.79]), "s/1/figures": np.array([0.78, 1.2, 0.79]),
                  "s/2/figures": np.array([0.785, 1.3, 0.79])})
    c = bench.compare(ref, other, "s", seeds)
    assert c["parted"] == [7] and c["length"] == 10 and c["differ"] == 2
    assert c["met"] == (2, 1)  # seed 2 met alpha under the first kind only
    assert c["sat"] == pytest.approx(0.01)
    assert c["cost"] == (pytest.approx(1.1), pytest.approx(1.2))


def test_each_kind_runs_on_its_own_code_paths_whatever_the_callers_environment(bench, capsys, monkeypatch):
    # a caller's own choice of kernels must not leak into the kinds' processes
    monkeypatch.setenv("OPENBLAS_CORETYPE", "SkylakeX")
    monkeypatch.setenv("NPY_DISABLE_CPU_FEATURES", "")
    assert bench.main(["--seeds", "1", "--streams", "four0", "--modes", "contextual", "paper", "--texts", "12"]) == 0
    out = capsys.readouterr().out
    if not bench.has_avx512():  # e.g. CI's AVX2 machines: one code path, nothing to compare
        assert "nothing to compare" in out
        return
    assert "- avx2: NumPy AVX-512 off, OpenBLAS Haswell, PyTorch AVX2" in out
    assert "- avx512-amd: NumPy AVX-512 on, OpenBLAS Haswell, PyTorch AVX512" in out
    assert "- avx512-intel: NumPy AVX-512 on, OpenBLAS SkylakeX, PyTorch AVX512" in out
    rows = [line for line in out.splitlines() if line.startswith("| four0 |")]
    assert len(rows) == 4 and {r.split(" | ")[1] for r in rows} == {"contextual", "paper"}
    assert all("| 1 ->" in r or "| 0 ->" in r for r in rows)
    emb = [line for line in out.splitlines() if line.startswith("| avx512-")][:2]
    assert all("/12 |" in line for line in emb)
    ufuncs = [line for line in out.splitlines() if line.startswith("| avx512-")][2:4]
    assert len(ufuncs) == 2 and all(line.count("%)") == 2 for line in ufuncs)


def test_a_functions_values_compared_under_two_kinds(bench):
    x = bench.ufunc_inputs()["exp"]
    ref = np.exp(x)
    assert bench.ufunc_differences(ref, ref.copy()) == (0, 0.0)
    other = ref.copy()
    other[[3, 50]] = np.nextafter(other[[3, 50]], np.inf)  # two values one ulp apart
    n, rel = bench.ufunc_differences(ref, other)
    assert n == 2 and 0 < rel < 1e-15
    assert tuple(bench.ufunc_inputs()) == bench.UFUNCS == ("exp", "log") and len(x) == bench.UFUNC_VALUES
