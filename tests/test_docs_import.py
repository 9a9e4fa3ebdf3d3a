"""`rageval benchmark import docs`: pages read through markdown-it's token stream, mkdocs syntax
converted by named, versioned steps the benchmark records, and a re-import that reports the pages
changed and flags every judgment it moved or dropped."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import shared
from typer.testing import CliRunner

from rageval.benchmark.docs.importer import DocsImport, import_docs
from rageval.benchmark.docs.markdown import PageContext, render_markdown
from rageval.benchmark.docs.pages import AclMap, TreeOptions, find_pages, render_tree
from rageval.benchmark.docs.steps import STEPS, chosen_steps
from rageval.benchmark.labeling import Evidence, Question, label, load_draft
from rageval.benchmark.loading import load_benchmark, validate_benchmark
from rageval.cli import app
from rageval.errors import BenchmarkError, InputError

ALL = frozenset(chosen_steps(None, "rows"))
# mkdocs syntax as it stands in a page: counted per line, so a URL such as file:///x in code is none.
MKDOCS_SYNTAX = {
    "heading anchor": re.compile(r"^#+ .*\{\s*#"),
    "admonition": re.compile(r"^\s*(!!!|\?\?\?\+?) "),
    "/// block": re.compile(r"^\s*///"),
    "{* include": re.compile(r"\{\* "),
    "--8<-- snippet": re.compile(r"--8<--"),
    "::: autodoc": re.compile(r"^\s*::: "),
}


def render(source: str, steps=ALL, folder: Path = Path("."), include_root=None) -> tuple[str, PageContext]:
    context = PageContext("page.md", folder, frozenset(steps), include_root)
    return render_markdown(textwrap.dedent(source), context), context


def syntax_left(text: str) -> dict[str, int]:
    return {name: sum(bool(rx.search(line)) for line in text.splitlines()) for name, rx in MKDOCS_SYNTAX.items()}


# --------------------------------------------------------------------------- the three parser cases


def test_a_setext_heading_becomes_a_hash_heading_and_the_title():
    text, context = render(
        """
        Getting started
        ===============

        Install it.

        Details
        -------
        """
    )
    assert text == "# Getting started\n\nInstall it.\n\n## Details"
    assert context.title == context.h1 == "Getting started"
    assert context.counts["setext-headings"] == 2


def test_a_hash_line_inside_a_nested_code_fence_is_no_heading():
    source = """
    Intro.

    - step one

      ````markdown
      ```python
      # not a heading
      ```
      ````

    ## Real
    """
    text, context = render(source)
    assert context.title == "Real"
    assert "  # not a heading" in text.splitlines()
    from rageval.benchmark.labeling import headings

    assert [(h.level, h.text) for h in headings(text)] == [(2, "Real")]


def test_a_pipe_table_without_a_leading_pipe_is_a_table():
    text, context = render(
        """
        Option | Default
        --- | ---
        timeout | 5 seconds
        retries | 0
        """
    )
    assert text == "Option: timeout; Default: 5 seconds\nOption: retries; Default: 0"
    assert context.counts["tables"] == 1
    whole, _ = render("a | b\n--|--\n1 | 2\n", steps=chosen_steps(None, "whole"))
    assert whole == "| a | b |\n|---|---|\n| 1 | 2 |"


# --------------------------------------------------------------------------- the steps


def test_heading_anchors_are_stripped_only_under_their_step():
    source = "# First Steps { #first-steps }\n\n## Run it {#run .wide}\n"
    assert render(source)[0] == "# First Steps\n\n## Run it"
    kept, _ = render(source, steps=ALL - {"strip-heading-anchors"})
    assert kept == "# First Steps { #first-steps }\n\n## Run it {#run .wide}"


def test_admonitions_and_blocks_become_text_with_their_title():
    text, context = render(
        """
        !!! note "TL;DR"
            Use a **Client**.

            | a | b |
            |---|---|
            | 1 | 2 |

        !!! tip
            Plain.

        /// warning | Careful
        Body of the block.
        ///

        ??? info
            Folded.
        """
    )
    assert text == (
        "Note: TL;DR\nUse a **Client**.\n\na: 1; b: 2\n\nTip:\nPlain.\n\nWarning: Careful\nBody of the block."
        "\n\nInfo:\nFolded."
    )
    assert context.counts == {"admonitions": 4, "tables": 1}


def test_an_admonition_nested_in_a_list_is_converted_at_its_indent():
    text, _ = render("- item\n\n    !!! warning\n        careful\n\n- next\n")
    assert text == "- item\n\n    Warning:\n    careful\n\n- next"


def test_front_matter_fills_title_acl_dates_and_metadata(tmp_path):
    (tmp_path / "guide.md").write_text(
        "---\ntitle: The Guide\nacl: [staff]\nupdated: 2025-03-01\nowner: docs-team\n---\n# Heading\n\nBody.\n"
    )
    documents, _ = render_tree(find_pages(tmp_path), TreeOptions(ALL))
    (doc,) = documents
    assert (doc.id, doc.title, doc.text, doc.acl) == ("guide", "The Guide", "# Heading\n\nBody.", ["staff"])
    assert str(doc.updated) == "2025-03-01"
    assert doc.metadata == {"source": "guide.md", "format": "markdown", "owner": "docs-team"}


def test_bad_front_matter_names_the_page_and_line(tmp_path):
    (tmp_path / "bad.md").write_text("---\ntitle: [unclosed\n---\nBody\n")
    with pytest.raises(BenchmarkError) as caught:
        render_tree(find_pages(tmp_path), TreeOptions(ALL))
    (problem,) = caught.value.problems
    assert problem.file.endswith("bad.md") and problem.line == 2 and problem.field == "front matter"
    assert problem.message.startswith("not YAML: expected ',' or ']'")


def test_an_acl_map_applies_its_rules_in_order_and_front_matter_wins(tmp_path):
    (tmp_path / "internal").mkdir()
    (tmp_path / "internal" / "ops.md").write_text("# Ops\n")
    (tmp_path / "internal" / "open.md").write_text("---\nacl: [everyone]\n---\n# Open\n")
    (tmp_path / "index.md").write_text("# Home\n")
    rules = AclMap.model_validate(
        {"pages": [{"match": "*", "metadata": {"site": "docs"}}, {"match": "internal/*", "acl": ["ops"]}]}
    )
    documents, _ = render_tree(find_pages(tmp_path), TreeOptions(ALL, acl_map=rules))
    by_id = {d.id: d for d in documents}
    assert by_id["index"].acl is None and by_id["index"].metadata["site"] == "docs"
    assert by_id["internal/ops"].acl == ["ops"]
    assert by_id["internal/open"].acl == ["everyone"]


def test_includes_expand_against_the_root_with_line_ranges(tmp_path):
    (tmp_path / "docs_src").mkdir()
    (tmp_path / "docs_src" / "app.py").write_text("import x\n\napp = x.App()\nprint(app)\n")
    (tmp_path / "docs_src" / "note.md").write_text("!!! tip\n    Included tip.\n")
    page_folder = tmp_path / "docs" / "en"
    page_folder.mkdir(parents=True)
    text, context = render(
        """
        Code:

        {* ../../docs_src/app.py ln[3:4] hl[3] *}

        --8<-- "docs_src/note.md"

        ```python
        --8<-- "docs_src/app.py:1:1"
        ```
        """,
        folder=page_folder,
        include_root=tmp_path,
    )
    assert (
        text == "Code:\n\n```python\napp = x.App()\nprint(app)\n```\n\nTip:\nIncluded tip.\n\n```python\nimport x\n```"
    )
    assert context.counts["includes"] == 3 and syntax_left(text) == dict.fromkeys(MKDOCS_SYNTAX, 0)


def test_a_missing_include_is_an_error_naming_page_line_and_places(tmp_path):
    (tmp_path / "page.md").write_text("# P\n\nText.\n\n{* ../src/gone.py *}\n")
    with pytest.raises(BenchmarkError) as caught:
        render_tree(find_pages(tmp_path), TreeOptions(ALL, include_root=tmp_path))
    (problem,) = caught.value.problems
    assert problem.file.endswith("page.md") and problem.line == 5 and problem.field == "include"
    assert "'../src/gone.py' not found" in problem.message and "--include-root" in problem.fix


def test_autodoc_lines_and_html_blocks_become_text():
    text, context = render(
        """
        ::: httpx.Client
            :docstring:
            :members: get post

        <div align="center"><p>Fast <b>and</b> small</p><table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table></div>
        """
    )
    assert text == "`httpx.Client`\n\nFast and small\n\nk: a; v: 1"
    assert context.counts == {"autodoc": 1, "html-blocks": 1, "tables": 1}


def test_html_and_text_pages_are_read(tmp_path):
    (tmp_path / "ref.html").write_text(
        "<html><head><title>Reference</title><script>x()</script></head><body><h1>API</h1><p>Call <code>get</code>.</p>"
        "<table><thead><tr><th>Name</th><th>Type</th></tr></thead><tr><td>url</td><td>str</td></tr></table>"
        "<pre>get(url)</pre></body></html>"
    )
    (tmp_path / "notes.txt").write_text("Plain notes.\n")
    (tmp_path / "LICENSE.md").write_text("MIT\n")
    (tmp_path / "mkdocs.yml").write_text("nav:\n  - Notes page: notes.txt\n")
    tree = find_pages(tmp_path)
    assert tree.skipped == ["LICENSE.md (legal boilerplate)", "mkdocs.yml (not a page: .yml)"]
    documents, counts = render_tree(tree, TreeOptions(ALL))
    by_id = {d.id: d for d in documents}
    assert by_id["ref"].title == "Reference"
    assert by_id["ref"].text == "# API\n\nCall get.\n\nName: url; Type: str\n\n```\nget(url)\n```"
    assert (by_id["notes"].title, by_id["notes"].text) == ("Notes page", "Plain notes.")
    assert counts == {"tables": 1}


def test_unknown_steps_and_table_modes_list_the_choices():
    with pytest.raises(InputError, match="valid choices are front-matter, strip-heading-anchors"):
        chosen_steps(["strip-anchors"], "rows")
    with pytest.raises(InputError, match="use one of rows, whole"):
        chosen_steps(None, "html")


# --------------------------------------------------------------------------- the benchmark


def write_tree(root: Path, pages: dict[str, str]) -> Path:
    for name, text in pages.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


PAGES = {
    "index.md": "# Home { #home }\n\nWelcome to the docs.\n",
    "guide/timeouts.md": "# Timeouts\n\n!!! note\n    The default timeout is five seconds.\n\n## Disabling\n\nPass None.\n",
    "guide/limits.md": "# Limits\n\nKey | Value\n--|--\nmax_connections | 100\n",
}


def test_the_import_records_its_steps_and_validates_once_labelled(tmp_path):
    tree = write_tree(tmp_path / "tree", PAGES)
    report = import_docs(DocsImport(tree, tmp_path / "v1", "docs", "1", tables="rows"))
    spec = yaml.safe_load((tmp_path / "v1" / "benchmark.yaml").read_text())
    assert spec["preprocessing"] == ["atx-headings/1", *(f"{n}/1" for n in STEPS if n != "tables-whole")]
    assert report.counts == {"admonitions": 1, "tables": 1} and report.documents == 3
    _, problems = validate_benchmark(tmp_path / "v1")
    assert [p.message for p in problems] == ["the file holds no cases"]
    draft = load_draft(tmp_path / "v1")
    assert draft.documents["guide/limits"].text == "# Limits\n\nKey: max_connections; Value: 100"
    question = Question(
        id="q1",
        query="default timeout?",
        split="dev",
        evidence=[Evidence(doc="guide/timeouts", quote="default  timeout is five", grade=3)],
    )
    label(tmp_path / "v1", [(question, "test")])
    benchmark = load_benchmark(tmp_path / "v1")
    assert benchmark.spec.preprocessing == spec["preprocessing"]
    (judgment,) = benchmark.cases[0].relevant
    text = benchmark.documents["guide/timeouts"].text
    assert text[judgment.start : judgment.end] == judgment.quote == "default timeout is five"


def test_a_reimport_reports_pages_and_flags_moved_and_lost_judgments(tmp_path):
    tree = write_tree(tmp_path / "tree", PAGES)
    import_docs(DocsImport(tree, tmp_path / "v1", "docs", "1"))
    questions = [
        Question(
            id="moves",
            query="default timeout?",
            split="dev",
            evidence=[Evidence(doc="guide/timeouts", quote="The default timeout is five seconds.", grade=3)],
        ),
        Question(
            id="lost",
            query="disable?",
            split="dev",
            evidence=[Evidence(doc="guide/timeouts", heading="Disabling", grade=2)],
        ),
        Question(id="stays", query="welcome?", split="dev", evidence=[Evidence(doc="index", quote="Welcome", grade=1)]),
        Question(
            id="gone",
            query="limits?",
            split="dev",
            evidence=[Evidence(doc="guide/limits", regex=r"max_connections; Value: \d+", grade=3)],
        ),
    ]
    label(tmp_path / "v1", [(q, "test") for q in questions])
    old = load_benchmark(tmp_path / "v1")
    old_span = old.cases[0].relevant[0].span
    (tree / "guide" / "limits.md").unlink()
    (tree / "guide" / "timeouts.md").write_text(
        "# Timeouts\n\nA new first paragraph.\n\n!!! note\n    The default timeout is five seconds.\n\n## Disabling\n\nPass False.\n"
    )
    (tree / "new.md").write_text("# New\n")
    report = import_docs(DocsImport(tree, tmp_path / "v2", "docs", "2", previous=old))
    assert (report.added, report.changed, report.removed) == (["new"], ["guide/timeouts"], ["guide/limits"])
    lines = [m.line() for m in report.judgments]
    new_start = old_span[0] + len("A new first paragraph.\n\n")
    assert lines == [
        f"moves: guide/timeouts {old_span[0]}-{old_span[1]} -> {new_start}-{new_start + 36} (moved)",
        f"lost: guide/timeouts {old.cases[1].relevant[0].start}-{old.cases[1].relevant[0].end} -> dropped (not found)",
        f"gone: guide/limits {old.cases[3].relevant[0].start}-{old.cases[3].relevant[0].end} -> dropped (page removed)",
    ]
    assert [(e.action, e.cases) for e in report.changelog] == [("re-judged", ["moves"]), ("retired", ["lost", "gone"])]
    new = load_benchmark(tmp_path / "v2")  # the lineage rules accept the logged changes
    assert [c.queryId for c in new.cases] == ["moves", "stays"]
    moved = new.cases[0].relevant[0]
    assert new.documents["guide/timeouts"].text[moved.start : moved.end] == "The default timeout is five seconds."
    assert new.cases[1].relevant == old.cases[2].relevant and new.spec.predecessor.version == "1"
    assert new.spec.preprocessing == old.spec.preprocessing


def test_the_cli_imports_labels_and_writes_the_report(tmp_path):
    tree = write_tree(tmp_path / "tree", PAGES)
    runner = CliRunner()
    out = tmp_path / "v1"
    result = runner.invoke(
        app,
        [
            "benchmark",
            "import",
            "docs",
            str(tree),
            "--out",
            str(out),
            "--name",
            "d",
            "--version",
            "1",
            "--tables",
            "whole",
            "--report",
            str(tmp_path / "r.json"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "3 documents" in result.output and "1 tables" in result.output
    assert json.loads((tmp_path / "r.json").read_text())["steps"][-1] == "tables-whole/1"
    result = runner.invoke(
        app,
        [
            "benchmark",
            "label",
            str(out),
            "--query-id",
            "q",
            "--query",
            "limit?",
            "--doc",
            "guide/limits",
            "--quote",
            "max_connections",
            "--grade",
            "3",
            "--split",
            "dev",
        ],
    )
    assert result.exit_code == 0, result.output
    assert load_benchmark(out).cases[0].relevant[0].quote == "max_connections"


# --------------------------------------------------------------------------- the real trees


# What the two trees hold, measured (docs/importing-docs.md shows the same table): neither holds a table.
REAL_COUNTS = {
    "httpx": {"admonitions": 13, "autodoc": 39, "html-blocks": 9, "inline-html": 1},
    "starlette": {"admonitions": 11, "autodoc": 2, "html-blocks": 14, "front-matter": 1, "inline-html": 43},
}


@pytest.mark.realdata
@pytest.mark.parametrize("name", sorted(REAL_COUNTS))
def test_a_real_mkdocs_tree_imports_with_no_mkdocs_syntax_left_in_the_index(tmp_path, name):
    from rageval.benchmark.chunking import chunk_corpus
    from rageval.benchmark.schema import ChunkingConfig

    source = shared("docs-trees", name)
    raw = "\n".join(p.read_text(encoding="utf-8") for p in find_pages(source).pages)
    before = syntax_left(raw)
    report = import_docs(DocsImport(source, tmp_path / name, name, "1"))
    draft = load_draft(tmp_path / name)
    chunks = chunk_corpus(draft.documents.values(), ChunkingConfig())
    assert sum(before.values()) > 0
    assert syntax_left("\n".join(d.text for d in draft.documents.values())) == dict.fromkeys(MKDOCS_SYNTAX, 0)
    assert syntax_left("\n".join(chunk.index_text for chunk in chunks)) == dict.fromkeys(MKDOCS_SYNTAX, 0)
    assert report.counts == REAL_COUNTS[name]
    assert report.counts["admonitions"] == before["admonition"] + before["/// block"]
    assert report.counts["autodoc"] == before["::: autodoc"]
    assert draft.spec.preprocessing[0] == "atx-headings/1" and "tables-as-rows/1" in draft.spec.preprocessing
    assert report.skipped == ["LICENSE.md (legal boilerplate)", "mkdocs.yml (not a page: .yml)"]


def test_two_pages_with_one_id_are_refused(tmp_path):
    write_tree(tmp_path, {"api.md": "# API\n", "api.html": "<h1>API</h1>"})
    with pytest.raises(BenchmarkError) as caught:
        render_tree(find_pages(tmp_path), TreeOptions(ALL))
    (problem,) = caught.value.problems
    assert problem.file.endswith("api.md") and problem.message == "its ID 'api' is the ID of api.html too"


def test_the_guide_names_every_step_and_its_examples_come_out_as_shown():
    from rageval.benchmark.docs.markdown import parser

    guide = (Path(__file__).parents[1] / "docs" / "importing-docs.md").read_text(encoding="utf-8")
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    tokens = parser().parse(guide)
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and token.tag == "h3":
            current = re.match(r"`([a-z-]+)/\d+`", tokens[index + 1].content).group(1)
            sections[current] = []
        elif token.type == "heading_open":
            current = None
        elif token.type == "fence" and current is not None:
            sections[current].append((token.info, token.content))
    assert set(sections) == {*STEPS, "atx-headings"}
    for name, blocks in sections.items():
        (before_info, before), (after_info, after) = blocks[:2]
        assert (before_info, after_info) == ("markdown", "text"), name
        if name == "expand-includes":
            continue  # needs the included file: test_includes_expand_against_the_root_with_line_ranges
        text, _ = render(before, steps=chosen_steps(None, "whole" if name == "tables-whole" else "rows"))
        assert text == after.rstrip("\n"), name


def test_inline_html_tags_leave_prose_but_not_code():
    text, context = render(
        '- <a href="https://x.org" target="_blank">GitHub</a> | see `<b>` and <b>bold</b>\n\n```\n<a href="y">code</a>\n```\n'
    )
    assert text == '- GitHub | see `<b>` and bold\n\n```\n<a href="y">code</a>\n```'
    assert context.counts == {"inline-html": 1}
    kept, _ = render("Plain <br/> line\n", steps=ALL - {"html-as-text"})
    assert kept == "Plain <br/> line"


def test_the_cli_applies_only_the_steps_named_and_refuses_an_unknown_one(tmp_path):
    tree = write_tree(tmp_path / "tree", PAGES)
    runner = CliRunner()
    args = ["benchmark", "import", "docs", str(tree), "--name", "d", "--version", "1"]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "a"), "--steps", "admonitions-as-text"])
    assert result.exit_code == 0, result.output
    assert "preprocessing: atx-headings/1, admonitions-as-text/1, tables-as-rows/1" in result.output
    assert load_draft(tmp_path / "a").documents["index"].text == "# Home { #home }\n\nWelcome to the docs."
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "b"), "--steps", "anchors"], terminal_width=200)
    assert result.exit_code == 2 and "unknown step(s) anchors" in result.output
    assert "valid choices are front-matter, strip-heading-anchors" in result.output
    assert not (tmp_path / "b").exists()


@pytest.mark.realdata
def test_a_real_page_with_tables_has_them_converted(tmp_path):
    """The docs trees hold no table; the shared datasets' README (three pipe tables) does."""
    page = shared("README.md")
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "datasets.md").write_text(page.read_text(encoding="utf-8"), encoding="utf-8")
    report = import_docs(DocsImport(tmp_path / "tree", tmp_path / "out", "datasets", "1"))
    assert report.counts["tables"] == sum(line.startswith("|---") for line in page.read_text().splitlines()) == 3
    text = load_draft(tmp_path / "out").documents["datasets"].text
    assert "folder: adi/; docs: 82; queries judged: 35; grades: all 1; source: Glasgow IR test collection" in text
    assert not [line for line in text.splitlines() if line.startswith("|")]


def test_a_reimport_flags_ambiguous_and_unquoted_judgments_and_keeps_one_in_place(tmp_path):
    tree = write_tree(tmp_path / "tree", {"a.md": "# A\n\nAlpha fact.\n\nBeta fact.\n"})
    import_docs(DocsImport(tree, tmp_path / "v1", "docs", "1"))
    text = load_draft(tmp_path / "v1").documents["a"].text
    at = text.index("Beta fact.")
    cases = tmp_path / "v1" / "cases.jsonl"
    rows = [
        {
            "queryId": "same",
            "query": "alpha?",
            "corpusVersion": "",
            "split": "dev",
            "relevant": [{"documentId": "a", "grade": 3, "start": 5, "end": 16, "quote": "Alpha fact."}],
        },
        {
            "queryId": "twice",
            "query": "beta?",
            "corpusVersion": "",
            "split": "dev",
            "relevant": [{"documentId": "a", "grade": 3, "start": at, "end": at + 10, "quote": "Beta fact."}],
        },
        {
            "queryId": "unquoted",
            "query": "by hand?",
            "corpusVersion": "",
            "split": "dev",
            "relevant": [{"documentId": "a", "grade": 1, "start": at, "end": at + 4}, {"documentId": "a", "grade": 2}],
        },
    ]
    corpus_version = load_draft(tmp_path / "v1").spec.corpusVersion
    cases.write_text("".join(json.dumps({**r, "corpusVersion": corpus_version}) + "\n" for r in rows))
    from rageval.benchmark.loading import write_hashes

    write_hashes(tmp_path / "v1")
    assert text[5:16] == "Alpha fact."
    (tree / "a.md").write_text("# A\n\nAlpha fact.\n\nBeta fact.\n\nBeta fact.\n")
    report = import_docs(DocsImport(tree, tmp_path / "v2", "docs", "2", previous=load_benchmark(tmp_path / "v1")))
    assert [m.line() for m in report.judgments] == [
        f"twice: a {at}-{at + 10} -> dropped (ambiguous (2 places))",
        f"unquoted: a {at}-{at + 4} -> dropped (no quote recorded)",
    ]
    new = load_benchmark(tmp_path / "v2")
    by_id = {c.queryId: c for c in new.cases}
    assert by_id["same"].relevant[0].span == (5, 16)  # its text did not move: no change logged
    assert [(j.grade, j.span) for j in by_id["unquoted"].relevant] == [(2, None)]  # the whole-page judgment stays
    assert "twice" not in by_id
    assert [(e.action, e.cases) for e in new.spec.changelog] == [("re-judged", ["unquoted"]), ("retired", ["twice"])]


def test_an_acl_map_with_an_unknown_key_names_its_line(tmp_path):
    from rageval.benchmark.docs.pages import read_acl_map

    acl = tmp_path / "acl.yaml"
    acl.write_text("pages:\n  - match: '*'\n    acls: [x]\n")
    with pytest.raises(BenchmarkError) as caught:
        read_acl_map(acl)
    (problem,) = caught.value.problems
    assert (problem.line, problem.field) == (3, "pages[0].acls") and "unknown key" in problem.message


def test_directives_in_a_list_item_are_converted_at_their_indent(tmp_path):
    (tmp_path / "app.py").write_text("app = App()\n")
    text, context = render(
        "1. Write the app:\n\n    {* app.py *}\n\n2. Read the reference:\n\n    ::: pkg.App\n        :members: run\n",
        folder=tmp_path,
    )
    assert text == (
        "1. Write the app:\n\n    ```python\n    app = App()\n    ```\n\n2. Read the reference:\n\n    `pkg.App`"
    )
    assert context.counts == {"includes": 1, "autodoc": 1}


def test_a_reimport_under_the_previous_version_is_refused_before_writing(tmp_path):
    tree = write_tree(tmp_path / "tree", PAGES)
    import_docs(DocsImport(tree, tmp_path / "v1", "docs", "1"))
    with pytest.raises(BenchmarkError, match="'1' is the version of --previous itself"):
        import_docs(DocsImport(tree, tmp_path / "v1b", "docs", "1", previous=load_draft(tmp_path / "v1")))
    assert not (tmp_path / "v1b").exists()
    report = import_docs(DocsImport(tree, tmp_path / "v2", "docs", "2", previous=load_draft(tmp_path / "v1")))
    assert (report.added, report.changed, report.removed, report.judgments) == ([], [], [], [])
