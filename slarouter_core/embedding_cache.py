"""The on-disk embedding cache: memory-mapped part files keyed by the text's SHA-1, one
folder per encoder, written atomically; plus parallel and one-call embedding helpers.

Embeddings are computed once per (encoder, text) and read back by every later run, so a
simulation never encodes a text twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import stat
import struct
import time
import uuid
from pathlib import Path
from typing import Sequence

import numpy as np

from .encoders import DEFAULT_ENCODER, LazyEncoder, ProgressFn, TextEncoder, default_cache_dir, get_encoder


def text_keys(texts: Sequence[str]) -> np.ndarray:
    """20-byte SHA-1 digests of the texts (the cache key). A text that is not valid
    Unicode (a lone surrogate, e.g. from a badly decoded log) is a ValueError naming it."""
    out = np.empty(len(texts), dtype="S20")
    for i, t in enumerate(texts):
        try:
            out[i] = hashlib.sha1(t.encode("utf-8")).digest()
        except UnicodeEncodeError as exc:
            raise ValueError(f"text {i} is not valid Unicode: {exc.reason} ({t[exc.start:exc.end]!r} at "
                             f"character {exc.start} of {t[max(0, exc.start - 30):exc.start + 10]!r}); "
                             "fix or drop that request") from None
        except AttributeError:
            raise ValueError(f"text {i} is not a string but {type(t).__name__}") from None
    return out


# -- the embedding store ------------------------------------------------------------------
# One folder per encoder (its cache_id) holding immutable "part" files. A part file is:
# a 64-byte header (magic, count n, width d), the n 20-byte keys in ascending order, zero
# padding to a 4 KiB boundary, then the n float32 vectors in the keys' order. Parts are
# memory-mapped: a lookup binary-searches each part's keys and reads only the vectors it
# needs, so a run touches its own keys and vectors, never the rest of the cache. Parts are
# written to a temporary name and renamed (atomic; readers never see a torn part, and
# several processes may write at once). See README "Embedding cache" for the choice.
_MAGIC = b"SLREMB01"
_HEADER = 64
_ALIGN = 4096
_PART_GLOB = "part-*.emb"
_LEGACY_GLOB = "shard-*.npz"
#: texts encoded (and written) per part, so that an interrupted run keeps what it did
ENCODE_BLOCK = 65_536
#: small parts are merged once there are more than this many of them
MERGE_SMALL_PARTS = 16
_GATHER = 32_768


def _layout(n: int, dim: int) -> tuple[int, int]:
    vec_off = -(-(_HEADER + 20 * n) // _ALIGN) * _ALIGN
    return vec_off, vec_off + 4 * n * dim


class _Part:
    """One memory-mapped part file (raises ValueError when it is not a whole part)."""

    def __init__(self, path: Path, dim: int):
        with open(path, "rb") as fh:
            head = fh.read(_HEADER)
            size = os.fstat(fh.fileno()).st_size
        if len(head) < _HEADER or head[:8] != _MAGIC:
            raise ValueError(f"{path.name} is not an embedding part")
        n, d = struct.unpack("<QQ", head[8:24])
        vec_off, total = _layout(n, d)
        if d != dim or size != total:
            raise ValueError(f"{path.name} is torn or of another width")
        self.path, self.n, self.dim = path, int(n), int(d)
        self._mm = None
        if n:
            with open(path, "rb") as fh:
                self._mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            self.keys = np.frombuffer(self._mm, dtype="S20", count=n, offset=_HEADER)
            self.vectors = np.frombuffer(self._mm, dtype=np.float32, count=n * d, offset=vec_off).reshape(n, d)
        else:
            self.keys = np.zeros(0, "S20")
            self.vectors = np.zeros((0, d), np.float32)

    def release(self) -> None:
        """Drop this part's pages from the process (they stay in the OS page cache): the
        vectors were copied out, so they need not count in the run's resident memory."""
        if self._mm is not None and hasattr(mmap, "MADV_DONTNEED"):
            try:
                self._mm.madvise(mmap.MADV_DONTNEED)
            except OSError:
                pass

    def find(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For sorted ``keys``: (mask of those present, their rows in this part)."""
        if self.n == 0 or len(keys) == 0:
            return np.zeros(len(keys), bool), np.zeros(0, np.int64)
        pos = np.searchsorted(self.keys, keys)
        ok = pos < self.n
        hit = np.zeros(len(keys), bool)
        hit[ok] = self.keys[pos[ok]] == keys[ok]
        return hit, pos[hit]


def _write_tmp(d: Path, keys: np.ndarray, vectors, sort: bool = True) -> tuple[Path, Path]:
    """Write one part (keys unique; ``vectors`` indexable by row, e.g. a list of memmaps'
    gathers through :func:`_gather_rows`) under a temporary name, flushed to disk.
    Returns (temporary path, final path): the caller renames it (see ``_commit``)."""
    n = len(keys)
    dim = int(vectors.shape[1])
    order = np.argsort(keys, kind="stable") if sort else np.arange(n)
    vec_off, total = _layout(n, dim)
    name = f"part-{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}.emb"
    tmp = d / f".tmp-{name}"
    try:
        for attempt in range(3):
            try:
                fh = open(tmp, "wb")
                break
            except FileNotFoundError:  # the folder was removed by a concurrent clear()
                if attempt == 2:
                    raise
                d.mkdir(parents=True, exist_ok=True)
        with fh:
            fh.write(_MAGIC + struct.pack("<QQ", n, dim) + b"\0" * (_HEADER - 24))
            fh.write(np.ascontiguousarray(keys[order]).tobytes())
            fh.write(b"\0" * (vec_off - _HEADER - 20 * n))
            for a in range(0, n, _GATHER):
                fh.write(np.ascontiguousarray(vectors[order[a:a + _GATHER]], dtype=np.float32).tobytes())
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp, d / name


def _write_part(d: Path, keys: np.ndarray, vectors, sort: bool = True) -> Path:
    """:func:`_write_tmp` then the atomic rename. Callers hold the commit lock (a part
    appears only under it, see ``EmbeddingCache``). Returns its path."""
    tmp, final = _write_tmp(d, keys, vectors, sort)
    try:
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return final


def _list_parts(d: Path) -> list[Path]:
    """The folder's part files in name order (one directory scan; none when it is absent)."""
    try:
        with os.scandir(d) as it:
            names = [e.name for e in it if e.name.startswith("part-") and e.name.endswith(".emb")]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [d / n for n in sorted(names)]


@contextlib.contextmanager
def _flock(d: Path, name: str, wait: bool):
    """An exclusive ``flock`` on ``d/name``: yields True when held, False when ``wait`` is
    False and another process holds it, None when the folder cannot be locked (read-only,
    a share without locks, no ``fcntl``: the caller goes on unlocked, as before locks were
    used). A lock file that ``clear()`` removed while we waited for it is locked afresh:
    otherwise two processes could each hold "the" lock, one on the removed file and one on
    the new one."""
    try:
        import fcntl  # (POSIX; imported here so that the module imports everywhere)
    except ImportError:
        yield None
        return
    path = d / name
    while True:
        try:
            d.mkdir(parents=True, exist_ok=True)
            fh = open(path, "a+")
        except OSError:  # a read-only cache: nobody writes there, nothing to lock
            yield None
            return
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            fh.close()
            yield False
            return
        except OSError:  # e.g. ENOLCK on a share without a lock service
            fh.close()
            yield None
            return
        try:
            st, now = os.fstat(fh.fileno()), os.stat(path)
            same = (st.st_ino, st.st_dev) == (now.st_ino, now.st_dev)
        except FileNotFoundError:
            same = False
        if same:
            break
        fh.close()
    try:
        yield True
    finally:
        fh.close()  # releases the lock


class _Concat:
    """Rows of several parts seen as one (n, d) array, gathered on demand."""

    def __init__(self, parts: list[_Part], dim: int):
        self.parts = parts
        self.starts = np.cumsum([0] + [p.n for p in parts])
        self.shape = (int(self.starts[-1]), dim)

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows)
        out = np.empty((len(rows), self.shape[1]), np.float32)
        which = np.searchsorted(self.starts, rows, side="right") - 1
        for k in np.unique(which):
            sel = which == k
            out[sel] = self.parts[k].vectors[rows[sel] - self.starts[k]]
            self.parts[k].release()
        return out


class EmbeddingCache:
    """Embeddings per (encoder, text) on disk, in memory-mapped, immutable part files
    (sorted keys + fixed-width float32 vectors; no pickle). Reading a run's embeddings
    touches only that run's keys and vectors, whatever else is cached. Caches written by
    earlier versions (``shard-*.npz``) are converted on first use, one shard at a time.

    Several processes may use one folder at once (the dashboard and the CLI, parallel
    workers). The rules that keep every run's numbers the same:

    * A key is stored once. The first process to *commit* a key's vector wins: a part is
      renamed into place only under the folder's short commit lock (``.commit.lock``),
      after checking which of its keys another process committed meanwhile; those take the
      committed vector (returned to the caller too) and are left out of the part. Encoders
      are not bit-stable across batches (MiniLM differs by ~1e-7 between a text encoded
      alone and in a batch), so two processes encoding one text would otherwise return,
      and store, two different vectors.
    * Lookups that find every key take no lock (the hot path). A key that looks missing
      is looked up again under the commit lock before it is encoded: a merge may have
      replaced the parts a lock-free lookup listed (removed between the listing and the
      open, or a listing taken while the merged part was renamed in and its inputs
      removed), and merges swap parts only under that lock, so there the set is whole.
    * One merge or compaction at a time (``.lock``); it writes the merged part unlocked
      and takes the commit lock only for the swap (rename it, remove its inputs). On
      POSIX a removed part stays readable through a mapping that is already open.
    """

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else default_cache_dir() / "embeddings"

    def _dir(self, encoder: TextEncoder) -> Path:
        return self.root / encoder.cache_id()

    # -- parts ---------------------------------------------------------------------------
    def _parts(self, d: Path, dim: int, skipped: list | None = None) -> list[_Part]:
        """The readable parts, in name order. Without the commit lock a listed part may be
        gone by the time it is opened (merged away): it is left out and, when ``skipped``
        is given, its path is appended there."""
        parts = []
        for f in _list_parts(d):
            try:
                parts.append(_Part(f, dim))
            except ValueError:
                continue  # torn or foreign: its texts are recomputed
            except OSError:
                if skipped is not None:
                    skipped.append(f)
        return parts

    def _commit_lock(self, d: Path):
        return _flock(d, ".commit.lock", wait=True)

    def _locked(self, d: Path, wait: bool = False):
        """The merge lock: one merge or compaction per folder at a time."""
        return _flock(d, ".lock", wait=wait)

    def _migrate(self, d: Path, dim: int) -> None:
        """Convert the previous format's NPZ shards into parts (each read once, then
        removed). Under the commit lock: two processes converting one shard would store
        its keys twice; keys already stored keep their vectors (an earlier shard's win)."""
        for shard in sorted(d.glob(_LEGACY_GLOB)):
            try:
                with np.load(shard, allow_pickle=False) as z:
                    k, v = z["keys"], z["vectors"]
            except (OSError, ValueError, KeyError, EOFError):
                continue  # a torn or foreign file is ignored, as before
            if v.ndim == 2 and v.shape[0] == k.shape[0] and v.shape[1] == dim:
                k = np.asarray(k, dtype="S20")
                k, first = np.unique(k, return_index=True)
                new = self._lookup(self._parts(d, dim), k, None, None)
                if new.any():
                    _write_part(d, k[new], np.asarray(v, np.float32)[first[new]], sort=False)
                shard.unlink(missing_ok=True)  # (one of another width is left alone, as before)

    def _merge(self, d: Path, parts: list[_Part], dim: int) -> Path | None:
        """One part holding every key of ``parts`` once; then the old parts are removed.
        Memory: the keys (28 bytes per vector), never the vectors. The caller holds the
        merge lock (so no other process removes ``parts`` meanwhile)."""
        if len(parts) < 2:
            return None
        keys = np.concatenate([np.asarray(p.keys) for p in parts]) if parts else np.zeros(0, "S20")
        keys, first = np.unique(keys, return_index=True)  # sorted; first occurrence wins
        view = _Concat(parts, dim)
        tmp, out = _write_tmp(d, keys, _RowsOf(view, first), sort=False)
        try:
            # the swap under the commit lock: a lookup that missed a key because it listed
            # the old parts and found them gone looks again under this lock (see the class)
            with self._commit_lock(d):
                os.replace(tmp, out)
                for p in parts:
                    p.path.unlink(missing_ok=True)
        finally:
            tmp.unlink(missing_ok=True)
        return out

    def _commit(self, d: Path, dim: int, keys: np.ndarray, vecs: np.ndarray,
                out: np.ndarray, rows: np.ndarray, meta: str) -> None:
        """Store freshly encoded ``vecs`` for the sorted unique ``keys`` (``out[rows]`` holds
        them): written unlocked, renamed in under the commit lock unless another process
        committed some of the keys since this one looked; for those, its vectors are kept
        and copied into ``out[rows]`` (first commit wins, so every run gets the same bits)."""
        tmp, final = _write_tmp(d, keys, vecs, sort=False)  # the slow part, unlocked
        try:
            with self._commit_lock(d):
                if not (d / "encoder.json").exists():  # (removed by a concurrent clear())
                    _write_meta(d, meta)
                found = np.zeros(len(keys), bool)
                for part in self._parts(d, dim):  # complete: nothing appears or goes meanwhile
                    idx = np.flatnonzero(~found)
                    if len(idx) == 0:
                        break
                    hit, prow = part.find(keys[idx])
                    if hit.any():
                        out[rows[idx[hit]]] = part.vectors[prow]
                        found[idx[hit]] = True
                    part.release()
                if not found.any():
                    try:
                        os.replace(tmp, final)
                    except FileNotFoundError:  # a concurrent clear() removed it: write anew
                        _write_part(d, keys, vecs, sort=False)
                elif not found.all():  # rare: part of the block was committed by another process
                    _write_part(d, keys[~found], vecs[~found], sort=False)
        finally:
            tmp.unlink(missing_ok=True)

    # -- lookups -------------------------------------------------------------------------
    def embed(self, texts: Sequence[str], encoder: TextEncoder,
              progress: ProgressFn | None = None) -> np.ndarray:
        """Embeddings of ``texts`` in order; only texts not cached yet are encoded."""
        texts = texts if isinstance(texts, (list, tuple)) else list(texts)
        n, dim = len(texts), int(encoder.dim)
        keys = text_keys(texts)
        uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        del keys
        out = np.empty((n, dim), dtype=np.float32)
        d = self._dir(encoder)
        missing = np.flatnonzero(self._find(d, dim, uniq, first, out))
        if len(missing):
            d.mkdir(parents=True, exist_ok=True)
            meta = json.dumps({"spec": encoder.spec, "dim": dim})
            _write_meta(d, meta)
            total, done = len(missing), 0
            for a in range(0, total, ENCODE_BLOCK):
                block = missing[a:a + ENCODE_BLOCK]
                rows = first[block]

                def sub(k: int, _m: int, _done=done) -> None:
                    if progress:
                        progress(_done + k, total)
                vecs = encoder.encode([texts[i] for i in rows], progress=sub)
                out[rows] = vecs
                self._commit(d, dim, uniq[block], vecs, out, rows, meta)  # uniq is sorted already
                done += len(block)
            self._merge_small(d, dim)
        elif progress:
            progress(n, n)
        dup = np.flatnonzero(first[inverse] != np.arange(n))
        for a in range(0, len(dup), _GATHER):
            rows = dup[a:a + _GATHER]
            out[rows] = out[first[inverse[rows]]]
        return out

    @staticmethod
    def _lookup(parts: list[_Part], uniq: np.ndarray, first: np.ndarray | None,
                out: np.ndarray | None) -> np.ndarray:
        """Look the sorted unique keys up in ``parts`` (the first part holding a key wins);
        fill ``out[first[k]]`` for those found (when ``out`` is given). Returns the mask of
        keys not found."""
        todo = np.ones(len(uniq), bool)
        for part in parts:
            idx = np.flatnonzero(todo)
            if len(idx) == 0:
                break
            hit, rows = part.find(uniq[idx])
            if out is not None:
                dst = first[idx[hit]]
                for a in range(0, len(rows), _GATHER):  # bounded temporaries
                    out[dst[a:a + _GATHER]] = part.vectors[rows[a:a + _GATHER]]
                    part.release()
            part.release()
            todo[idx[hit]] = False
        return todo

    def _find(self, d: Path, dim: int, uniq: np.ndarray, first: np.ndarray,
              out: np.ndarray | None) -> np.ndarray:
        """Look the sorted unique keys up in every part; fill ``out[first[k]]`` for those
        found (when ``out`` is given). Returns the mask of keys not cached.

        Lock-free when every key is found and no listed part went away meanwhile;
        otherwise the lookup is done again under the commit lock (see the class), where
        no part appears or goes: a key is then reported missing only when it is."""
        gone: list[Path] = []
        todo = self._lookup(self._parts(d, dim, gone), uniq, first, out)
        if not (todo.any() or gone) or not d.is_dir():
            return todo
        with self._commit_lock(d):
            self._migrate(d, dim)
            parts = self._parts(d, dim)
            if gone:  # a part we listed was merged away: the first holder may differ now
                return self._lookup(parts, uniq, first, out)
            idx = np.flatnonzero(todo)
            todo[idx] = self._lookup(parts, uniq[idx], first[idx], out)
        return todo

    def missing(self, texts: Sequence[str], encoder: TextEncoder) -> np.ndarray:
        """Indices of the texts (first occurrence of each) that are not cached yet."""
        uniq, first = np.unique(text_keys(texts), return_index=True)
        return np.sort(first[self._find(self._dir(encoder), int(encoder.dim), uniq, first, None)])

    def _merge_small(self, d: Path, dim: int) -> None:
        small = [p for p in self._parts(d, dim) if p.n < ENCODE_BLOCK]
        if len(small) > MERGE_SMALL_PARTS:
            with self._locked(d) as got:  # busy: the process holding it merges anyway
                if got:
                    self._merge(d, [p for p in self._parts(d, dim) if p.n < ENCODE_BLOCK], dim)

    # -- maintenance ---------------------------------------------------------------------
    def _encoder_dirs(self, encoder: str | None = None) -> list[Path]:
        if not self.root.is_dir():
            return []
        dirs = [p for p in sorted(self.root.iterdir()) if p.is_dir() and not p.is_symlink()
                and ((p / "encoder.json").exists() or any(p.glob(_PART_GLOB)) or any(p.glob(_LEGACY_GLOB)))]
        if encoder is None:
            return dirs
        return [p for p in dirs if p.name == encoder or _dir_spec(p)[0] == encoder]

    def info(self) -> list[dict]:
        """Per encoder: spec, width, vectors, parts, bytes on disk, legacy shards left."""
        out = []
        for d in self._encoder_dirs():
            spec, dim = _dir_spec(d)
            files = list(d.glob(_PART_GLOB))
            vectors = 0
            for f in files:
                try:
                    with open(f, "rb") as fh:
                        head = fh.read(_HEADER)
                    if head[:8] == _MAGIC:
                        vectors += struct.unpack("<Q", head[8:16])[0]
                except OSError:
                    pass
            out.append({"encoder": spec, "cache_id": d.name, "dim": dim, "vectors": int(vectors),
                        "parts": len(files), "legacy_shards": len(list(d.glob(_LEGACY_GLOB))),
                        "bytes": sum(_size(f) for f in d.iterdir())})
        return out

    def compact(self, encoder: str | None = None) -> list[dict]:
        """Merge each encoder's parts into one (duplicates dropped, torn files removed).
        Waits for a merge or compaction that another process is doing in that folder."""
        done = []
        for d in self._encoder_dirs(encoder):
            spec, dim = _dir_spec(d)
            if dim is None:
                continue
            with self._locked(d, wait=True) as got:
                if got is None:
                    raise RuntimeError(f"{d}: the file system refuses locks; not compacting")
                with self._commit_lock(d):
                    self._migrate(d, dim)
                parts = self._parts(d, dim)  # complete: parts go only under the merge lock
                before = len(_list_parts(d))
                self._merge(d, parts, dim)
                for f in _list_parts(d):  # what could not be read is garbage
                    try:
                        _Part(f, dim)
                    except ValueError:
                        f.unlink(missing_ok=True)
                    except OSError:
                        pass
                for f in d.glob(".tmp-*"):
                    try:
                        if time.time() - f.stat().st_mtime > 3600:
                            f.unlink(missing_ok=True)
                    except FileNotFoundError:
                        pass  # a writer just renamed it into place
            done.append({"encoder": spec, "parts_before": before, "parts_after": len(_list_parts(d))})
        return done

    def clear(self, encoder: str | None = None) -> int:
        """Remove the cached embeddings (of one encoder, by spec or cache id, or all).
        Only this cache's own files are removed. Returns the bytes freed. A process
        writing meanwhile keeps its results; what it commits afterwards stays cached."""
        freed = 0
        for d in self._encoder_dirs(encoder):
            with self._locked(d, wait=True), self._commit_lock(d):
                for pattern in (_PART_GLOB, _LEGACY_GLOB, ".tmp-*", "encoder.json", ".lock", ".commit.lock"):
                    for f in d.glob(pattern):
                        if f.is_file() and not f.is_symlink():
                            freed += _size(f)
                            f.unlink(missing_ok=True)
            try:
                d.rmdir()
            except OSError:
                pass  # something else lives there: left alone
        return freed


def _size(f: Path) -> int:
    """A file's size; 0 for one that is not a file or is already gone (another process)."""
    try:
        st = f.stat()
    except OSError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def _write_meta(d: Path, meta: str) -> None:
    """``encoder.json``, replaced atomically and only when it differs: rewriting it in place
    let a concurrent ``compact()`` or ``info()`` read it empty and skip the folder."""
    path = d / "encoder.json"
    try:
        if path.read_text() == meta:
            return
    except OSError:
        pass
    tmp = d / f".tmp-meta-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        tmp.write_text(meta)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class _RowsOf:
    """``base`` rows through an index: _RowsOf(a, idx)[r] == a[idx[r]]."""

    def __init__(self, base, idx: np.ndarray):
        self.base, self.idx = base, idx
        self.shape = (len(idx), base.shape[1])

    def __getitem__(self, rows):
        return self.base[self.idx[rows]]


def _dir_spec(d: Path) -> tuple[str, int | None]:
    try:
        meta = json.loads((d / "encoder.json").read_text())
        return str(meta["spec"]), int(meta["dim"])
    except (OSError, ValueError, KeyError, TypeError):
        return d.name, None


def _embed_chunk(texts: list[str], spec: str, root: str) -> int:
    """Worker side of :func:`embed_parallel`: encode into the shared cache."""
    EmbeddingCache(root).embed(texts, get_encoder(spec))
    return len(texts)


def embed_parallel(texts: Sequence[str], encoder: str, cache_dir: str | Path | None = None, *,
                   backend: str = "local", n_jobs: int = 2, chunk: int = 100_000,
                   ray_address: str | None = None, progress: ProgressFn | None = None) -> int:
    """Fill the cache for ``texts`` with parallel workers; returns how many texts were
    encoded. The driver reads only the keys to find what is missing; each worker encodes
    a chunk and writes its own part files (any number of writers; each takes the
    folder's commit lock only to rename a finished part in, see :class:`EmbeddingCache`). With ``backend="ray"`` the workers are Ray tasks (``ray_address`` joins a
    cluster), and the cache folder must be on storage every node sees (e.g. NFS); the
    grid then reads the embeddings from there (``slarouter compare --cache-dir``)."""
    if backend not in ("local", "ray"):
        raise ValueError(f"unknown backend {backend!r}: use 'local' or 'ray'")
    if not (isinstance(chunk, int) and chunk > 0) or not (isinstance(n_jobs, int) and n_jobs > 0):
        raise ValueError("chunk and n_jobs must be positive integers")
    texts = texts if isinstance(texts, (list, tuple)) else list(texts)
    cache = EmbeddingCache(cache_dir)
    todo = cache.missing(texts, LazyEncoder(encoder))  # keys only: no weights loaded here
    root = str(cache.root)
    chunks = [[texts[i] for i in todo[a:a + chunk]] for a in range(0, len(todo), chunk)]
    done = 0
    if progress:
        progress(0, len(todo))
    if backend == "local":
        from joblib import Parallel, delayed

        for k in Parallel(n_jobs=n_jobs, return_as="generator")(delayed(_embed_chunk)(c, encoder, root)
                                                                for c in chunks):
            done += k
            if progress:
                progress(done, len(todo))
        return done
    from .ray_backend import start_ray

    ray, started = start_ray(ray_address, n_jobs)
    try:
        remote = ray.remote(num_cpus=1)(_embed_chunk)
        pending = [remote.remote(c, encoder, root) for c in chunks]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            done += ray.get(ready[0])
            if progress:
                progress(done, len(todo))
    finally:
        if started:
            ray.shutdown()
    return done


def embed_texts(texts: Sequence[str], encoder: str | TextEncoder = DEFAULT_ENCODER,
                cache: EmbeddingCache | str | Path | None = None,
                progress: ProgressFn | None = None) -> np.ndarray:
    """One-call helper: resolve the encoder and cache, return (N, D) float32 embeddings (a
    spec's weights load only if a text is not cached yet)."""
    enc = LazyEncoder(encoder) if isinstance(encoder, str) else encoder
    store = cache if isinstance(cache, EmbeddingCache) else EmbeddingCache(cache)
    return store.embed(texts, enc, progress=progress)
