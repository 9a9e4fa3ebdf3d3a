"""Untrusted text never runs where rageval shows it: a benchmark whose documents, queries, IDs and
slice labels hold HTML, terminal escapes and spreadsheet formulas goes through `rageval run` (twice)
and `rageval compare`; every executed notebook, CSV artifact and HTML output shows that text inert."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import nbformat
import pytest
import yaml
from conftest import write_tiny

from rageval.tracking.store import Tracker
from rageval.workflows.compare import ComparisonRequest, execute_comparison
from rageval.workflows.run import RunRequest, execute_run

pytestmark = pytest.mark.e2e

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
ANSI = "\x1b[31m"
OSC = "\x1b]0;owned\x07"
FORMULAS = ['=HYPERLINK("http://evil.example","x")', "+SUM(A1:A9)", "-2+3+cmd", "@SUM(A1)"]

DOCS = [
    {
        "id": "=cmd|' /C calc'!A0",
        "title": f"Retry {SCRIPT}",
        "text": f"# Retry\n\n{SCRIPT} publish retry retry retry after a cache failure. {ANSI}red{OSC} text.\n\n"
        f"## Limits\n\n{FORMULAS[0]} publish limits and retry budget.",
    },
    {
        "id": IMG,
        "title": "Webhooks",
        "text": f"{IMG} webhook signing secrets, publish retry once. {FORMULAS[1]} {ANSI}bold",
    },
    {
        "id": "@doc",
        "title": "Billing",
        "text": f"{FORMULAS[2]} billing plans and invoices; publish cache retry webhook. {FORMULAS[3]}",
    },
    {"id": "plain", "title": "Plain", "text": "publish cache webhook signing billing retry " * 12},
]
CASES = [
    {
        "queryId": f"q1{ANSI}",
        "query": f"publish retry cache {SCRIPT} {ANSI}",
        "corpusVersion": "tiny-1",
        "relevant": [{"documentId": DOCS[0]["id"], "grade": 3}, {"documentId": "@doc", "grade": 1}],
        "slice": [SCRIPT, f"=slice{ANSI}", "+plus"],
        "split": "dev",
    },
    {
        "queryId": "=q2",
        "query": f"webhook signing {IMG} {FORMULAS[0]}",
        "corpusVersion": "tiny-1",
        "relevant": [{"documentId": IMG, "grade": 2}, {"documentId": "plain", "grade": 1}],
        "slice": [IMG, "-minus", "@at"],
        "split": "dev",
    },
    {
        "queryId": "@q3",
        "query": f"billing invoices cache {OSC}",
        "corpusVersion": "tiny-1",
        "relevant": [{"documentId": "@doc", "grade": 2}, {"documentId": "plain", "grade": 1}],
        "slice": [SCRIPT, "-minus"],
        "split": "dev",
    },
]


def params_file(tmp_path: Path, benchmark: Path, name: str, k1: float, b: float, candidates: int) -> Path:
    """A BM25 run on the benchmark; two runs keeping 20 and 1 candidates differ on every query (the diffs:
    each query judges two documents, and one passage covers at most one of them)."""
    config = {
        "version": 1,
        "name": name,
        "benchmark": str(benchmark),
        "split": "dev",
        "chunking": {"method": "markdown", "tokenizer": "words", "size": 12, "overlap": 0},
        "retrieval": {"stages": [{"type": "bm25", "k1": k1, "b": b, "candidates": candidates}]},
        "final_k": 3,
        "evaluation": {"measures": ["nDCG@10", "R@5", "MRR"]},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def outputs(notebook: Path) -> list[dict]:
    executed = nbformat.read(notebook, as_version=4)
    return [o for cell in executed.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]


def text_of(output: dict, mime: str) -> str:
    value = output.get("data", {}).get(mime, "")
    return "".join(value) if isinstance(value, list) else str(value)


def is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two sealed runs and their sealed comparison, on a store of this module's own."""
    tmp = tmp_path_factory.mktemp("escaping")
    benchmark = write_tiny(tmp / "hostile", documents=DOCS, cases=CASES)
    tracker = Tracker(f"sqlite:///{tmp / 'mlflow.db'}")
    baseline = execute_run(RunRequest(params_file(tmp, benchmark, "deep", 0.1, 0.0, 20)), tracker)
    candidate = execute_run(RunRequest(params_file(tmp, benchmark, "shallow", 3.0, 1.0, 1)), tracker)
    comparison = execute_comparison(ComparisonRequest(baseline.run_id, [candidate.run_id]), tracker=tracker)
    return {
        role: Path(tracker.run(run_id).artifact_uri.removeprefix("file://"))
        for role, run_id in (
            ("baseline", baseline.run_id),
            ("candidate", candidate.run_id),
            ("comparison", comparison.run_id),
        )
    }


def test_executed_notebooks_show_untrusted_text_escaped_never_live(recorded):
    html_seen = {}
    for role, root in recorded.items():
        (notebook,) = (root / "notebook").glob("*.ipynb")
        found = outputs(notebook)
        assert found and not any(o["output_type"] == "error" for o in found), role
        html = "\n".join(text_of(o, "text/html") for o in found)
        markdown = "\n".join(text_of(o, "text/markdown") for o in found)
        for live in (html, markdown):
            assert "<script" not in live.lower() and "<img" not in live.lower(), role
        # No terminal escape in any output: HTML, plain text, Markdown or a stream.
        every = "\n".join(
            [html, markdown, *(text_of(o, "text/plain") for o in found), *(str(o.get("text", "")) for o in found)]
        )
        assert "\x1b" not in every and "\x07" not in every, role
        html_seen[role] = html
    # The hostile text reached the displays, escaped: slice labels, document IDs, queries, snippets.
    evaluation = html_seen["baseline"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in evaluation  # a slice label (the slices table's index)
    assert "&lt;img src=x onerror=alert(1)&gt;" in evaluation
    diffs = html_seen["comparison"]
    assert diffs.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 2  # slice labels and the query text
    assert "&lt;img src=x onerror=alert(1)&gt;" in diffs and "webhook signing" in diffs  # =q2: its query and span
    assert "=HYPERLINK(&#34;http://evil.example&#34;,&#34;x&#34;)" in diffs  # q2's query, shown as text


def test_csv_artifacts_hold_no_formula_cell_and_no_escape_sequence(recorded):
    cells = 0
    files = []
    for root in recorded.values():
        for path in sorted(root.rglob("*.csv")):
            text = path.read_text(encoding="utf-8")
            assert "\x1b" not in text and "\x07" not in text, path
            for row in csv.reader(io.StringIO(text)):
                for cell in row:
                    cells += 1
                    assert not cell.startswith(("=", "+", "-", "@")) or is_number(cell), (path.name, cell)
            files.append(path.name)
    assert {"slices.csv", "per_query_diff.csv", "comparison.csv"} <= set(files)
    diff = (recorded["comparison"] / "per_query_diff.csv").read_text(encoding="utf-8")
    # The formula-looking IDs and texts are there, neutralised with a leading apostrophe.
    assert "'=q2" in diff and "'@q3" in diff
    slices = (recorded["baseline"] / "slices.csv").read_text(encoding="utf-8")
    assert "'=slice" in slices and "'+plus" in slices and "'-minus" in slices and "'@at" in slices
    assert cells > 100


def test_no_html_artifact_renders_untrusted_markup(recorded):
    # Any HTML a run records (none at present besides the notebooks' outputs) is held to the same rule.
    pages = [p for root in recorded.values() for p in root.rglob("*.htm*")]
    assert pages  # every executed notebook is also rendered as HTML
    for page in pages:
        text = page.read_text(encoding="utf-8", errors="replace").lower()
        assert "<script" not in text and "\x1b" not in text, page
        # The only images are rageval's own figures, inline.
        for tag in re.findall(r"<img[^>]*>", text):
            assert re.search(r'\ssrc="data:image/png;base64,[a-z0-9+/=\s]*"', tag) and "onerror" not in tag, (
                page,
                tag[:80],
            )
    assert re.search(r"\.html?$", "x.html")  # the pattern above matches what it is meant to
