"""LiveRun from several threads at once: a dashboard click reruns the page in a new script
thread while the old one may still be inside a tick (Streamlit's fast reruns), and a lazy
download runs in a thread of its own. Readers wait for a tick under way; a pause recorded
before a tick takes the lock stops it."""

from __future__ import annotations

import threading

import pytest

from slarouter_core.data import from_frame
from slarouter_core.embedding_cache import embed_texts
from slarouter_core.live import LiveRun, RunSettings
from tests.conftest import make_frame

TICK = 50
WAIT_S = 10.0


@pytest.fixture(scope="module")
def small():
    data = from_frame(make_frame(n=400, seed=3))
    return data, embed_texts(data.texts, "hashing:64")


def held_mid_tick(live: LiveRun):
    """Make the first router's first ``Simulation.step`` stop half way through a tick (the
    first router has served, the second not yet) until ``release`` is set; ``inside`` is
    set once it is there."""
    inside, release = threading.Event(), threading.Event()
    sim = live.sims[live.routers[0]]
    real = sim.step

    def step(*args, **kwargs):
        out = real(*args, **kwargs)
        if not inside.is_set():
            inside.set()
            assert release.wait(WAIT_S)
        return out

    sim.step = step
    return inside, release


def test_a_reader_waits_for_a_tick_under_way_and_sees_all_of_it(small):
    data, emb = small
    live = LiveRun(data, emb, RunSettings(per_tick=TICK), routers=("paper", "contextual"))
    inside, release = held_mid_tick(live)
    ticker = threading.Thread(target=live.step)
    ticker.start()
    assert inside.wait(WAIT_S)
    seen = {}
    readers = [threading.Thread(target=lambda: seen.update(view=live.view())),
               threading.Thread(target=lambda: seen.update(csv=live.trace_csv()))]
    for r in readers:
        r.start()
    for r in readers:
        r.join(0.5)
        assert r.is_alive(), "a reader drew the run half way through a tick"
    release.set()
    for th in (ticker, *readers):
        th.join(WAIT_S)
    # what the page draws and what the trace holds: the whole tick, for both routers
    assert seen["view"].headline["served"] == TICK
    assert len(seen["csv"].decode().splitlines()) == 2 * TICK + 1


def test_step_if_asks_whether_to_step_under_the_lock(small):
    data, emb = small
    live = LiveRun(data, emb, RunSettings(per_tick=TICK), routers=("paper", "contextual"))
    running = {"on": True}
    assert live.step_if(lambda: running["on"]) and live.t == TICK
    # a tick under way (the old script thread); the next one was decided on before Pause
    inside, release = held_mid_tick(live)
    ticker = threading.Thread(target=live.step)
    ticker.start()
    assert inside.wait(WAIT_S)
    stepped = []
    late = threading.Thread(target=lambda: stepped.append(live.step_if(lambda: running["on"])))
    late.start()
    running["on"] = False  # Pause, while the late tick waits for the lock
    release.set()
    for th in (ticker, late):
        th.join(WAIT_S)
    assert stepped == [False] and live.t == 2 * TICK
    assert not live.step_if(lambda: False) and live.t == 2 * TICK


def test_the_satisfaction_band_says_each_routers_own_confidence(small):
    """The contextual window certificate is at its own 1 - delta (95% by default), guarded's
    bound at 90%: the chart's title says which band is which, never one figure for both."""
    from slarouter_core.live.charts import title_text

    data, emb = small

    def title(routers, **kw) -> str:
        live = LiveRun(data, emb, RunSettings(per_tick=TICK, **kw), routers=routers)
        live.step()
        chart = next(c for c in live.charts() if c.key == "satisfaction")
        return title_text(chart.spec)

    assert title(("contextual", "paper")).endswith("(band: its own 95% lower bound)")
    assert title(("guarded", "contextual")).endswith(
        "(band: each router's own lower bound, 90% for guarded, 95% for contextual)")
    assert "band" not in title(("paper",))
    headline = LiveRun(data, emb, RunSettings(per_tick=TICK), routers=("contextual", "paper")).headline()
    scopes = {r["mode"]: r["bound_scope"] for r in headline["routers"]}
    assert scopes == {"contextual": (0.95, "this SLA window"), "paper": None}


def test_the_headline_prices_each_routers_own_satisfaction_text_blind(small):
    """The static mixture at a satisfaction, over the requests served so far: at alpha the
    reference mixture's own cost, dearer the more it must deliver, and the best model alone
    above the best accuracy; each router's ``vs_mixture_same`` divides its cost by it."""
    data, emb = small
    live = LiveRun(data, emb, RunSettings(per_tick=TICK), routers=("contextual", "paper"))
    live.step()
    k = live.t
    assert live.mixture_cost_at(live.alpha, k) == pytest.approx(live._mix_cum[k - 1])
    acc = data.solved.mean(axis=0)
    lo, hi = live.mixture_cost_at(acc.min(), k), live.mixture_cost_at(acc.max() - 1e-3, k)
    assert lo < live.mixture_cost_at(live.alpha, k) < hi
    assert live.mixture_cost_at(1.0, k) == pytest.approx(live._best_cum[k - 1])
    for r in live.headline()["routers"]:
        assert r["vs_mixture_same"] == pytest.approx(r["cost_raw"] / live.mixture_cost_at(r["satisfaction"], k))
