"""The public API is what rageval/__init__.py exports; this pins it so changes are deliberate."""

import rageval

EXPECTED = {
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
    # the metric contract, the unanswerable contract and the chunk → parent roll-up
    "CONTRACT",
    "CONTRACT_DIGEST",
    "ContractOptions",
    "Abstention",
    "abstention",
    # the field's input shapes (ir-measures, ranx, PyTerrier) for evaluate()
    "as_measures",
    "as_qrels",
    "as_run_frame",
    "rollup_to_parent",
    "top_scores",
    # passages graded on judged spans
    "Evidence",
    "evidence_spans",
    # comparisons, gates, sweeps and reproduction
    "ComparisonError",
    "PolicyError",
    "ReproductionError",
    "SweepError",
    # comparison, the gate and recording
    "Comparison",
    "compare",
    "Statistics",  # compare()'s statistical settings
    "Decision",
    "decide",
    "load_policy",
    "load_inputs",
    "Tracker",
}


def test_public_api_is_pinned():
    assert set(rageval.__all__) == EXPECTED
    assert all(hasattr(rageval, name) for name in rageval.__all__)


def test_every_error_is_a_rageval_error():
    for name in rageval.__all__:
        value = getattr(rageval, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, rageval.RagevalError)


def test_import_rageval_is_light():
    """The public API loads lazily: importing rageval costs none of the heavy libraries."""
    import subprocess
    import sys

    code = "import sys, rageval; print(sorted(m for m in ('numpy', 'pandas', 'mlflow', 'pydantic', 'papermill') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_lazy_exports_are_never_shadowed_by_a_submodule():
    """A package exporting a function named like one of its modules would hand out the module once
    that module is imported; every lazy export must stay the object its module defines."""
    import importlib
    import pkgutil

    for module in pkgutil.walk_packages(rageval.__path__, "rageval."):
        importlib.import_module(module.name)
    for package in ("rageval", "rageval.evaluation", "rageval.analysis", "rageval.retrieval"):
        namespace = importlib.import_module(package)
        for name, source in namespace._EXPORTS.items():
            assert getattr(namespace, name) is getattr(importlib.import_module(source), name), (package, name)
