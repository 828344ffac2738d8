"""One history split of the toy data and every registered method's result on it,
computed once for the whole package (the methods are deterministic given the seed)."""

from __future__ import annotations

import pytest

from slarouter_core import baselines as B

from .toy import ALPHA, RATE, make_data


@pytest.fixture(scope="package")
def split():
    data, emb = make_data()
    return B.split_history(data, emb, seed=42, history_fraction=0.3)


@pytest.fixture(scope="package")
def results(split):
    stream, semb, hist = split
    out = {}
    for name, f in B.METHODS.items():
        if name == "single":
            for m in stream.models:
                out[f"single:{m}"] = f(stream, semb, ALPHA, 42, RATE, history=hist, model=m)
        elif name == "slarouter":
            out["slarouter"] = f(stream, semb, ALPHA, 42, RATE, history=hist, V=1e-3)
        else:
            out[name] = f(stream, semb, ALPHA, 42, RATE, history=hist)
    return out
