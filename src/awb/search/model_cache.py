"""The embedding model as ONNX Runtime optimised it, saved once so that later processes load it ready to run.

The int8 model dequantises its weights in every run unless its constants are folded when the session is
built: folding costs ~0.2 s, and a session without it spends ~0.06 s of every run dequantising again.
A process that folds (the server, a workbench) writes the optimised graph out once, its float weights in
a file beside it (`optimized_model_filepath`); a later process maps that file and builds its session with
the optimisers off: a server in ~0.05 s, with its runs and its vectors (bit for bit) as when it folds; a
process that embeds a query and exits (the CLI's search) in ~0.01 s, its weights used where they are
mapped rather than repacked (`awb.search.embeddings.UNPACKED`).

An entry lives in `$XDG_CACHE_HOME/awb/models/` (or `~/.cache/awb/models/`, beside the tool vector cache),
named by everything that makes the file what it is: the model file (path, size, time), ONNX Runtime's
version, the machine and this format. It is written in a directory of its own and renamed into place
whole (synced first), and it holds what the model answered to a fixed probe when it was written: an
entry whose probe comes out otherwise (damaged weights: the probe runs through every layer, though not
through every row of the word-embedding table) or that cannot be loaded is removed, and the model is
built from its own file as without a cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from awb.search.cache_home import cache_home
from awb.search.numpy_once import ensure_numpy

log = logging.getLogger("awb.search")

#: Bumped when what an entry holds changes: older entries are then never read.
FORMAT = 1
GRAPH = "model.onnx"
WEIGHTS = "weights.bin"
PROBE = "probe.f32"
KEY = "key.txt"
#: Entries kept (several installs of awb on one machine each have their own); the least recently used go.
KEPT_ENTRIES = 3
#: A directory an interrupted write left behind is removed after this long.
STALE_WRITE_S = 3600
#: Word pieces of a fixed text ("[CLS] hello world [SEP]") whose outputs an entry records.
PROBE_IDS = (101, 7592, 2088, 102)
#: How far a loaded entry's probe may stray from the recorded one (thread counts change float rounding
#: at most; a damaged weight moves it by far more).
PROBE_TOLERANCE = 1e-4


def models_dir() -> Path | None:
    """Where entries are kept: `models/` beside the tool vector cache; None without a home directory."""
    try:
        return cache_home() / "models"
    except RuntimeError:  # Path.home() without HOME or a passwd entry
        return None


def cached_model(model: Path, *, runtime_version: str, model_id: str) -> CachedModel | None:
    """The entry for `model` in `models_dir()`, or None when there is nowhere to keep one."""
    root = models_dir()
    if root is None:
        return None
    try:
        return CachedModel(root, model, runtime_version=runtime_version, model_id=model_id)
    except OSError:
        return None


class CachedModel:
    """The entry for one model file under one ONNX Runtime; nothing is read or written until asked."""

    def __init__(self, root: Path, model: Path, *, runtime_version: str, model_id: str) -> None:
        self.root, self.model = root, model
        stat = model.stat()
        self.key = "\n".join(
            [
                f"format {FORMAT}",
                f"model {model_id} {model.resolve()} {stat.st_size} {stat.st_mtime_ns}",
                f"onnxruntime {runtime_version}",
                f"machine {platform.machine()}",
            ]
        )
        self.path = root / f"{model_id}-{hashlib.sha256(self.key.encode()).hexdigest()[:20]}"

    def present(self) -> bool:
        """Whether an entry is there (not whether it is sound: loading checks that)."""
        try:
            return (self.path / KEY).is_file()
        except OSError:
            return False

    def load(self, ort: Any, options: Any) -> Any | None:
        """A session on the entry, checked against its probe, or None (no entry, or one not to use)."""
        entry = self.path
        try:
            if (entry / KEY).read_text(encoding="utf-8") != self.key:
                return None
            expected = (entry / PROBE).read_bytes()
        except OSError:
            return None  # no entry (the common miss), or one being replaced
        # Everything was done when the entry was written: the graph is loaded as it is.
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            session = ort.InferenceSession(str(entry / GRAPH), sess_options=options, providers=["CPUExecutionProvider"])
            sound = _close(probe(session), expected)
        except Exception as exc:  # ONNX Runtime raises its own types for a file it cannot read
            self._discard(f"cannot be loaded ({exc})")
            return None
        if not sound:
            self._discard("answers otherwise than when it was saved")
            return None
        with contextlib.suppress(OSError):
            os.utime(entry)  # used: the last to be pruned
        return session

    def _discard(self, problem: str) -> None:
        """Remove a damaged entry (a process that folds the model writes it again) and say so."""
        log.warning("the optimised embedding model in %s %s: removed, loading the model itself", self.path, problem)
        # Written whole by a rename, an entry that fails is damaged, not half-written; a process still
        # mapping its weights keeps them until it exits.
        shutil.rmtree(self.path, ignore_errors=True)

    def build_and_save(self, ort: Any, options: Any) -> Any:
        """A session on the model itself with every optimisation, its graph saved as a new entry on the
        way (best effort: a cache that cannot be written still gives the session)."""
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        staging = self._staging()
        if staging is not None:
            options.optimized_model_filepath = str(staging / GRAPH)
            options.add_session_config_entry("session.optimized_model_external_initializers_file_name", WEIGHTS)
            options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        try:
            session = ort.InferenceSession(str(self.model), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception:
            if staging is None:
                raise
            # Writing the graph out failed (no room, most likely): build the session without it.
            shutil.rmtree(staging, ignore_errors=True)
            options.optimized_model_filepath = ""
            session = ort.InferenceSession(str(self.model), sess_options=options, providers=["CPUExecutionProvider"])
            return session
        if staging is not None:
            self._publish(staging, probe(session))
        return session

    def _staging(self) -> Path | None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            return Path(tempfile.mkdtemp(prefix=".writing-", dir=self.root))
        except OSError as exc:
            log.info("the optimised embedding model is not cached: %s", exc)
            return None

    def _publish(self, staging: Path, answer: bytes) -> None:
        try:
            (staging / PROBE).write_bytes(answer)
            (staging / KEY).write_text(self.key, encoding="utf-8")
            # On disk before the name is: a machine that stops right after the rename finds the files
            # whole (or, as a file system may leave them, short, which ONNX Runtime refuses), never holes.
            for name in (GRAPH, WEIGHTS, PROBE, KEY):
                _sync(staging / name)
            # Whole or not at all: another process that wrote the same entry first keeps its own.
            staging.rename(self.path)
            _sync(self.root)
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            if not self.present():
                log.info("the optimised embedding model is not cached: %s", exc)
            return
        self._prune()

    def _prune(self) -> None:
        """Drop the least recently used entries past `KEPT_ENTRIES`, and writes abandoned long ago."""
        try:
            children = list(self.root.iterdir())
            now = time.time()
            for child in children:
                if child.name.startswith(".writing-") and now - child.stat().st_mtime > STALE_WRITE_S:
                    shutil.rmtree(child, ignore_errors=True)
            entries = sorted(
                (c for c in children if not c.name.startswith(".") and c.is_dir()),
                key=lambda c: c.stat().st_mtime,
                reverse=True,
            )
        except OSError:
            return
        for old in entries[KEPT_ENTRIES:]:
            shutil.rmtree(old, ignore_errors=True)


def _sync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def probe(session: Any) -> bytes:
    """The model's output for `PROBE_IDS`, as float32 bytes."""
    ensure_numpy()
    import numpy as np

    ids = np.array([PROBE_IDS], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    if any(i.name == "token_type_ids" for i in session.get_inputs()):
        feeds["token_type_ids"] = np.zeros_like(ids)
    return bytes(np.ascontiguousarray(session.run(None, feeds)[0], dtype=np.float32).tobytes())


def _close(answer: bytes, expected: bytes) -> bool:
    ensure_numpy()
    import numpy as np

    if len(answer) != len(expected):
        return False
    got, want = np.frombuffer(answer, dtype=np.float32), np.frombuffer(expected, dtype=np.float32)
    return bool(np.all(np.abs(got - want) <= PROBE_TOLERANCE))


__all__ = ["CachedModel", "cached_model", "models_dir", "probe"]
