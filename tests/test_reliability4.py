"""Issue 28, round three (reliability 4): failed queries count. A run whose queries failed past its
failure budget (``failures.max_fraction``, default 0.0) is refused: it ends FAILED with the failures
named, the command exits non-zero, and no result is sealed. Within a raised budget the run is sealed
with a warning, and compare and gate refuse it rather than scoring its failed queries as zeros.
Every service here is real: tests/http_service.py (FastAPI + uvicorn on 127.0.0.1)."""

from __future__ import annotations

import pytest
from conftest import ROOT
from http_service import BM25Service, serve
from typer.testing import CliRunner

from rageval.benchmark.loading import load_benchmark
from rageval.cli.app import app
from rageval.config.load import dump_config, load_config
from rageval.errors import ComparisonError, ConfigError, EvaluationError
from rageval.experiment.run import run_experiment
from rageval.tracking.store import Tracker
from rageval.workflows.compare import ComparisonRequest, execute_comparison
from rageval.workflows.gate import execute_gate
from rageval.workflows.guards import record_release_evaluation
from rageval.workflows.run import run_params, run_tags

BM25 = ROOT / "params" / "bm25.yaml"
HTTP = ROOT / "params" / "http-bm25.yaml"
POLICY = ROOT / "params" / "gates" / "release.yaml"
TOKEN_VAR = "RAGEVAL_SEARCH_TOKEN"


@pytest.fixture(scope="module")
def service() -> BM25Service:
    return BM25Service.from_params(BM25)


@pytest.fixture(scope="module")
def url(service: BM25Service):
    with serve(service.app) as base:
        yield f"{base}/search"


@pytest.fixture(autouse=True)
def fresh(request, monkeypatch):
    monkeypatch.setenv(TOKEN_VAR, "Bearer t0ken-for-the-failure-tests")
    if "service" in request.fixturenames:
        request.getfixturevalue("service").reset()


def http_overrides(url: str, *more: str) -> list[str]:
    return [f"retrieval.stages.0.url={url}", "retrieval.stages.0.retries=0", *more]


def test_the_failure_budget_is_strict_by_default_and_bounded():
    config = load_config(HTTP)
    assert config.failures.max_fraction == 0.0
    for bad in ("-0.1", "1.5", "lots"):
        with pytest.raises(ConfigError) as raised:
            load_config(HTTP, [f"failures.max_fraction={bad}"])
        (problem,) = raised.value.problems
        assert problem.field == "failures.max_fraction"
    with pytest.raises(ConfigError, match="failures.budget"):
        load_config(HTTP, ["failures.budget=1"])  # strict: an unknown key is an error


def test_a_run_whose_every_query_failed_is_refused_naming_the_failures(service, url):
    service.reset(status=404)
    with pytest.raises(EvaluationError) as raised:
        run_experiment(load_config(HTTP, http_overrides(url)), cache=False)
    text = str(raised.value)
    total = len(load_benchmark(load_config(HTTP).benchmark).cases_for("dev"))
    assert f"{total} of {total} queries failed (100%), more than the run's failure budget" in text
    assert "failures.max_fraction=0 allows" in text and "HTTP 404" in text
    assert "--set failures.max_fraction=0.1" in text


def test_one_failed_query_is_over_the_default_budget_and_within_a_raised_one(service, url):
    config = load_config(HTTP, http_overrides(url))
    bench = load_benchmark(config.benchmark)
    first = bench.cases_for("dev")[0].queryId
    total = len(bench.cases_for("dev"))
    service.reset(status=400, only={first})
    with pytest.raises(EvaluationError, match=rf"1 of {total} queries failed"):
        run_experiment(config, bench, cache=False)
    allowed = load_config(HTTP, http_overrides(url, "failures.max_fraction=0.2"))
    result = run_experiment(allowed, bench, cache=False)
    assert result.counts()["queries_failed"] == 1
    assert result.evaluation.per_query.loc[first, "nDCG@10"] == 0.0
    (warning,) = [w for w in result.warnings if "failed" in w]
    assert warning.startswith(f"1 of {total} queries failed (stage bm25-service) and score 0 in every measure")


@pytest.mark.e2e
def test_rageval_run_exits_non_zero_and_leaves_a_failed_unsealed_run(service, url, tmp_path):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    service.reset(status=403)
    result = CliRunner().invoke(
        app,
        ["run", str(HTTP), "--set", f"retrieval.stages.0.url={url}", "--set", "retrieval.stages.0.retries=0"]
        + ["--tracking-uri", store],
    )
    assert result.exit_code == 1, result.output
    assert "queries failed (100%), more than the run's failure budget" in result.output
    assert "Traceback" not in result.output and "sealed" not in result.output.replace("unsealed", "")
    (info,) = Tracker(store).runs()
    assert info.status == "FAILED" and not info.sealed
    assert "more than the run's failure budget" in info.tags["rageval.error"]
    assert "HTTP 403" in info.tags["rageval.error"]


def sealed_release_run(tracker: Tracker, params, overrides: list[str], name: str) -> str:
    """A sealed release evaluation made in process and logged through ``tracker`` (no notebook)."""
    config = load_config(params, overrides, split="release")
    bench = load_benchmark(config.benchmark)
    run_id = tracker.create_run(
        "failure-tests",
        name,
        params=run_params(config, overrides),
        tags=run_tags(config, bench, params),
        files={"config.yaml": dump_config(config).encode()},
    )
    record_release_evaluation(tracker, run_id, bench, config.name)
    tracker.log_result(run_id, run_experiment(config, bench, cache=False))
    tracker.seal(run_id)
    return run_id


@pytest.mark.e2e
def test_gate_and_compare_refuse_a_side_whose_queries_failed(service, url, tmp_path):
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    service.reset(status=400)  # every query of the baseline fails; its budget lets it be recorded
    baseline = sealed_release_run(tracker, HTTP, http_overrides(url, "failures.max_fraction=1.0"), "broken")
    info = tracker.run(baseline)
    assert info.sealed and info.metrics["nDCG_at_10"] == 0.0
    failed = int(info.metrics["queries_failed"])
    assert failed == info.metrics["queries_total"] > 0
    assert f"{failed} of {failed} queries failed" in info.tags["rageval.warnings"]
    service.reset()
    candidate = sealed_release_run(tracker, BM25, [], "bm25")
    assert tracker.run(candidate).metrics["nDCG_at_10"] > 0.4

    before = len(tracker.runs())
    with pytest.raises(ComparisonError) as raised:
        execute_gate(baseline, candidate, POLICY, tracker=tracker)
    text = str(raised.value)
    assert f"the baseline run {baseline} (broken) has {failed} failed queries" in text
    assert "would count as losses or wins" in text and "failures.json" in text
    with pytest.raises(ComparisonError, match=f"the baseline run {baseline} .* has {failed} failed queries"):
        execute_comparison(ComparisonRequest(baseline, [candidate]), tracker=tracker)
    # The other way round: the failed run as the candidate.
    with pytest.raises(ComparisonError, match=f"the candidate run {baseline} .* has {failed} failed queries"):
        execute_comparison(ComparisonRequest(candidate, [baseline]), tracker=tracker)
    assert len(tracker.runs()) == before  # nothing recorded: no gate, no comparison run
