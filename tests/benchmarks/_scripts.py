"""Benchmark scripts are not a package: the tests load each one as a module."""

import importlib.util
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_script(name: str):
    """The module of ``benchmarks/<name>.py``."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
