"""rageval: evaluate the retrieval stage of RAG systems.

Versioned benchmarks, retrieval configured as experiment variables, metrics equal to trec_eval's,
parameterized notebooks and sealed, immutable MLflow runs.

The public API is loaded lazily: ``import rageval`` imports none of numpy, pandas, mlflow or the
retrieval libraries; each name is imported from its package on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rageval.lazy import exports

__version__ = "0.1.0"  # keep equal to pyproject.toml

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    # benchmark
    "Benchmark": "rageval.benchmark.loading",
    "load_benchmark": "rageval.benchmark.loading",
    "validate_benchmark": "rageval.benchmark.loading",
    "BenchmarkSpec": "rageval.benchmark.schema",
    "Case": "rageval.benchmark.schema",
    "ChunkingConfig": "rageval.benchmark.schema",
    "Document": "rageval.benchmark.schema",
    "Judgment": "rageval.benchmark.schema",
    "Chunk": "rageval.benchmark.chunking",
    "chunk_corpus": "rageval.benchmark.chunking",
    "chunk_document": "rageval.benchmark.chunking",
    "chunk_qrels": "rageval.benchmark.chunking",
    "config_hash": "rageval.benchmark.chunking",
    # configuration
    "RunConfig": "rageval.config.schema",
    "config_from_yaml": "rageval.config.load",
    "load_config": "rageval.config.load",
    # evaluation
    "CONTRACT": "rageval.evaluation",
    "CONTRACT_DIGEST": "rageval.evaluation",
    "Abstention": "rageval.evaluation",
    "ContractOptions": "rageval.evaluation",
    "Evaluation": "rageval.evaluation",
    "Measure": "rageval.evaluation",
    "abstention": "rageval.evaluation",
    "as_measures": "rageval.evaluation",
    "as_qrels": "rageval.evaluation",
    "as_run_frame": "rageval.evaluation",
    "evaluate": "rageval.evaluation",
    "measure_from_key": "rageval.evaluation",
    "metric_key": "rageval.evaluation",
    "parse_measure": "rageval.evaluation",
    "rollup_to_parent": "rageval.evaluation",
    "top_scores": "rageval.evaluation",
    # passages graded on judged spans
    "Evidence": "rageval.evaluation",
    "evidence_spans": "rageval.evaluation",
    # one configuration in process
    "ExperimentResult": "rageval.experiment.run",
    "run_experiment": "rageval.experiment.run",
    # comparison and the gate
    "Comparison": "rageval.analysis",
    "compare": "rageval.analysis",
    "Statistics": "rageval.analysis",
    "Decision": "rageval.analysis",
    "decide": "rageval.analysis",
    "load_policy": "rageval.analysis",
    # recording
    "Tracker": "rageval.tracking.store",
    "load_inputs": "rageval.workflows.readback",
    # errors
    **{
        name: "rageval.errors"
        for name in (
            "BenchmarkError",
            "ComparisonError",
            "ConfigError",
            "EvaluationError",
            "InputError",
            "MeasureError",
            "NotebookExecutionError",
            "ParameterError",
            "PolicyError",
            "Problem",
            "RagevalError",
            "ReproductionError",
            "RunSealedError",
            "SweepError",
            "TrackingError",
            "VerificationError",
        )
    },
}

__all__ = sorted([*_EXPORTS, "__version__"])


__getattr__, __dir__ = exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time the names load on first use
    from rageval.analysis import Comparison, Decision, Statistics, compare, decide, load_policy
    from rageval.benchmark.chunking import Chunk, chunk_corpus, chunk_document, chunk_qrels, config_hash
    from rageval.benchmark.loading import Benchmark, load_benchmark, validate_benchmark
    from rageval.benchmark.schema import BenchmarkSpec, Case, ChunkingConfig, Document, Judgment
    from rageval.config.load import config_from_yaml, load_config
    from rageval.config.schema import RunConfig
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
    from rageval.evaluation import (
        CONTRACT,
        CONTRACT_DIGEST,
        Abstention,
        ContractOptions,
        Evaluation,
        Evidence,
        Measure,
        abstention,
        as_measures,
        as_qrels,
        as_run_frame,
        evaluate,
        evidence_spans,
        measure_from_key,
        metric_key,
        parse_measure,
        rollup_to_parent,
        top_scores,
    )
    from rageval.experiment.run import ExperimentResult, run_experiment
    from rageval.tracking.store import Tracker
    from rageval.workflows.readback import load_inputs
