"""rageval: evaluate the retrieval stage of RAG systems.

Versioned benchmarks, retrieval configured as experiment variables, metrics equal to trec_eval's,
parameterized notebooks and sealed, immutable MLflow runs.
"""

__version__ = "0.1.0"  # keep equal to pyproject.toml

from rageval.benchmark import Benchmark, load_benchmark, validate_benchmark
from rageval.chunking import Chunk, chunk_corpus, chunk_document, chunk_qrels, config_hash
from rageval.config import config_from_yaml, load_config
from rageval.errors import (
    BenchmarkError,
    ConfigError,
    EvaluationError,
    InputError,
    MeasureError,
    NotebookExecutionError,
    ParameterError,
    Problem,
    RagevalError,
    RunSealedError,
    TrackingError,
    VerificationError,
)
from rageval.experiment import ExperimentResult, run_experiment
from rageval.metrics import Evaluation, Measure, evaluate, measure_from_key, metric_key, parse_measure
from rageval.schema import BenchmarkSpec, Case, ChunkingConfig, Document, Judgment, RunConfig

__all__ = [
    "Benchmark",
    "BenchmarkError",
    "BenchmarkSpec",
    "Case",
    "Chunk",
    "ChunkingConfig",
    "ConfigError",
    "Document",
    "Evaluation",
    "EvaluationError",
    "ExperimentResult",
    "InputError",
    "Judgment",
    "Measure",
    "MeasureError",
    "NotebookExecutionError",
    "ParameterError",
    "Problem",
    "RagevalError",
    "RunConfig",
    "RunSealedError",
    "TrackingError",
    "VerificationError",
    "__version__",
    "chunk_corpus",
    "chunk_document",
    "chunk_qrels",
    "config_from_yaml",
    "config_hash",
    "evaluate",
    "load_benchmark",
    "load_config",
    "measure_from_key",
    "metric_key",
    "parse_measure",
    "run_experiment",
    "validate_benchmark",
]
