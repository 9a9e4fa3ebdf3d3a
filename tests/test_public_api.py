"""The public API is what rageval/__init__.py exports; this pins it so changes are deliberate."""

import rageval

EXPECTED = {
    "Benchmark", "BenchmarkError", "BenchmarkSpec", "Case", "Chunk", "ChunkingConfig", "ConfigError", "Document",
    "Evaluation", "EvaluationError", "ExperimentResult", "InputError", "Judgment", "Measure", "MeasureError",
    "NotebookExecutionError", "ParameterError", "Problem", "RagevalError", "RunConfig", "RunSealedError",
    "TrackingError", "VerificationError", "__version__", "chunk_corpus", "chunk_document", "chunk_qrels",
    "config_from_yaml", "config_hash", "evaluate", "load_benchmark", "load_config", "measure_from_key", "metric_key",
    "parse_measure", "run_experiment", "validate_benchmark",
    # the metric contract, the unanswerable contract and the chunk → parent roll-up
    "CONTRACT", "CONTRACT_DIGEST", "Abstention", "abstention", "rollup_to_parent", "top_scores",
    # comparisons, gates, sweeps and reproduction
    "ComparisonError", "PolicyError", "ReproductionError", "SweepError",
}


def test_public_api_is_pinned():
    assert set(rageval.__all__) == EXPECTED
    assert all(hasattr(rageval, name) for name in rageval.__all__)


def test_every_error_is_a_rageval_error():
    for name in rageval.__all__:
        value = getattr(rageval, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, rageval.RagevalError)


def test_only_tracking_imports_mlflow():
    from pathlib import Path

    package = Path(rageval.__file__).parent
    importers = sorted(
        p.name for p in package.rglob("*.py") if any(s in p.read_text() for s in ("import mlflow", "from mlflow"))
    )
    assert set(importers) <= {"tracking.py"}
