"""Several processes on one embedding-cache folder at once, for longer than the test
(``tests/core/test_embedding_cache_concurrency.py``) can: the harness in
``tests/core/cache_stress.py`` run round after round with other encoders and sizes.

Each round spawns the workers (embedding overlapping and own texts, merging, compacting
and asking for ``info()`` meanwhile) and checks: nothing raised; no text cached before
the start was encoded again; every vector equals a fresh encoding (bit for bit, or up to
the batch factor); every text came back with one bit pattern in every worker, the one the
cache holds at the end. Prints one line per round and the verdict (exit status 1 when a
round found a problem).

Run: .venv/bin/python benchmarks/bench_cache_race.py [--rounds 8] [--seconds 10] [--workers 4]
     [--minilm]   (adds rounds with the packaged MiniLM: slower, the real batch effects)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.core.cache_stress import Config, run  # noqa: E402

SETTINGS = [  # (encoder, batch_sensitive, legacy, block, merge)
    ("hashing", False, False, 64, 3),
    ("numpy", True, True, 64, 3),
    ("hashing", True, False, 16, 2),
    ("numpy", False, True, 256, 8),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--minilm", action="store_true")
    args = ap.parse_args(argv)
    settings = SETTINGS + ([("minilm", False, False, 64, 3)] if args.minilm else [])
    bad = 0
    t0 = time.monotonic()
    for r in range(args.rounds):
        encoder, batch, legacy, block, merge = settings[r % len(settings)]
        cfg = Config(workers=args.workers, seconds=args.seconds, encoder=encoder, batch_sensitive=batch,
                     legacy=legacy, block=block, merge=merge, seed=r,
                     dim=384 if encoder == "minilm" else 16)
        with tempfile.TemporaryDirectory() as tmp:
            s = run(tmp, cfg)
        bad += not s["ok"]
        print(f"round {r + 1}: {encoder}{' batch-sensitive' if batch else ''}{' legacy' if legacy else ''} "
              f"block {block} merge>{merge}: {s['calls']} calls, {s['compactions']} compactions -> "
              f"{'ok' if s['ok'] else 'PROBLEMS ' + '; '.join(s['problems'])}", flush=True)
        if s["error_kinds"]:
            print(f"   raised: {s['error_kinds']}")
    print(f"{args.rounds - bad} of {args.rounds} rounds clean in {time.monotonic() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
