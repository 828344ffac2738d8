"""The routing service's durability: checkpoints (router safetensors + JSON ledger, one
atomic step) and the replay of the SQLite journal's events after the last checkpoint.

:class:`Persistence` is a part of :class:`.core.RoutingService` (it reads and writes the
service's router, ledger and statistics under the service's locks)."""

from __future__ import annotations

import json
import logging
import math
import os
import uuid
from collections import OrderedDict
from pathlib import Path

import numpy as np

from ..router import RouterConfig, SLARouter
from .journal import private_file
from .records import ModelStats, no_json_constant, run_refit, unb64_vector

log = logging.getLogger("slarouter.service")
#: the router checkpoint of an old ledger that does not name its file
ROUTER_FILE = "router.safetensors"
LEDGER_FILE = "service.json"
LEDGER_FORMAT = "slarouter-service-v1"


class Persistence:
    """Checkpoint, restore and journal replay of a :class:`.core.RoutingService`."""

    def checkpoint(self) -> Path | None:
        """Router (safetensors) and ledger (JSON), as one atomic step: the router goes to a
        new file named by the ledger, and replacing the ledger is the commit; the journal
        then drops the events the checkpoint holds. Files are 0600."""
        d = self.state_dir
        if d is None:
            return None
        d.mkdir(parents=True, exist_ok=True)
        with self._io_lock:
            with self._lock:
                # a refit taken before the checkpoint is installed before it (the journal's
                # events after the checkpoint then never install one taken before it)
                self._refit_idle.wait_for(lambda: not self._refit_busy)
                seq = self.journal.last_seq() if self.journal is not None else 0
                router_name = f"router-{seq:012d}-{uuid.uuid4().hex[:8]}.safetensors"
                tmp_router = d / f".{router_name}.tmp"
                private_file(tmp_router)
                self.router.save(tmp_router)
                doc = {"format": LEDGER_FORMAT, "t": self.router.t, "zoo": list(self.zoo.names),
                       "encoder": self.encoder.spec, "dim": int(self.encoder.dim),
                       "mode": self.router.config.mode, "alpha": self.router.config.alpha,
                       "router_settings": self.config.settings,
                       "router_file": router_name, "journal_seq": seq,
                       "requests": [[k, *v] for k, v in self.requests.items()],
                       "stats": [s.__dict__ for s in self.stats], "failed_requests": self.failed_requests,
                       "usage_rejected": self.usage_rejected, "judge": dict(self.judge),
                       "plug_sum": self.plug_sum, "last_v": _num(self.last_v)}
                payload = json.dumps(doc, allow_nan=False)
            os.replace(tmp_router, d / router_name)
            tmp_ledger = d / f".{LEDGER_FILE}.{os.getpid()}.tmp"
            private_file(tmp_ledger)
            tmp_ledger.write_text(payload)
            os.replace(tmp_ledger, d / LEDGER_FILE)  # the commit point
            for old in d.glob("router*.safetensors"):
                if old.name != router_name:
                    old.unlink(missing_ok=True)
            if self.journal is not None:
                self.journal.truncate(seq)
        return d

    def restore(self) -> bool:
        """Load the state folder's checkpoint if there is one (errors name the mismatch),
        then replay the journal's events after it."""
        d = self.state_dir
        lp = d / LEDGER_FILE
        seq = 0
        if lp.exists():
            seq = self._load_checkpoint(d, lp)
        elif (d / ROUTER_FILE).exists():
            raise ValueError(f"{d}: incomplete checkpoint ({ROUTER_FILE} without {LEDGER_FILE})")
        n = self._replay(seq)
        self._release_lost_judge_calls()
        self.restored = lp.exists() or n > 0
        return self.restored

    def _load_checkpoint(self, d: Path, lp: Path) -> int:
        try:
            doc = json.loads(lp.read_text(), parse_constant=no_json_constant)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{lp}: not a service ledger ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != LEDGER_FORMAT:
            raise ValueError(f"{lp}: not a service ledger (format {doc.get('format') if isinstance(doc, dict) else None!r})")
        problems = []
        if doc["zoo"] != list(self.zoo.names):
            problems.append(_differs("models", doc["zoo"], list(self.zoo.names)))
        if doc["encoder"] != self.encoder.spec:
            problems.append(_differs("encoder", doc["encoder"], self.encoder.spec))
        elif doc["dim"] != int(self.encoder.dim):
            problems.append(_differs("encoder width", doc["dim"], int(self.encoder.dim)))
        rp = d / doc.get("router_file", ROUTER_FILE)
        try:
            if not rp.exists():
                raise ValueError(f"{d}: incomplete checkpoint: the ledger names {rp.name}, which is missing")
            router = SLARouter.load(rp)
        except ValueError:
            if problems:  # the ledger alone shows other settings: that is what to fix first
                raise _other_settings(d, problems) from None
            raise
        given = doc.get("router_settings", {})  # the settings the checkpointed start gave (--set)
        if not isinstance(given, dict):
            raise ValueError(f"{lp}: router_settings must be an object, got {type(given).__name__}")
        asked, defaults = router_differences(router, self.router_config(), self.config.seed,
                                             set(given) | set(self.config.settings))
        problems += asked
        if problems:
            raise _other_settings(d, problems)
        if defaults:
            # given by neither start (no --set): a library whose defaults changed since the
            # checkpoint. The learned router keeps its own settings, said once, rather than a
            # refusal that would strand the state folder
            log.warning("%s: the restored router keeps the settings it was checkpointed with, which differ "
                        "from this version's defaults: %s", d, "; ".join(defaults))
        self.kept_settings = defaults
        bad = [f"model {self.zoo.names[j] if j < len(self.zoo) else j} {k} = {v!r}"
               for j, st in enumerate(doc["stats"]) for k, v in st.items()
               if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0]
        if not isinstance(doc.get("plug_sum"), (int, float)) or not math.isfinite(doc["plug_sum"]):
            bad.append(f"plug_sum = {doc.get('plug_sum')!r}")
        if bad:
            raise ValueError(f"{lp}: refusing a checkpoint with negative or non-finite accounting ("
                             + "; ".join(bad[:5]) + "). Restore an older copy of the state folder or start a "
                             "new one.")
        if router.t != doc["t"]:
            raise ValueError(f"{d}: router step {router.t} does not match the ledger's {doc['t']}")
        if (router.config.mode, router.config.alpha) != (doc["mode"], doc["alpha"]):
            raise ValueError(f"{d}: router mode {router.config.mode} at alpha {router.config.alpha} does not "
                             f"match the ledger's {doc['mode']} at {doc['alpha']}")
        self.router = router
        # rows of older versions lack the judge verdict and call: none
        self.requests = OrderedDict((row[0], (list(row[1:]) + [None] * 3)[:9]) for row in doc["requests"])
        self.stats = [ModelStats(**s) for s in doc["stats"]]
        self.failed_requests = int(doc["failed_requests"])
        self.usage_rejected = int(doc.get("usage_rejected", 0))
        self.judge.update(doc.get("judge", {}))
        self.plug_sum = float(doc["plug_sum"])
        self.last_v = math.nan if doc["last_v"] is None else float(doc["last_v"])
        return int(doc.get("journal_seq", 0))

    def _replay(self, seq: int) -> int:
        """Apply the journal's events after ``seq`` (what the last checkpoint misses).

        Refits: where the journal says a refit was taken (``refit``), the same job is run
        here, and installed where it says it was (``refit_done``), so later decisions see
        the text model they saw. A journal without refit events (none fell due, or an
        older version's, which refitted in place) is replayed with refits in place."""
        n = 0
        if self.journal is not None:
            events = list(self.journal.after(seq))  # read once (what one checkpoint interval wrote)
            self.router.defer_refits(any(kind in ("refit", "refit_done") for _, kind, _ in events))
            held: dict[int, object] = {}  # refit id -> its result, until installed
            for _, kind, ev in events:
                n += 1
                if kind == "refit":
                    job = self.router.take_refit()
                    self._refit_id = max(self._refit_id, int(ev["id"]))
                    if job is not None:
                        held[int(ev["id"])] = run_refit(job)[0]
                    continue
                if kind == "refit_done":
                    if int(ev["id"]) in held:
                        self.router.apply_refit(held.pop(int(ev["id"])))
                    continue
                if kind == "route":
                    d = self.router.decide(unb64_vector(ev["x"]), np.asarray(ev["costs"], np.float64))
                    self.router.observe(d, None)
                    if d.t != ev["t"] or d.model != ev["model"]:
                        log.warning("journal replay: step %d chose model %d, the journal says %d at step %d",
                                    d.t, d.model, ev["model"], ev["t"])
                    self._apply_route(ev["rid"], d, ev.get("owner"))
                elif kind == "complete":
                    self._apply_complete(ev)
                elif kind == "fail":
                    self._apply_fail(ev)
                elif kind == "failure":
                    self.stats[ev["model"]].failures += 1
                elif kind == "feedback":
                    rec = self.requests.get(ev["rid"])
                    if rec is not None and rec[4] is None:
                        try:
                            self._thumbs_to_router(rec, ev["f"])
                        except KeyError:
                            continue
                        self._apply_feedback(ev, rec)
                elif kind == "judge_due":
                    self._apply_judge_due(ev)
                elif kind == "judge":
                    self._apply_judge(ev)
            for rid, result in held.items():  # running when the service stopped: installed now
                self._log("refit_done", {"id": rid})
                self.router.apply_refit(result)
        for rec in self.requests.values():
            if rec[3] == "routing":  # in flight when the service stopped: nothing was served
                rec[3] = "failed"
        self.replayed = n
        return n


def router_differences(router: SLARouter, now: RouterConfig, seed: int,
                       given: set[str] = frozenset()) -> tuple[list[str], list[str]]:
    """The router settings in which the checkpointed ``router`` differs from the one the
    service would build now (``now``, with ``seed``), each as ``name: checkpoint value (now
    new value)``, in two lists: ``(asked, defaults)``.

    The restored router runs with its checkpoint's settings, so a difference the start
    *asks for* must refuse it instead of being silently dropped: ``mode``, ``alpha``,
    ``--seed`` (the origin of its random streams, restored with them), the zoo file's
    stated accuracies (``stated_levels``, the contextual router's prior) and every policy
    setting ``given`` explicitly (``--set``) by this start or the checkpointed one. Any
    other policy setting (nested ones by dotted name, e.g. ``predictor.lr``) is a default
    on both sides, so a difference there is a newer library's default: ``defaults``, kept
    from the checkpoint and logged. What a restart may change is outside the router: the
    encoder's runtime and threads (same encoder, same vectors), timers, limits, circuit
    breakers, the instance prefix, and the zoo's prices, endpoints and judge (costs are
    passed to each decision, not kept); the zoo's models and the encoder are the ledger's
    own checks."""
    was = router.config
    asked, defaults = [], []
    if was.mode != now.mode:  # another policy: its settings are another dataclass, the mode says it all
        asked.append(_differs("mode", was.mode, now.mode))
    if was.alpha != now.alpha:
        asked.append(_differs("alpha", was.alpha, now.alpha))
    if was.mode == now.mode:
        a, b = _flat(was.settings.to_dict()), _flat(now.settings.to_dict())
        for k in list(a) + [k for k in b if k not in a]:
            if _same(a.get(k)) != _same(b.get(k)):
                ours = k in _ASKED or k.split(".")[0] in given
                (asked if ours else defaults).append(_differs(_LABELS.get(k, k), a.get(k), b.get(k)))
    if router.seed != int(seed):
        asked.append(_differs("seed", router.seed, int(seed)))
    return asked, defaults


#: policy settings a service start sets (from the zoo file), refused when they differ
_ASKED = frozenset({"stated_levels"})
#: settings named with where they come from
_LABELS = {"stated_levels": "stated_levels (the zoo's stated accuracies)"}


def _flat(d: dict, prefix: str = "") -> dict:
    """A settings dict with nested settings (a dict) under dotted names."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def _same(v):
    """A setting's value as compared: a list (what JSON gives back) and a tuple are the same."""
    return tuple(_same(x) for x in v) if isinstance(v, (list, tuple)) else v


def _show(v) -> str:
    if isinstance(v, (list, tuple)):
        return str(list(v)) if v else "none"
    return str(v)


def _differs(name: str, was, now) -> str:
    """One difference, as the refusal lists it."""
    return f"{name}: {_show(was)} (now {_show(now)})"


def _other_settings(d: Path, problems: list[str]) -> ValueError:
    """The refusal of a checkpoint whose settings differ from the service's, each difference
    named (``name: checkpoint value (now new value)``)."""
    return ValueError(f"{d} holds a checkpoint made with other settings: " + "; ".join(problems)
                      + ". Start with the same settings or point --state-dir at a new folder.")


def _num(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None
