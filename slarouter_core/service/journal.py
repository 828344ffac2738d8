"""The service's append-only event journal: SQLite in WAL mode (standard library).

Every decision and every feedback event is appended (and committed) before the reply
that reports it returns, so a ``kill -9`` loses nothing: on start the service loads the
last checkpoint and replays the journal's events after it. Events are JSON rows
``(seq, kind, body)``; ``seq`` orders them as the router saw them (appends happen under
the router's lock). A checkpoint records the last ``seq`` it contains; older rows are
then deleted (they are in the checkpoint).

``synchronous=NORMAL`` in WAL mode survives a process crash (the OS keeps the written
pages); a power cut can lose the last transactions. Files are created 0600.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Iterator

JOURNAL_FILE = "journal.sqlite3"


def private_file(path: Path) -> None:
    """Create ``path`` (if absent) readable and writable by its owner only."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    os.close(fd)
    os.chmod(path, 0o600)


class Journal:
    """Append-only event log; thread-safe (one connection behind a lock)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        private_file(self.path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
                         "kind TEXT NOT NULL, body TEXT NOT NULL)")
        for suffix in ("-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                os.chmod(p, 0o600)

    def append(self, kind: str, body: dict) -> int:
        """Commit one event; its sequence number."""
        text = json.dumps(body, allow_nan=False, separators=(",", ":"))
        with self._lock:
            cur = self._db.execute("INSERT INTO events (kind, body) VALUES (?, ?)", (kind, text))
            return int(cur.lastrowid)

    def last_seq(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()
            if row[0]:
                return int(row[0])
            # an emptied table still remembers its last number here
            row = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
            return int(row[0]) if row else 0

    def after(self, seq: int) -> Iterator[tuple[int, str, dict]]:
        """Events with a sequence number above ``seq``, in order."""
        with self._lock:
            rows = self._db.execute("SELECT seq, kind, body FROM events WHERE seq > ? ORDER BY seq",
                                    (int(seq),)).fetchall()
        for s, kind, body in rows:
            yield int(s), kind, json.loads(body)

    def truncate(self, upto: int) -> None:
        """Delete the events a checkpoint now holds (``seq <= upto``)."""
        with self._lock:
            self._db.execute("DELETE FROM events WHERE seq <= ?", (int(upto),))

    def close(self) -> None:
        with self._lock:
            self._db.close()
