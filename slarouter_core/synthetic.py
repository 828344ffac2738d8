"""A small synthetic routing dataset for demos (labelled synthetic in its metadata).

Each request has a hidden difficulty (1 to 4) that its text reveals through its wording
("quick check", "step by step", "prove rigorously", ...), and each model has a skill: a
model solves a request with probability sigmoid(2 * (skill - difficulty)). Text therefore
carries real signal about which model will succeed, so the predictor visibly learns.

A skill may also depend on the request's topic (``SPECIALIST_MODELS``): a zoo of
specialists whose priciest model is not the best at anything, for checking a router on
a zoo it was not tuned on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .data import write_parquet

DEMO_MODELS = (
    # name, skill (one number, or one per topic), mean energy per request (J), latency per request (ms)
    ("tiny-1b", 1.4, 60.0, 300.0),
    ("small-8b", 2.3, 320.0, 900.0),
    ("medium-32b", 3.1, 900.0, 2100.0),
    ("large-70b", 3.9, 2100.0, 4800.0),
)

#: specialists: each is strong on its own topics only; the priciest model is a generalist
#: that each topic's specialist beats on that topic (pooled over topics it is still the
#: most accurate single model)
SPECIALIST_MODELS = (
    ("tiny-1b", 1.4, 60.0, 300.0),
    ("coder-8b", {"arithmetic": 3.6, "science": 1.8, "history": 1.6, "coding": 4.2}, 350.0, 900.0),
    ("scholar-8b", {"arithmetic": 1.8, "science": 4.0, "history": 4.2, "coding": 1.8}, 420.0, 1000.0),
    ("generalist-70b", 3.3, 2400.0, 5200.0),
)

TOPICS = {
    "arithmetic": ["sum", "product", "fraction", "percentage", "remainder", "integer", "ratio"],
    "science": ["photosynthesis", "gravity", "molecule", "enzyme", "circuit", "orbit", "cell"],
    "history": ["empire", "treaty", "revolution", "dynasty", "parliament", "trade route", "war"],
    "coding": ["function", "loop", "recursion", "array", "hash map", "pointer", "query"],
}

DIFFICULTY_PHRASES = {
    1: ["Quick check:", "Simple question:", "In one word,", "Basic fact:"],
    2: ["Explain briefly", "Describe how", "Compare the", "Why does"],
    3: ["Step by step, work out", "Analyse carefully", "Derive the", "Reason through"],
    4: ["Prove rigorously that", "Give a formal multi-step derivation of",
        "Resolve this subtle edge case about", "Critically evaluate the competing theories of"],
}

TEMPLATES = [
    "{lead} the {a} and the {b}.",
    "{lead} what the {a} has to do with the {b}?",
    "{lead} the role of the {a} in a {b} problem.",
    "{lead} how a {a} relates to each {b}.",
]


def random_zoo_models(n_models: int, seed: int, cost_range: tuple[float, float] = (0.1, 20.0)) -> tuple:
    """``n_models`` models (rows like ``DEMO_MODELS``) with random per-topic skills and
    log-uniform costs unrelated to skill: zoos no router's defaults were tuned on, where
    cost order says nothing about accuracy."""
    rng = np.random.default_rng(seed)
    lo, hi = np.log(cost_range[0]), np.log(cost_range[1])
    models = []
    for i in range(int(n_models)):
        base = rng.uniform(1.0, 4.0)
        skill = {t: float(base + rng.normal(0.0, 0.5)) for t in TOPICS}
        models.append((f"model-{i}", skill, float(np.exp(rng.uniform(lo, hi))), 1000.0))
    return tuple(models)


def generate_demo_frame(n: int = 3000, seed: int = 0, models=DEMO_MODELS) -> pd.DataFrame:
    """The demo table in the canonical schema (``models``: rows like ``DEMO_MODELS``)."""
    rng = np.random.default_rng(seed)
    topics = list(TOPICS)
    topic = rng.integers(0, len(topics), n)
    difficulty = rng.choice([1, 2, 3, 4], size=n, p=[0.3, 0.3, 0.25, 0.15])
    rows = []
    for i in range(n):
        words = TOPICS[topics[topic[i]]]
        a, b = rng.choice(len(words), size=2, replace=False)
        lead = DIFFICULTY_PHRASES[int(difficulty[i])][rng.integers(0, 4)]
        text = TEMPLATES[rng.integers(0, len(TEMPLATES))].format(lead=lead, a=words[a], b=words[b])
        rows.append(text)
    frame = pd.DataFrame({
        "doc_id": np.arange(n),
        "benchmark": [topics[k] for k in topic],
        "input_text": rows,
        "correct_answer": pd.array([None] * n, dtype="string"),
    })
    prompt_tokens = np.array([len(t.split()) + 8 for t in rows])
    for name, skill, energy, latency in models:
        if isinstance(skill, dict):
            missing = set(topics) - set(skill)
            if missing:
                raise ValueError(f"model {name!r} has no skill for topic(s) {sorted(missing)}")
            skill = np.array([float(skill[t]) for t in topics])[topic]
        p = 1.0 / (1.0 + np.exp(-2.0 * (skill - difficulty)))
        completion = np.maximum(4, rng.poisson(20 + 15 * difficulty))
        scale = completion / (20 + 15 * 2.5)
        frame[f"{name}_solved"] = (rng.random(n) < p).astype(np.int8)
        frame[f"{name}_energy_joules"] = np.round(energy * scale * rng.lognormal(0, 0.1, n), 3)
        frame[f"{name}_latency_ms"] = np.round(latency * scale * rng.lognormal(0, 0.1, n), 1)
        frame[f"{name}_prompt_tokens"] = prompt_tokens
        frame[f"{name}_completion_tokens"] = completion
    return frame


def demo_difficulty(texts) -> np.ndarray:
    """The hidden difficulty (1 to 4) each demo text reveals by its lead phrase (0: none):
    what a router that read the text perfectly would know (an evaluation-only bound)."""
    leads = [(p, k) for k, phrases in DIFFICULTY_PHRASES.items() for p in phrases]
    return np.array([next((k for p, k in leads if str(t).startswith(p)), 0) for t in texts], np.int64)


def demo_metadata(n: int, seed: int) -> dict:
    return {
        "synthetic": True,
        "description": "SYNTHETIC demo data generated by slarouter_core.synthetic; not real model logs.",
        "generator": "slarouter_core.synthetic.generate_demo",
        "n": n,
        "seed": seed,
        "models": [m[0] for m in DEMO_MODELS],
    }


def generate_demo(path: str | Path, n: int = 3000, seed: int = 0) -> Path:
    """Write the synthetic demo parquet (the repo ships ``data/demo.parquet`` from this)."""
    return write_parquet(generate_demo_frame(n, seed), path, metadata=demo_metadata(n, seed))
