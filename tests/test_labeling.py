"""`rageval benchmark label`: judgments written from a quote, a heading or a regex; rageval finds the
span, lists every candidate of ambiguous evidence and writes nothing then."""

from __future__ import annotations

import datetime as dt
import json
import textwrap

import pytest
import yaml
from typer.testing import CliRunner

from rageval.benchmark.labeling import Evidence, Question, find_span, label
from rageval.benchmark.loading import load_benchmark, write_benchmark
from rageval.benchmark.schema import Document
from rageval.benchmark.versions import new_version
from rageval.cli import app
from rageval.errors import InputError

TEXT = textwrap.dedent(
    """\
    # Client

    Timeouts default to five seconds.

    ## Timeouts

    Set `timeout=None` to disable timeouts.

    ```python
    # Timeouts
    client = Client(timeout=10)
    ```

    ### Pool timeout

    The pool timeout waits for a free connection.

    ## Retries

    Retries are off by default. Timeouts are not retried.
    """
)
DOC = Document(id="client", title="Client", text=TEXT)


def span_text(evidence: Evidence) -> str:
    start, end = find_span(DOC, evidence, "test")
    return TEXT[start:end]


def test_a_quote_is_found_exactly_then_tolerating_whitespace():
    assert span_text(Evidence(doc="client", quote="default to five seconds", grade=3)) == "default to five seconds"
    assert span_text(Evidence(doc="client", quote="Retries  are\noff by\u00a0default", grade=3)) == (
        "Retries are off by default"
    )


def test_a_heading_selects_its_section_down_to_the_next_of_its_level():
    section = span_text(Evidence(doc="client", heading="Timeouts", grade=2))
    assert section.startswith("## Timeouts\n\nSet `timeout=None`")
    assert section.endswith("The pool timeout waits for a free connection.")
    assert "# Timeouts\nclient" in section  # the '#' line in the code block is no heading
    assert span_text(Evidence(doc="client", heading="## pool TIMEOUT", grade=2)) == (
        "### Pool timeout\n\nThe pool timeout waits for a free connection."
    )
    assert span_text(Evidence(doc="client", heading="Retries", grade=1)).endswith("Timeouts are not retried.")


def test_a_regex_gives_its_match():
    assert span_text(Evidence(doc="client", regex=r"timeout=\d+", grade=1)) == "timeout=10"


def test_ambiguous_evidence_lists_every_candidate_with_line_and_snippet():
    with pytest.raises(InputError) as caught:
        find_span(DOC, Evidence(doc="client", quote="timeout", grade=3), "questions.yaml:4")
    (problem,) = caught.value.problems
    assert problem.file == "questions.yaml:4" and problem.field == "quote"
    assert "occurs 5 times in 'client'" in problem.message
    assert "line 7 (" in problem.message and "line 11 (" in problem.message and "line 16 (" in problem.message
    assert problem.fix.startswith("quote more of the passage")
    with pytest.raises(InputError, match=r"occurs 3 times.*line 5 .*line 10 .*line 14 "):
        find_span(DOC, Evidence(doc="client", regex=r"^#+ .*[Tt]imeout", grade=3), "x")


def test_absent_evidence_says_so_and_lists_headings():
    with pytest.raises(InputError, match="the quote 'thirty seconds' is not in document 'client'"):
        find_span(DOC, Evidence(doc="client", quote="thirty seconds", grade=3), "x")
    with pytest.raises(InputError, match=r"its headings: Client, Timeouts, Pool timeout, Retries"):
        find_span(DOC, Evidence(doc="client", heading="Proxies", grade=3), "x")
    with pytest.raises(InputError, match="not a regular expression"):
        find_span(DOC, Evidence(doc="client", regex="(unclosed", grade=3), "x")


def test_evidence_takes_exactly_one_locator():
    with pytest.raises(ValueError, match="exactly one of quote, heading or regex .got quote, regex"):
        Evidence(doc="client", quote="a", regex="b", grade=1)


@pytest.fixture
def corpus(tmp_path):
    spec = {"name": "docs", "version": "1", "corpusVersion": "c1", "relevanceUnit": "passage", "splits": ["dev"]}
    other = Document(id="other", title="Other", text="Nothing about clients here.")
    return write_benchmark(tmp_path / "v1", spec, [DOC, other], [])


def test_label_writes_cases_with_spans_and_quotes_and_updates_hashes(corpus):
    questions = [
        Question(
            id="q1",
            query="default timeout?",
            split="dev",
            slice=["short"],
            evidence=[
                Evidence(doc="client", quote="five seconds", grade=3),
                Evidence(doc="client", heading="Retries", grade=1),
            ],
        ),
        Question(id="q2", query="weather tomorrow?", split="dev"),
    ]
    done = label(corpus, [(q, "test") for q in questions])
    assert (done.added, done.extended, done.judgments) == (["q1", "q2"], [], 2)
    benchmark = load_benchmark(corpus)
    first, second = benchmark.cases
    assert [(j.grade, TEXT[j.start : j.end] == j.quote) for j in first.relevant] == [(3, True), (1, True)]
    assert first.relevant[0].quote == "five seconds" and first.slice == ["short"] and first.corpusVersion == "c1"
    assert second.relevant == [] and not second.answerable
    more = Question(
        id="q1", query="default timeout?", split="dev", evidence=[Evidence(doc="client", regex="timeout=None", grade=2)]
    )
    assert label(corpus, [(more, "test")]).extended == ["q1"]
    assert [j.quote for j in load_benchmark(corpus).cases[0].relevant][-1] == "timeout=None"


def test_one_bad_item_writes_nothing(corpus):
    before = (corpus / "cases.jsonl").read_bytes()
    questions = [
        Question(id="ok", query="five?", split="dev", evidence=[Evidence(doc="client", quote="five", grade=3)]),
        Question(
            id="bad",
            query="?",
            split="dev",
            evidence=[Evidence(doc="nope", quote="x", grade=3), Evidence(doc="client", quote="timeout", grade=3)],
        ),
    ]
    with pytest.raises(InputError) as caught:
        label(corpus, [(q, f"q.yaml:{i}") for i, q in enumerate(questions)])
    assert [(p.file, p.field) for p in caught.value.problems] == [
        ("q.yaml:1", "evidence[0].doc"),
        ("q.yaml:1", "evidence[1].quote"),
    ]
    assert (corpus / "cases.jsonl").read_bytes() == before


def test_labelling_a_new_version_logs_the_change(corpus):
    label(
        corpus,
        [
            (
                Question(id="q1", query="five?", split="dev", evidence=[Evidence(doc="client", quote="five", grade=3)]),
                "t",
            )
        ],
    )
    v2 = new_version(corpus, "2")
    label(
        v2,
        [
            (
                Question(
                    id="q2",
                    query="retries?",
                    split="dev",
                    evidence=[Evidence(doc="client", heading="Retries", grade=3)],
                ),
                "t",
            ),
            (
                Question(
                    id="q1",
                    query="five?",
                    split="dev",
                    evidence=[Evidence(doc="client", quote="Retries are off", grade=1)],
                ),
                "t",
            ),
        ],
        today=dt.date(2026, 1, 2),
    )
    changelog = load_benchmark(v2).spec.changelog
    assert [(e.version, e.action, e.cases) for e in changelog] == [
        ("2", "added", ["q2"]),
        ("2", "judgments-added", ["q1"]),
    ]


def test_the_cli_labels_from_a_questions_file_and_refuses_ambiguity(corpus, tmp_path):
    questions = tmp_path / "questions.yaml"
    questions.write_text(
        yaml.safe_dump(
            {
                "cases": [
                    {
                        "id": "q1",
                        "query": "pool?",
                        "split": "dev",
                        "evidence": [{"doc": "client", "heading": "Pool timeout", "grade": 3}],
                    },
                    {"id": "q2", "query": "none?", "split": "dev"},
                ]
            }
        )
    )
    runner = CliRunner()
    result = runner.invoke(app, ["benchmark", "label", str(corpus), "--from", str(questions)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "2 cases added, 0 given judgments, 1 judgments" in result.output
    before = (corpus / "cases.jsonl").read_text()
    result = runner.invoke(
        app,
        [
            "benchmark",
            "label",
            str(corpus),
            "--query-id",
            "q3",
            "--query",
            "t?",
            "--doc",
            "client",
            "--quote",
            "timeout",
            "--grade",
            "3",
            "--split",
            "dev",
        ],
        terminal_width=200,
    )
    assert result.exit_code == 2
    assert "occurs 5 times" in result.output and "quote more of the passage" in result.output
    assert (corpus / "cases.jsonl").read_text() == before
    assert [json.loads(line)["queryId"] for line in before.splitlines()] == ["q1", "q2"]


def test_a_questions_file_with_an_unknown_key_names_its_line(corpus, tmp_path):
    questions = tmp_path / "questions.yaml"
    questions.write_text(
        "cases:\n  - id: q1\n    query: x\n    split: dev\n    evidence:\n      - doc: client\n        qoute: five\n        grade: 3\n"
    )
    result = CliRunner().invoke(app, ["benchmark", "label", str(corpus), "--from", str(questions)], terminal_width=200)
    assert result.exit_code == 2
    assert "questions.yaml:7" in result.output and "qoute" in result.output
