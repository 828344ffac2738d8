"""A running live run that serves nothing must say so (issue 23, defect 9).

Once, after quick setting changes, Start left "Served" at 0 for minutes with no message:
the page believed the run was running while the browser's tick timer sent nothing (it
could not be reproduced since). The page therefore records when the run last moved and a
second, independent timer checks it: a run that has not moved for :func:`stall_after`
seconds is said to have stalled, and the page restarts its timer with a full rerun and
says what happened, instead of waiting in silence.
"""

from __future__ import annotations

from dataclasses import dataclass

#: a stall is declared after this many missed ticks ...
STALL_TICKS = 10
#: ... and never sooner than this (seconds): a slow machine's tick may take a few seconds
STALL_MIN_S = 8.0
#: how often (seconds) the watchdog looks, independently of the run's own timer
WATCH_EVERY_S = 2.0


@dataclass(frozen=True)
class Progress:
    """When (``time.monotonic()`` seconds) the run last served, and how many it had then."""

    at: float
    served: int

    def __post_init__(self) -> None:
        if self.served < 0:
            raise ValueError(f"served must be >= 0, got {self.served}")


def stall_after(period: float) -> float:
    """Seconds without a served request before a running run counts as stalled."""
    return max(STALL_MIN_S, STALL_TICKS * float(period))


def stalled(progress: Progress | None, served: int, now: float, period: float, running: bool,
            done: bool = False) -> bool:
    """Whether a run the page believes running has served nothing for too long."""
    if not running or done or progress is None:
        return False
    return served == progress.served and now - progress.at > stall_after(period)


def stall_note(progress: Progress, now: float) -> str:
    """What the page says when it restarts a stalled run's timer."""
    return (f"The live run had served nothing for {now - progress.at:.0f} s although it was started "
            f"(still at {progress.served:,} requests): its updates stalled. They were restarted just now; if "
            "the count still does not move, press Pause, then Start (or Reset).")


def check(progress: Progress | None, served: int, now: float, period: float, running: bool,
          done: bool = False) -> tuple[Progress | None, str | None]:
    """The page's one stall check: ``(progress, None)`` while all is well; a restarted clock
    and the note to show once the run has stalled."""
    if not stalled(progress, served, now, period, running, done):
        return progress, None
    return Progress(now, served), stall_note(progress, now)
