"""Every reader of a user-written file, with a valid example of its file and the one rule the fuzz
suite holds it to: it loads, or it raises an :class:`~rageval.errors.InputError` whose problems
each name a file and a line or field, never another exception. Shared by ``test_readers.py``
(hypothesis), ``test_oracles.py`` (mutations with a known right answer) and ``table.py`` (the counts).
"""

from __future__ import annotations

import atexit
import csv
import io
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from conftest import write_spec, write_tiny

from rageval.errors import InputError, Problem, RagevalError

ROOT = Path(__file__).resolve().parents[2]
BM25 = ROOT / "params" / "bm25.yaml"
POLICY = ROOT / "params" / "gates" / "release.yaml"
DEMO = ROOT / "rageval" / "demo"

# A problem about a whole file (it is missing, empty or unreadable) has no line to name.
WHOLE_FILE = re.compile(
    r"^(file not found|folder not found|not a folder|is a folder|run file not found|cannot be read|no pool here"
    r"|no \w+( \w+)? in the (run )?file|the file holds no|the file is empty|no split to import|no sheet given)"
)


class Traceback(AssertionError):
    """A reader let another exception through, or raised a problem that names no place."""


@dataclass
class Outcome:
    loaded: bool
    value: Any = None
    problems: list[Problem] = field(default_factory=list)


def outcome(read: Callable[[], Any]) -> Outcome:
    """Run one read; an exception that is not an InputError with placed problems is a Traceback."""
    try:
        return Outcome(True, read())
    except InputError as exc:
        for problem in exc.problems:
            placed = problem.line is not None or problem.field or WHOLE_FILE.match(problem.message)
            if not problem.file or not placed:
                raise Traceback(f"a problem that names no file and line or field: {problem!r}") from exc
        if not exc.problems:
            raise Traceback(f"{type(exc).__name__} without problems: {exc}") from exc
        return Outcome(False, problems=exc.problems)
    except RagevalError as exc:
        raise Traceback(f"{type(exc).__name__} is not an input error: {exc}") from exc
    except Exception as exc:
        raise Traceback(f"{type(exc).__name__}: {exc}") from exc


# --------------------------------------------------------------------------- valid files


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


def csv_bytes(header: list[str], rows: list[dict[str, Any]]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


# The tiny benchmark the tests use (tests/conftest.py), rewritten to its hashes after a mutation.
write_benchmark = write_tiny
rehash = write_spec


def manifest_json() -> bytes:
    from rageval.benchmark.schema import DEFAULT_RUBRIC

    items = [
        {"itemId": "i1", "queryId": "q1", "documentId": "beta", "found": [{"run": "r", "rank": 1}]},
        {"itemId": "i2", "queryId": "q1", "documentId": "gamma", "found": [{"run": "r", "rank": 2}]},
        {"itemId": "i3", "queryId": "q2", "documentId": "alpha", "found": [{"run": "r", "rank": 1}]},
    ]
    manifest = {
        "benchmark": "tiny",
        "version": "1.0.0",
        "cases": "0" * 64,
        "path": "/tmp/tiny",
        "relevanceUnit": "document",
        "split": "dev",
        "depth": 3,
        "seed": 0,
        "created": "2026-01-02",
        "runs": ["r"],
        "rubric": {str(k): v for k, v in DEFAULT_RUBRIC.items()},
        "items": items,
    }
    return (json.dumps(manifest, indent=1) + "\n").encode()


def manifest():
    from rageval.judging.schema import PoolManifest

    return PoolManifest.model_validate(json.loads(manifest_json()))


def sheet_rows() -> list[dict[str, Any]]:
    return [
        {
            "itemId": "i1",
            "queryId": "q1",
            "query": "publish retry",
            "text": "Beta, two\nlines",
            "assessor": "ann",
            "grade": 2,
        },
        {"itemId": "i2", "queryId": "q1", "query": "publish retry", "text": "Gamma", "assessor": "ann", "grade": 0},
        {
            "itemId": "i3",
            "queryId": "q2",
            "query": "webhooks",
            "text": "Alpha",
            "assessor": "ann",
            "grade": 1,
            "notes": "ok",
        },
    ]


def proposal(query: str, chunk: str, grade: int) -> dict[str, Any]:
    return {
        "queryId": query,
        "chunkId": chunk,
        "documentId": "alpha",
        "start": 0,
        "end": 20,
        "grade": grade,
        "overlap": 0.5,
        "sources": [{"documentId": "alpha", "grade": grade, "start": 9, "end": 40, "overlap": 0.5}],
        "fromChunking": "a" * 12,
        "toChunking": "b" * 12,
    }


PARAMS = BM25.read_text(encoding="utf-8").replace("benchmark: ../rageval/demo", f"benchmark: {DEMO}").encode()
SWEEP = (
    f"version: 1\nname: s\nbase: {BM25}\nsplit: dev\n"
    "grid:\n  retrieval.stages.0.k1: [0.9, 1.2]\n"
    "variants:\n  - name: no-stem\n    set: {retrieval.stages.0.tokenizer.stemmer: null}\n"
).encode()
SGML_TOPICS = (
    b"<top>\n<num> Number: 301\n<title> Organized crime\n<desc> Description:\nWhich groups.\n</top>\n"
    b"<top>\n<num> Number: 302\n<title> Polio\n<desc> Description:\nIs it controlled?\n</top>\n"
)
SGML_DOCS = (
    b"<DOC>\n<DOCNO> FT-1 </DOCNO>\n<HEADLINE>Crime</HEADLINE>\n<TEXT>\nCrime text.\n</TEXT>\n</DOC>\n"
    b"<DOC>\n<DOCNO>FT-2</DOCNO>\n<TEXT>Polio text.</TEXT>\n</DOC>\n"
)
TREC_QRELS = b"301 0 FT-1 1\n301 0 FT-2 0\n302 0 FT-2 2\n"
BEIR_CORPUS = jsonl(
    [
        {"_id": "d1", "title": "Cats", "text": "Cats sleep a lot.", "metadata": {}},
        {"_id": "d2", "title": "", "text": "Dogs bark."},
    ]
)
BEIR_QUERIES = jsonl(
    [{"_id": "1", "text": "why do cats sleep"}, {"_id": "2", "text": "barking"}, {"_id": "3", "text": "x"}]
)
BEIR_QRELS = b"query-id\tcorpus-id\tscore\n1\td1\t1\n2\td2\t2\n"


# --------------------------------------------------------------------------- the readers


@dataclass
class Reader:
    """One file type: ``files`` are the valid files of a folder (by relative path), ``target`` the
    one mutated, ``read(folder)`` reads it (with whatever the others give) and returns a value that
    compares equal for equal content."""

    name: str
    kind: str  # yaml, json, jsonl, csv, lines
    target: str
    files: Callable[[], dict[str, bytes]]
    read: Callable[[Path], Any]
    empty_ok: bool = False  # an empty file is a legitimate input (nothing to add)
    conflict: Callable[[bytes], bytes] | None = None  # valid bytes → records that contradict each other
    prepare: Callable[[Path], None] | None = None  # after the target is written (e.g. record hashes)
    _folder: Path | None = None

    def folder(self) -> Path:
        if self._folder is None:
            slug = re.sub(r"\W+", "-", self.name)
            self._folder = Path(tempfile.mkdtemp(prefix=f"rageval-fuzz-{slug}-"))
            atexit.register(shutil.rmtree, self._folder, True)
            for name, data in self.files().items():
                (self._folder / name).parent.mkdir(parents=True, exist_ok=True)
                (self._folder / name).write_bytes(data)
        return self._folder

    @property
    def valid(self) -> bytes:
        return self.files()[self.target]

    def run(self, data: bytes) -> Outcome:
        """Write ``data`` as the target file and read it (see :func:`outcome`)."""
        folder = self.folder()
        (folder / self.target).write_bytes(data)
        if self.prepare:
            self.prepare(folder)
        return outcome(lambda: self.read(folder))


def _benchmark_value(root: Path) -> Any:
    from rageval.benchmark.loading import load_benchmark

    bench = load_benchmark(root)
    return (bench.spec.model_dump(exclude={"files"}), bench.documents, bench.cases)


def _benchmark_files() -> dict[str, bytes]:
    with tempfile.TemporaryDirectory() as tmp:
        root = write_benchmark(Path(tmp) / "b")
        return {name: (root / name).read_bytes() for name in ("benchmark.yaml", "documents.jsonl", "cases.jsonl")}


def _versioned_files() -> dict[str, bytes]:
    """Version 1.0.0 and its successor 1.0.1: one case re-judged, a changelog, a label chunking."""
    from rageval.benchmark.chunking import config_hash
    from rageval.benchmark.loading import load_benchmark
    from rageval.benchmark.schema import ChangelogEntry, ChunkingConfig, Judgment
    from rageval.benchmark.versions import write_version

    with tempfile.TemporaryDirectory() as tmp:
        first = load_benchmark(write_benchmark(Path(tmp) / "v1"))
        cases = [
            c.model_copy(update={"relevant": [Judgment(documentId="beta", grade=3)]}) if c.queryId == "q2" else c
            for c in first.cases
        ]
        entry = ChangelogEntry(version="1.0.1", date="2026-01-02", action="re-judged", cases=["q2"], reason="beta")
        chunking = ChunkingConfig(size=120, overlap=20)
        label = {"hash": config_hash(chunking), "config": chunking.model_dump(mode="json")}
        write_version(
            first, "1.0.1", cases=cases, changes=[entry], spec_updates={"labelChunking": label}, out=Path(tmp) / "v2"
        )
        return {
            f"{version}/{name}": (Path(tmp) / version / name).read_bytes()
            for version in ("v1", "v2")
            for name in ("benchmark.yaml", "documents.jsonl", "cases.jsonl")
        }


def _versioned_value(folder: Path) -> Any:
    return _benchmark_value(folder / "v2")


def _rehash_v2(folder: Path) -> None:
    from rageval.benchmark.loading import hash_files

    spec = yaml.safe_load((folder / "v2" / "benchmark.yaml").read_text())
    spec["files"] = hash_files(folder / "v2")
    (folder / "v2" / "benchmark.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))


def _read_params(folder: Path) -> Any:
    from rageval.config.load import load_config

    return load_config(folder / "params.yaml").model_dump()


def _read_sweep(folder: Path) -> Any:
    from rageval.config.sweep import load_sweep

    return [(m.name, m.overrides, m.config.model_dump()) for m in load_sweep(folder / "sweep.yaml").members]


def _read_policy(folder: Path) -> Any:
    from rageval.analysis.gate import load_policy

    return load_policy(folder / "policy.yaml").model_dump()


def _read_chunking(folder: Path) -> Any:
    from rageval.benchmark.migration import load_chunking

    return load_chunking(folder / "chunking.yaml").model_dump()


def _read_qrels(folder: Path) -> Any:
    from rageval.benchmark.trec import read_qrels

    return read_qrels(folder / "qrels.txt")


def _read_run(folder: Path) -> Any:
    from rageval.benchmark.trec import read_qrels_and_run

    qrels, run = read_qrels_and_run(folder / "qrels.txt", folder / "run.txt")
    return qrels, run.to_dict("list")


def _read_topics(name: str) -> Callable[[Path], Any]:
    def read(folder: Path) -> Any:
        from rageval.benchmark.trec import read_topics

        return read_topics(folder / name, field="title+desc")

    return read


def _import(folder: Path, run: Callable[[Path], Path]) -> Any:
    from rageval.benchmark.loading import load_benchmark

    out = Path(tempfile.mkdtemp(prefix="rageval-fuzz-out-")) / "out"
    try:
        bench = load_benchmark(run(out))
        return bench.spec.model_dump(exclude={"files", "description"}), bench.documents, bench.cases
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


def _read_beir(folder: Path) -> Any:
    from rageval.benchmark.beir import BeirImport, import_beir

    return _import(
        folder,
        lambda out: import_beir(
            BeirImport(
                source=folder / "beir",
                out=out,
                name="toy",
                version="1",
                splits={"test": "dev"},
                corpus_version="toy-1",
            )
        ),
    )


def _read_trec_docs(folder: Path) -> Any:
    from rageval.benchmark.importers import TrecImport, import_trec

    return _import(
        folder,
        lambda out: import_trec(
            TrecImport(
                topics=folder / "topics.sgml",
                qrels=folder / "qrels.txt",
                documents=folder / "docs.sgml",
                out=out,
                name="trec",
                version="1",
                corpus_version="trec-1",
            )
        ),
    )


def _read_sheet(name: str) -> Callable[[Path], Any]:
    def read(folder: Path) -> Any:
        from rageval.judging import import_sheets

        return import_sheets(manifest(), [folder / name]).to_dict("list")

    return read


def _read_adjudication(name: str) -> Callable[[Path], Any]:
    def read(folder: Path) -> Any:
        from rageval.judging import read_adjudication

        return [(line, row.model_dump()) for line, row in read_adjudication(folder / name, manifest())]

    return read


def _read_review(folder: Path) -> Any:
    from rageval.benchmark.migration import read_review

    return [(line, row.model_dump()) for line, row in read_review(folder / "chunk-labels.jsonl")]


def _read_extra(folder: Path) -> Any:
    from rageval.benchmark.loading import load_benchmark
    from rageval.judging import read_extra

    bench = load_benchmark(folder / "bench")
    return [(line, item.model_dump()) for line, item in read_extra(folder / "extra.jsonl", bench, "dev")]


def _read_pool(folder: Path) -> Any:
    from rageval.judging import read_pool

    return read_pool(folder / "pool.json").model_dump()


def _read_labels(folder: Path) -> Any:
    from rageval.judging import read_labels

    return read_labels(folder / "labels.jsonl").to_dict("list")


def _read_runfile(folder: Path) -> Any:
    from rageval.retrieval.runfile import read_run_file

    return read_run_file(folder / "run.jsonl", "jsonl").to_dict("list")


def _in(prefix: str, files: dict[str, bytes]) -> dict[str, bytes]:
    return {f"{prefix}/{name}": data for name, data in files.items()}


def _repeat_last_line(data: bytes, change: Callable[[bytes], bytes]) -> bytes:
    lines = data.rstrip(b"\n").split(b"\n")
    return data.rstrip(b"\n") + b"\n" + change(lines[-1]) + b"\n"


def _regrade_trec(line: bytes) -> bytes:
    parts = line.split()
    return b" ".join([*parts[:3], str(int(parts[3]) + 1).encode()])


def _regrade_beir(line: bytes) -> bytes:
    qid, did, score = line.split(b"\t")
    return b"\t".join([qid, did, str((int(score) + 1) % 4).encode()])


def _regrade_json(key: str, value: Any) -> Callable[[bytes], bytes]:
    def change(line: bytes) -> bytes:
        row = json.loads(line)
        row[key] = value
        return json.dumps(row).encode()

    return change


def _case_judged_twice(data: bytes) -> bytes:
    rows = [json.loads(line) for line in data.splitlines()]
    rows[1]["relevant"].append({"documentId": "beta", "grade": 0})
    return jsonl(rows)


def _yaml_duplicate(data: bytes) -> bytes:
    """The first top-level key given again at the end (with another value)."""
    first = next(line for line in data.decode().splitlines() if re.match(r"^[A-Za-z_]\w*:", line))
    key = first.split(":", 1)[0]
    return data.rstrip(b"\n") + f"\n{key}: 2\n".encode()


def _rehash_bench(folder: Path) -> None:
    rehash(folder)


READERS: list[Reader] = [
    Reader("benchmark.yaml", "yaml", "benchmark.yaml", _benchmark_files, _benchmark_value, conflict=_yaml_duplicate),
    Reader(
        "documents.jsonl",
        "jsonl",
        "documents.jsonl",
        _benchmark_files,
        _benchmark_value,
        conflict=lambda d: _repeat_last_line(d, _regrade_json("title", "Other")),
        prepare=_rehash_bench,
    ),
    Reader(
        "cases.jsonl",
        "jsonl",
        "cases.jsonl",
        _benchmark_files,
        _benchmark_value,
        conflict=_case_judged_twice,
        prepare=_rehash_bench,
    ),
    Reader(
        "benchmark.yaml (a version n+1)",
        "yaml",
        "v2/benchmark.yaml",
        _versioned_files,
        _versioned_value,
        conflict=_yaml_duplicate,
    ),
    Reader(
        "cases.jsonl (a version n+1)",
        "jsonl",
        "v2/cases.jsonl",
        _versioned_files,
        _versioned_value,
        conflict=_case_judged_twice,
        prepare=_rehash_v2,
    ),
    Reader(
        "params YAML", "yaml", "params.yaml", lambda: {"params.yaml": PARAMS}, _read_params, conflict=_yaml_duplicate
    ),
    Reader("sweep YAML", "yaml", "sweep.yaml", lambda: {"sweep.yaml": SWEEP}, _read_sweep, conflict=_yaml_duplicate),
    Reader(
        "gate policy YAML",
        "yaml",
        "policy.yaml",
        lambda: {"policy.yaml": POLICY.read_bytes()},
        _read_policy,
        conflict=_yaml_duplicate,
    ),
    Reader(
        "chunking YAML",
        "yaml",
        "chunking.yaml",
        lambda: {"chunking.yaml": b"method: markdown\ntokenizer: words\nsize: 120\noverlap: 20\n"},
        _read_chunking,
        conflict=_yaml_duplicate,
    ),
    Reader(
        "TREC qrels",
        "lines",
        "qrels.txt",
        lambda: {"qrels.txt": TREC_QRELS},
        _read_qrels,
        conflict=lambda d: _repeat_last_line(d, _regrade_trec),
    ),
    Reader(
        "TREC run",
        "lines",
        "run.txt",
        lambda: {
            "qrels.txt": TREC_QRELS,
            "run.txt": b"301 Q0 FT-1 1 2.5 t\n301 Q0 FT-2 2 1.5 t\n302 Q0 FT-2 1 0.5 t\n",
        },
        _read_run,
    ),
    Reader(
        "TREC topics (SGML)", "lines", "topics.sgml", lambda: {"topics.sgml": SGML_TOPICS}, _read_topics("topics.sgml")
    ),
    Reader(
        "TREC topics (TSV)",
        "lines",
        "topics.tsv",
        lambda: {"topics.tsv": b"301\tOrganized crime\n302\tPolio\n"},
        _read_topics("topics.tsv"),
        conflict=lambda d: d + b"301\tSomething else\n",
    ),
    Reader(
        "TREC documents (import)",
        "lines",
        "docs.sgml",
        lambda: {"docs.sgml": SGML_DOCS, "topics.sgml": SGML_TOPICS, "qrels.txt": TREC_QRELS},
        _read_trec_docs,
    ),
    *(
        Reader(
            f"BEIR {what}",
            kind,
            f"beir/{target}",
            lambda: _in(
                "beir", {"corpus.jsonl": BEIR_CORPUS, "queries.jsonl": BEIR_QUERIES, "qrels/test.tsv": BEIR_QRELS}
            ),
            _read_beir,
            conflict=conflict,
        )
        for what, kind, target, conflict in (
            ("corpus.jsonl", "jsonl", "corpus.jsonl", lambda d: _repeat_last_line(d, _regrade_json("text", "x"))),
            ("queries.jsonl", "jsonl", "queries.jsonl", lambda d: _repeat_last_line(d, _regrade_json("text", "y"))),
            ("qrels", "lines", "qrels/test.tsv", lambda d: _repeat_last_line(d, _regrade_beir)),
        )
    ),
    Reader(
        "assessor sheet (CSV)",
        "csv",
        "sheet.csv",
        lambda: {
            "sheet.csv": csv_bytes(
                ["itemId", "queryId", "query", "title", "text", "rubric", "assessor", "grade", "notes"], sheet_rows()
            )
        },
        _read_sheet("sheet.csv"),
        conflict=lambda d: d + b"i1,q1,,,,,ann,3,\n",
    ),
    Reader(
        "assessor sheet (JSONL)",
        "jsonl",
        "sheet.jsonl",
        lambda: {"sheet.jsonl": jsonl(sheet_rows())},
        _read_sheet("sheet.jsonl"),
        conflict=lambda d: _repeat_last_line(d, _regrade_json("grade", 3)),
    ),
    Reader(
        "adjudication (CSV)",
        "csv",
        "adjudication.csv",
        lambda: {"adjudication.csv": b"itemId,grade,note\ni1,2,agreed\ni3,0,\n"},
        _read_adjudication("adjudication.csv"),
        empty_ok=True,
        conflict=lambda d: d + b"i1,3,again\n",
    ),
    Reader(
        "adjudication (JSONL)",
        "jsonl",
        "adjudication.jsonl",
        lambda: {
            "adjudication.jsonl": jsonl([{"itemId": "i1", "grade": 2, "note": "agreed"}, {"itemId": "i3", "grade": 0}])
        },
        _read_adjudication("adjudication.jsonl"),
        empty_ok=True,
        conflict=lambda d: _repeat_last_line(d, _regrade_json("grade", 1)),
    ),
    Reader(
        "label-review sheet",
        "jsonl",
        "chunk-labels.jsonl",
        lambda: {
            "chunk-labels.jsonl": jsonl(
                [proposal("q1", "alpha#" + "b" * 12 + "-0", 3), proposal("q2", "alpha#" + "b" * 12 + "-1", 1)]
            )
        },
        _read_review,
        empty_ok=True,
        conflict=lambda d: _repeat_last_line(d, _regrade_json("grade", 0)),
    ),
    Reader(
        "pool extras (--add)",
        "jsonl",
        "extra.jsonl",
        lambda: {
            **_in("bench", _benchmark_files()),
            "extra.jsonl": jsonl(
                [
                    {"queryId": "q1", "documentId": "beta"},
                    {"queryId": "q2", "documentId": "alpha", "start": 0, "end": 5},
                ]
            ),
        },
        _read_extra,
        empty_ok=True,
    ),
    Reader("pool.json", "json", "pool.json", lambda: {"pool.json": manifest_json()}, _read_pool),
    Reader(
        "labels.jsonl",
        "jsonl",
        "labels.jsonl",
        lambda: {
            "labels.jsonl": jsonl(
                [
                    {"itemId": "i1", "queryId": "q1", "assessor": "ann", "grade": 2, "notes": "", "source": "s.csv:2"},
                    {"itemId": "i1", "queryId": "q1", "assessor": "bob", "grade": 1},
                ]
            )
        },
        _read_labels,
        empty_ok=True,
    ),
    Reader(
        "JSONL run file",
        "jsonl",
        "run.jsonl",
        lambda: {
            "run.jsonl": jsonl(
                [
                    {"query_id": "q1", "id": "alpha", "score": 2.5, "rank": 1},
                    {"query_id": "q1", "id": "beta", "score": 1},
                ]
            )
        },
        _read_runfile,
    ),
]

BY_NAME = {reader.name: reader for reader in READERS}


def read_overrides(overrides: list[str]) -> Outcome:
    """``--set`` overrides on the shipped BM25 params file."""
    from rageval.config.load import load_config

    return outcome(lambda: load_config(BM25, overrides).model_dump())
