"""rageval: evaluate the retrieval stage of RAG systems.

Versioned benchmarks, retrieval configured as experiment variables, metrics equal to trec_eval's,
parameterized notebooks and sealed, immutable MLflow runs.
"""

__version__ = "0.1.0"  # keep equal to pyproject.toml

from rageval.benchmark import Benchmark, load_benchmark, validate_benchmark
from rageval.chunking import Chunk, chunk_corpus, chunk_document, chunk_qrels, config_hash
from rageval.config import config_from_yaml, load_config
from rageval.contract import CONTRACT, CONTRACT_DIGEST
from rageval.errors import (
    BenchmarkError,
    ComparisonError,
    ConfigError,
    EvaluationError,
    InputError,
    MeasureError,
    NotebookExecutionError,
    ParameterError,
    PolicyError,
    Problem,
    RagevalError,
    ReproductionError,
    RunSealedError,
    SweepError,
    TrackingError,
    VerificationError,
)
from rageval.experiment import ExperimentResult, run_experiment
from rageval.metrics import (
    Abstention,
    Evaluation,
    Measure,
    abstention,
    evaluate,
    measure_from_key,
    metric_key,
    parse_measure,
    rollup_to_parent,
    top_scores,
)
from rageval.schema import BenchmarkSpec, Case, ChunkingConfig, Document, Judgment, RunConfig

__all__ = [
    "Abstention",
    "Benchmark",
    "BenchmarkError",
    "BenchmarkSpec",
    "CONTRACT",
    "CONTRACT_DIGEST",
    "Case",
    "Chunk",
    "ChunkingConfig",
    "ComparisonError",
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
    "PolicyError",
    "Problem",
    "RagevalError",
    "ReproductionError",
    "RunConfig",
    "RunSealedError",
    "SweepError",
    "TrackingError",
    "VerificationError",
    "__version__",
    "abstention",
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
    "rollup_to_parent",
    "run_experiment",
    "top_scores",
    "validate_benchmark",
]
