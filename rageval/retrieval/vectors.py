"""Document vectors a team computed elsewhere, and approximate (faiss) indexes over a corpus's vectors.

**Import.** A dense stage with ``vectors:`` reads one vector per chunk instead of encoding the
corpus: a ``.parquet`` file with a ``vector`` column (a list of floats) beside its key columns, or a
``.npy`` matrix whose rows are keyed by a ``.parquet``/``.csv`` file (``keys``). A key is a chunk
ID (column ``chunk_id``) or a passage (``document_id``, ``start``, ``end``: character offsets, as the
chunking made them). The file must match the run's chunking exactly: every chunk one vector, every
vector a chunk, each once, the model's dimension, and the model the stage encodes queries with
(``vectors.model``, and a parquet file's ``model`` metadata where it has one). Anything else is
refused with an error naming the file and the fix; nothing is padded, dropped or guessed. Keys are
matched column-wise (pyarrow), never a Python object per row. Rows are normalized (cosine, as the
stage's own embeddings are); a zero or non-finite row is refused.

**Approximate search.** ``search: ivf`` (faiss IVF-Flat) or ``hnsw`` (faiss HNSW), inner product.
At build, ``recall_sample`` chunk vectors (a seeded sample) are searched through the index and
exactly (``faiss.knn``, same vectors); the mean share of the exact top ``k`` the index returns is
its recall@k, recorded with the run (the stage's model record) beside the index's settings.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rageval.errors import CONFIG, ConfigError, Problem
from rageval.hashing import sha256_file
from rageval.retrieval.base import Corpus, Hit
from rageval.retrieval.schema import AnnConfig, VectorsConfig

VECTOR_COLUMN = "vector"
CHUNK_KEY = ("chunk_id",)
PASSAGE_KEY = ("document_id", "start", "end")
KEY_FORMS = {"chunk": CHUNK_KEY, "passage": PASSAGE_KEY}  # how a row may be keyed, by name
_SHOWN = 5  # keys named in an error (the rest counted)
_EXPORT_FIX = "export one vector per chunk of this run's chunking (chunk IDs, or document_id/start/end)"


@dataclass(frozen=True)
class ImportedVectors:
    matrix: np.ndarray  # float32, normalized, one row per chunk in corpus order
    identity: dict[str, str]  # what the run records: file, sha256, model, dimension, keyed by


def _refuse(path: Path | str, message: str, fix: str, field: str = "vectors") -> ConfigError:
    return ConfigError(Problem(file=CONFIG, field=field, message=f"{path}: {message}", fix=fix))


def import_vectors(config: VectorsConfig, corpus: Corpus, *, model: str, dimension: int) -> ImportedVectors:
    """The vectors of ``config`` in ``corpus`` order, checked against the chunking, the stage's
    ``model`` and its embedding ``dimension`` (see the module docstring)."""
    path = Path(config.path)
    if config.model != model:
        raise _refuse(
            path,
            f"the vectors were made with '{config.model}' but the stage encodes queries with '{model}'",
            "set the stage's model to the one that made the vectors (or re-export them with the stage's model)",
            "vectors.model",
        )
    keys, rows, declared = _read(config, path)
    if declared is not None and declared != config.model:
        raise _refuse(path, f"the file says its model is '{declared}', not '{config.model}'", "fix vectors.model")
    if rows.shape[1] != dimension:
        raise _refuse(
            path,
            f"vectors have dimension {rows.shape[1]}; '{model}' embeds queries in {dimension}",
            "import vectors made by the stage's model",
        )
    form, positions = _positions(keys, corpus, path)
    matrix = np.empty((len(corpus.chunks), dimension), dtype=np.float32)
    matrix[positions] = rows
    norms = np.linalg.norm(matrix, axis=1)
    bad = np.flatnonzero(~np.isfinite(norms) | (norms == 0))
    if bad.size:
        named = ", ".join(corpus.ids[i] for i in bad[:_SHOWN].tolist())
        raise _refuse(path, f"{bad.size} vectors are zero or not finite (chunks {named})", _EXPORT_FIX)
    if not np.allclose(norms, 1.0, atol=1e-4):
        matrix /= norms[:, None]
    identity = {
        "vectors": str(path),
        "vectors_sha256": sha256_file(path),
        "vectors_model": config.model,
        "dimension": str(dimension),
        "keyed_by": form,
    }
    if config.keys is not None:
        identity["keys_sha256"] = sha256_file(Path(config.keys))
    return ImportedVectors(matrix, identity)


def _read(config: VectorsConfig, path: Path):
    """The key table, the vector rows (float32, one per key) and the model a parquet file declares."""
    import pyarrow as pa

    if not path.is_file():
        raise _refuse(path, "no such file", "check vectors.path (a .parquet or .npy file)", "vectors.path")
    try:
        if path.suffix == ".npy":
            if config.keys is None:
                raise _refuse(
                    path,
                    "a .npy matrix has no keys",
                    "give vectors.keys: a .parquet or .csv of chunk_id "
                    "(or document_id, start, end), one row per vector row",
                    "vectors.keys",
                )
            rows = np.load(path, mmap_mode="r", allow_pickle=False)
            keys = _table(Path(config.keys))
            if rows.ndim != 2 or rows.dtype.kind not in "fiu":
                raise _refuse(
                    path, f"expected a 2-d numeric matrix, found shape {rows.shape} of {rows.dtype}", _EXPORT_FIX
                )
            if rows.shape[0] != keys.num_rows:
                raise _refuse(path, f"{rows.shape[0]} vectors but {keys.num_rows} keys in {config.keys}", _EXPORT_FIX)
            return keys, rows, None
        if path.suffix != ".parquet":
            raise _refuse(path, "unknown vectors format", "give a .parquet or a .npy file", "vectors.path")
        table = _table(path)
        declared = (table.schema.metadata or {}).get(b"model")
        return table, _column_matrix(table, path), declared.decode() if declared is not None else None
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise _refuse(path, f"unreadable ({exc})", "write it with numpy.save or pyarrow") from None


def _table(path: Path):
    import pyarrow.csv as csv
    import pyarrow.parquet as pq

    if path.suffix == ".csv":
        import pyarrow as pa

        types = {"chunk_id": pa.string(), "document_id": pa.string(), "start": pa.int64(), "end": pa.int64()}
        return csv.read_csv(path, convert_options=csv.ConvertOptions(column_types=types))
    return pq.read_table(path)


def _column_matrix(table, path: Path) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    if VECTOR_COLUMN not in table.column_names:
        raise _refuse(path, f"no '{VECTOR_COLUMN}' column (columns: {', '.join(table.column_names)})", _EXPORT_FIX)
    column = table.column(VECTOR_COLUMN).combine_chunks()
    if not (
        pa.types.is_list(column.type) or pa.types.is_large_list(column.type) or pa.types.is_fixed_size_list(column.type)
    ):
        raise _refuse(path, f"'{VECTOR_COLUMN}' is {column.type}, not a list of floats", _EXPORT_FIX)
    if column.null_count:
        raise _refuse(path, f"{column.null_count} rows have no vector", _EXPORT_FIX)
    lengths = pc.list_value_length(column).to_numpy()
    if len(lengths) and (lengths != lengths[0]).any():
        row = int(np.flatnonzero(lengths != lengths[0])[0])
        raise _refuse(path, f"row {row + 1} has {lengths[row]} values, row 1 has {lengths[0]}", _EXPORT_FIX)
    width = int(lengths[0]) if len(lengths) else 0
    flat = column.flatten().to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype=np.float32).reshape(len(column), width)


def _positions(keys, corpus: Corpus, path: Path) -> tuple[str, np.ndarray]:
    """How the rows are keyed, and each row's position in ``corpus.chunks``; refused unless the
    rows and the chunks match one to one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = set(keys.column_names)
    if set(CHUNK_KEY) <= names:
        form, wanted = "chunk", keys.column("chunk_id").cast(pa.string())
        known = pa.array(corpus.ids, type=pa.string())
    elif set(PASSAGE_KEY) <= names:
        form = "passage"
        columns = [keys.column(c).cast(pa.string()) for c in PASSAGE_KEY]
        wanted = pc.binary_join_element_wise(*columns, "\x1f")
        known = pa.array([f"{c.parent_id}\x1f{c.start}\x1f{c.end}" for c in corpus.chunks], type=pa.string())
    else:
        raise _refuse(
            path,
            f"no key columns (found: {', '.join(sorted(names - {VECTOR_COLUMN}))})",
            "key each vector by chunk_id, or by document_id, start and end",
        )
    if wanted.null_count:
        raise _refuse(path, f"{wanted.null_count} rows have an empty key", _EXPORT_FIX)
    found = pc.index_in(wanted, value_set=known)
    extra = np.flatnonzero(found.is_null().to_numpy(zero_copy_only=False))
    if extra.size:
        named = _named(wanted, extra)
        raise _refuse(
            path,
            f"{extra.size} vectors are keyed by {form}s this corpus's chunking does not have (rows {named})",
            f"the vectors were made for another corpus version or chunking: {_EXPORT_FIX}",
        )
    positions = found.to_numpy(zero_copy_only=False).astype(np.int64)
    counts = np.bincount(positions, minlength=len(corpus.chunks))
    if (counts > 1).any():
        twice = np.flatnonzero(counts[positions] > 1)
        raise _refuse(path, f"{twice.size} rows repeat a key (rows {_named(wanted, twice)})", "one vector per chunk")
    missing = np.flatnonzero(counts == 0)
    if missing.size:
        named = ", ".join(corpus.ids[i] for i in missing[:_SHOWN].tolist())
        more = f" and {missing.size - _SHOWN} more" if missing.size > _SHOWN else ""
        raise _refuse(path, f"{missing.size} chunks have no vector ({named}{more})", _EXPORT_FIX)
    return form, positions


def _named(keys, rows: np.ndarray) -> str:
    shown = [f"{int(r) + 1}: {keys[int(r)].as_py().replace(chr(31), ' ')}" for r in rows[:_SHOWN]]
    return "; ".join(shown) + (f"; and {rows.size - _SHOWN} more" if rows.size > _SHOWN else "")


# --------------------------------------------------------------------------- approximate indexes


@dataclass(frozen=True)
class AnnIndex:
    index: object  # a faiss index over the matrix's rows
    recall: float  # mean recall@k of the sample against exact search on the same vectors
    k: int
    sample: int
    seconds: float  # build, without the recall measurement

    def record(self, kind: str, options: AnnConfig) -> dict[str, str]:
        """The settings and the measured recall, as the run records them."""
        settings = (
            f"ivf nlist={self.index.nlist} nprobe={self.index.nprobe}"  # type: ignore[attr-defined]
            if kind == "ivf"
            else f"hnsw m={options.m} ef_construction={options.ef_construction} ef_search={options.ef_search}"
        )
        return {
            "index": settings,
            f"ann_recall@{self.k}": f"{self.recall:.4f}",
            "ann_recall_sample": str(self.sample),
            "ann_build_s": f"{self.seconds:.2f}",
        }


def faiss_module():
    try:
        import faiss
    except ImportError:
        raise ConfigError(
            Problem(
                file=CONFIG,
                field="search",
                message="faiss search needs faiss-cpu",
                fix="pip install faiss-cpu, or use search: exact",
            )
        ) from None
    return faiss


def build_ann(matrix: np.ndarray, kind: str, options: AnnConfig, k: int) -> AnnIndex:
    """An IVF-Flat or HNSW index over ``matrix`` (inner product) and its measured recall@``k``."""
    faiss = faiss_module()
    started = time.perf_counter()
    rows, dimension = matrix.shape
    data = np.ascontiguousarray(matrix, dtype=np.float32)
    if kind == "ivf":
        nlist = min(options.nlist or max(1, int(round(np.sqrt(rows)))), rows)
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dimension), dimension, nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.seed = options.seed
        rng = np.random.default_rng(options.seed)
        train = data[np.sort(rng.choice(rows, size=min(rows, 40 * nlist), replace=False))]
        index.train(train)
        index.add(data)
        index.nprobe = min(options.nprobe, nlist)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dimension, options.m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = options.ef_construction
        index.add(data)
        index.hnsw.efSearch = options.ef_search
    else:
        raise ValueError(f"unknown approximate index '{kind}'")
    seconds = time.perf_counter() - started
    recall, sample = measure_recall(index, data, k, options.recall_sample, options.seed)
    return AnnIndex(index, recall, k, sample, seconds)


def measure_recall(index, matrix: np.ndarray, k: int, sample: int, seed: int) -> tuple[float, int]:
    """Mean |index top k ∩ exact top k| / k over a seeded sample of ``matrix``'s rows as queries."""
    faiss = faiss_module()
    rows = matrix.shape[0]
    k = min(k, rows)
    if k == 0:
        return 1.0, 0
    chosen = np.sort(np.random.default_rng(seed).choice(rows, size=min(sample, rows), replace=False))
    queries = np.ascontiguousarray(matrix[chosen])
    _, exact = faiss.knn(queries, matrix, k, metric=faiss.METRIC_INNER_PRODUCT)
    _, approximate = index.search(queries, k)
    found = [len(np.intersect1d(a[a >= 0], e)) / k for a, e in zip(approximate, exact, strict=True)]
    return float(np.mean(found)), len(chosen)


def ann_hits(corpus: Corpus, index, vector: np.ndarray, k: int) -> list[Hit]:
    """The index's top ``k`` for one query, ties by chunk ID (never a full-corpus array)."""
    scores, positions = index.search(np.ascontiguousarray(vector[None, :], dtype=np.float32), k)
    valid = positions[0] >= 0
    scores, positions = scores[0][valid], positions[0][valid]
    order = np.lexsort((corpus.id_rank[positions], -scores))
    ids = corpus.ids
    return [Hit(ids[p], s) for p, s in zip(positions[order].tolist(), scores[order].tolist(), strict=True)]
