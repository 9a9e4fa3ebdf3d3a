"""Easy-question and coverage diagnostics (`rageval benchmark validate`): warnings, never errors."""

from __future__ import annotations

import json

from conftest import DEMO, ROOT, write_tiny
from typer.testing import CliRunner

from rageval.benchmark.diagnostics import GUIDE_SLICES, MIN_SLICE_CASES, diagnose, headings, terms
from rageval.benchmark.loading import load_benchmark
from rageval.cli import app

KEYS = (
    "# API keys\n\nKeys authenticate calls to the Management API.\n\n"
    "## Rotate an API key\n\nCreate the new key with a grace period, deploy it, then revoke the old one.\n\n"
    "```sh\n# Not a heading\nnwp keys rotate\n```\n"
)
DOCUMENTS = [
    {"id": "keys", "title": "API keys", "text": KEYS, "metadata": {"docType": "how-to", "language": "en"}},
    {"id": "plans", "title": "Plans", "text": "Growth includes five seats.", "metadata": {"docType": "reference"}},
]


def case(query_id, query, relevant, slices=(), **extra):
    return {
        "queryId": query_id,
        "query": query,
        "corpusVersion": "tiny-1",
        "relevant": relevant,
        "slice": list(slices),
        "split": "dev",
        **extra,
    }


ROTATE = [{"documentId": "keys", "grade": 3, "start": KEYS.index("Create"), "end": KEYS.index("```")}]
CASES = [
    case("heading", "How do I rotate an API key?", ROTATE, ["frequent"]),
    case("paraphrase", "swap credentials while staying online", ROTATE, ["paraphrase"]),
    case(
        "generated",
        "Growth seats",
        [{"documentId": "plans", "grade": 3}],
        ["short"],
        provenance={"source": "heading-generated"},
    ),
    case("never", "Why can't I add a sixth seat since 2026?", [{"documentId": "plans", "grade": 2}], ["negation"]),
    case("none", "cache.invalidation.timeoutMs", [], ["unanswerable"]),
]


def tiny(tmp_path):
    return load_benchmark(write_tiny(tmp_path / "b", documents=DOCUMENTS, cases=CASES))


def test_terms_drop_stopwords_and_question_words_and_stem():
    assert terms("How do I rotate the keys?") == {"rotat", "key"}
    assert headings(KEYS) == ["API keys", "Rotate an API key"]  # the comment inside the code fence is no heading


def test_a_question_restating_a_heading_is_flagged_and_a_paraphrase_is_not(tmp_path):
    by_id = {c.queryId: c for c in diagnose(tiny(tmp_path)).cases}
    flagged = by_id["heading"]
    assert flagged.heading_like and flagged.closest_heading == "Rotate an API key"
    assert flagged.heading == 1.0 and flagged.title == 2 / 3  # {rotat, api, key}: all in the heading, 2 in the title
    assert (
        "restates the heading 'Rotate an API key' of keys (100% of its terms, 100% of the query's)"
        in (flagged.reasons[0])
    )
    assert not by_id["paraphrase"].heading_like and by_id["paraphrase"].evidence == 0.0
    assert "paraphrase" in by_id["paraphrase"].derived
    # Flagged by its provenance, whatever its words.
    assert by_id["generated"].heading_like and by_id["generated"].reasons == ["its provenance says heading-generated"]
    assert by_id["none"].evidence is None and not by_id["none"].heading_like


def test_rule_derived_labels_and_document_facets(tmp_path):
    by_id = {c.queryId: c for c in diagnose(tiny(tmp_path)).cases}
    assert by_id["never"].derived == ["paraphrase", "multi-doc", "time-sensitive", "negation"]
    assert by_id["never"].intent == "why"
    assert by_id["none"].derived == ["short", "exact-term", "unanswerable"] and by_id["none"].intent == "keyword"
    assert by_id["heading"].intent == "how" and by_id["heading"].facets == {"docType": ["how-to"], "language": ["en"]}


def test_coverage_lists_missing_and_tiny_slices_with_the_threshold(tmp_path):
    report = diagnose(tiny(tmp_path))
    rows = {row.label: row for row in report.coverage}
    assert [row.label for row in report.coverage] == [label for ls in GUIDE_SLICES.values() for label in ls]
    assert rows["permissions"].status == "missing" and rows["permissions"].counts == {"dev": 0, "release": 0}
    assert rows["frequent"].status == "tiny" and rows["frequent"].counts == {"dev": 1, "release": 0}
    assert "slice 'permissions' (permissions) is missing: no case carries it" in report.warnings
    assert f"slice 'frequent' (frequent) is tiny: dev 1, release 0 (fewer than {MIN_SLICE_CASES} cases)" in (
        report.warnings
    )
    assert "4 case(s) record no provenance (add a default to benchmark.yaml or a block per case)" in report.warnings
    assert report.sources == {"heading-generated": 1, "none": 4}


def test_a_retention_date_within_30_days_is_announced_and_slices_carry_their_mean_overlap(tmp_path):
    import datetime as dt

    cases = [dict(CASES[0], provenance={"source": "support", "authorization": "T-1", "retention": "2027-01-31"})]
    benchmark = load_benchmark(write_tiny(tmp_path / "b", documents=DOCUMENTS, cases=cases + CASES[1:]))
    notice = "case 'heading' may be used until 2027-01-31 (30 days left): retire it in a new version by then"
    assert any(w.startswith(notice) for w in diagnose(benchmark, today=dt.date(2027, 1, 1)).warnings)
    assert not any("may be used until" in w for w in diagnose(benchmark, today=dt.date(2026, 12, 31)).warnings)
    report = diagnose(benchmark, today=dt.date(2026, 12, 31))
    assert "case 'heading' comes from support but records no redaction, access" in report.warnings
    # One answerable case per label here: each mean is that case's overlap (1/3 of {rotat, api, key}; both of {growth, seat}).
    assert report.overlap == {"frequent": 1 / 3, "negation": 0.2, "paraphrase": 0.0, "short": 1.0}


def test_the_demo_covers_every_guide_slice_and_flags_its_title_like_questions():
    report = diagnose(load_benchmark(DEMO))
    rows = {row.label: row for row in report.coverage}
    assert all(row.status != "missing" for row in report.coverage)
    assert rows["frequent"].counts == {"dev": 9, "release": 3}  # as rageval/demo/README.md's table says
    assert rows["constrained"].status == "ok" and rows["negation"].status == "tiny"
    assert report.slices["recovery"] == {"dev": 1, "release": 0}  # a label outside the guide's list is still counted
    assert report.sources == {"expert-written": 55}
    assert sum(report.intents["how"].values()) == 9
    assert set(report.facets) == {"docType"}  # the demo's documents carry no language or update frequency
    flagged = [c.queryId for c in report.cases if c.heading_like]
    assert flagged == ["q-0006", "q-0016"]
    comparison = {c.label: c for c in report.comparisons}
    assert (comparison["short"].hand, comparison["short"].derived, comparison["short"].both) == (10, 10, 10)


def test_validate_prints_the_diagnostics_and_writes_them_as_json(tmp_path):
    root = write_tiny(tmp_path / "b", documents=DOCUMENTS, cases=CASES)
    out = tmp_path / "report.json"
    result = CliRunner().invoke(app, ["benchmark", "validate", str(root), "--json", str(out), "--cases"])
    assert result.exit_code == 0, result.output  # warnings, not errors
    assert "slice coverage (the guide's slices; tiny: fewer than 5 cases in a split; overlap:" in result.output
    assert "\n  permissions            permissions     dev   0  release   0  missing\n" in result.output
    assert "\n  paraphrase             paraphrase      dev   1  release   0  tiny     overlap 0%\n" in result.output
    assert "warning: case 'heading' looks heading-generated: restates the heading 'Rotate an API key'" in result.output
    assert "  heading       33%  67% 100%  HEADING-LIKE" in result.output
    payload = json.loads(out.read_text())
    assert payload["valid"] is True
    cases = {c["queryId"]: c for c in payload["diagnostics"]["cases"]}
    assert cases["heading"]["heading_like"] is True and cases["none"]["evidence"] is None
    assert payload["diagnostics"]["thresholds"]["min_slice_cases"] == MIN_SLICE_CASES


def test_validate_json_of_an_invalid_benchmark_lists_its_problems(tmp_path):
    root = write_tiny(tmp_path / "b", cases=[case("q1", "x", [{"documentId": "nope", "grade": 3}])])
    out = tmp_path / "report.json"
    result = CliRunner().invoke(app, ["benchmark", "validate", str(root), "--json", str(out)])
    assert result.exit_code == 1
    (problem,) = json.loads(out.read_text())["problems"]
    assert (problem["file"], problem["line"], problem["field"]) == ("cases.jsonl", 1, "relevant[0].documentId")


def test_a_run_config_warns_when_a_measure_cuts_off_deeper_than_final_k():
    # The guide's context-budget check belongs to the run configuration's pre-run checks.
    from rageval.config.load import load_config

    params = ROOT / "params" / "bm25.yaml"  # final_k 5; nDCG@10, R@5, R@20, R@100, Hit@5, MRR, P@5, AP
    line = next(n for n, text in enumerate(params.read_text().splitlines(), 1) if text.lstrip().startswith("measures:"))
    warnings: list[str] = []
    load_config(params, warn=warnings.append)
    assert warnings == [
        f"warning: {params}:{line}: evaluation.measures: nDCG@10, R@20, R@100 cut off deeper than final_k 5: they "
        "score chunks the generator never receives (they measure candidate recall; to measure the context, add "
        "measures at k <= 5, or raise final_k)"
    ]
    warnings.clear()
    load_config(params, ["final_k=20"], warn=warnings.append)
    assert len(warnings) == 1 and "R@100 cut off deeper than final_k 20" in warnings[0]
    warnings.clear()
    load_config(params, ["final_k=100"], warn=warnings.append)
    assert warnings == []
