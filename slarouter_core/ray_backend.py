"""The one place that starts Ray for the grid runner and for parallel embedding."""

from __future__ import annotations

from types import ModuleType


def start_ray(address: str | None, n_jobs: int) -> tuple[ModuleType, bool]:
    """``(ray, started)``: join ``address`` (a running cluster) or start a local runtime
    with ``n_jobs`` CPUs, unless Ray is already up; ``started`` says whether the caller
    should shut it down afterwards."""
    try:
        import ray
    except ImportError:
        raise ValueError("backend 'ray' needs Ray: install the optional extra (pip install 'slarouter[ray]')") from None
    if ray.is_initialized():
        return ray, False
    kwargs: dict = {"include_dashboard": False, "log_to_driver": False}
    if address:
        kwargs["address"] = address
    else:
        kwargs["num_cpus"] = n_jobs
    ray.init(**kwargs)
    return ray, True
