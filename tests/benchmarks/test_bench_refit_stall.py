"""The refit-stall benchmark's runs: each way of refitting installs the refit it measures."""

import pytest

from ._scripts import load_script


@pytest.fixture(scope="module")
def stall():
    return load_script("bench_refit_stall")


@pytest.mark.parametrize("worker", [False, True])
def test_each_way_installs_the_refit_it_measures(stall, worker):
    svc = stall.filled_service(200, seed=1)
    assert svc.router.model_version == 1 and svc.router.policy.lab_n == 200 and not svc.router.policy.refit_due
    m = stall.measure(svc, worker, seconds=0.1, rate=0)  # asserts the refit installed
    assert m["n"] > 0 and m["max"] >= m["p99"] >= m["p50"] > 0
    assert svc.router.model_version == 2 and svc.refits["done"] == int(worker)
