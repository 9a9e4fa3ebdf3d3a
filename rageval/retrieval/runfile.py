"""A precomputed run as a retriever, so a production system's output is measured by the same
machinery: TREC (``qid Q0 id rank score tag``) or JSONL (``{"query_id", "id", "score"[, "rank"]}``).

IDs may be chunk IDs of this corpus and chunking, or parent document IDs (then the parent's first
chunk stands for it: right for document-level evaluation). Each query's hits are ordered by score,
then by the file's rank, then by file order; an ID repeated within a query keeps its best place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import pandas as pd
from pydantic import Field, StrictInt

from rageval.benchmark.trec import read_run
from rageval.errors import InputError, Problem
from rageval.io import file_problem, read_jsonl
from rageval.retrieval.base import Corpus, Hit, Query
from rageval.retrieval.schema import RunFileConfig
from rageval.validation import Slug, Strict, valid_rows

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


class RunLine(Strict):
    """One line of a JSON-lines run file."""

    query_id: Slug
    id: Slug
    score: FiniteFloat
    rank: StrictInt | None = None


def read_run_file(path: Path, form: str) -> pd.DataFrame:
    """``query_id, doc_id, score, rank, line`` from a TREC or JSONL run."""
    if form == "auto":
        form = "jsonl" if path.suffix in (".jsonl", ".json") else "trec"
    if form == "trec":
        return read_run(path)[["query_id", "doc_id", "score", "rank", "line"]]
    missing = file_problem(path)
    if missing is not None:
        raise InputError(
            replace(
                missing, message=f"run {missing.message}", fix="check the stage's path (relative to the params file)"
            )
        )
    rows, problems = read_jsonl(path)
    lines = [
        (row.query_id, row.id, row.score, 0 if row.rank is None else row.rank, number)
        for number, row in valid_rows(rows, RunLine, str(path), problems)
    ]
    if not lines and not problems:
        problems.append(
            Problem(
                file=str(path),
                message="no results in the run file",
                fix='write {"query_id": …, "id": …, "score": …} lines',
            )
        )
    if problems:
        raise InputError(problems)
    return pd.DataFrame(lines, columns=["query_id", "doc_id", "score", "rank", "line"])


class RunFileStage:
    def __init__(self, config: RunFileConfig, corpus: Corpus) -> None:
        self.name = config.name
        self.config = config
        path = Path(config.path)
        frame = read_run_file(path, config.format)
        first_chunk: dict[str, str] = {}
        for chunk in corpus.chunks:
            first_chunk.setdefault(chunk.parent_id, chunk.chunk_id)
        ids = frame["doc_id"].map(lambda i: i if i in corpus.position else first_chunk.get(i))
        unknown = frame[ids.isna()]
        if len(unknown):
            raise InputError(
                [
                    Problem(
                        file=str(path),
                        line=int(r.line),
                        field="id",
                        message=f"'{r.doc_id}' is neither a chunk nor a document of this corpus",
                    )
                    for r in unknown.head(20).itertuples()
                ]
                + [
                    Problem(
                        file=str(path),
                        message=f"{len(unknown)} unknown IDs in all",
                        fix="check the run was made on this corpus version and chunking",
                    )
                ]
            )
        frame = frame.assign(chunk_id=ids).sort_values(
            ["query_id", "score", "rank", "line"], ascending=[True, False, True, True], kind="stable"
        )
        frame = frame.drop_duplicates(["query_id", "chunk_id"], keep="first")
        self._hits = {
            qid: [Hit(c, s) for c, s in zip(group["chunk_id"], group["score"].astype(float), strict=True)][
                : config.candidates
            ]
            for qid, group in frame.groupby("query_id", sort=False)
        }

    def __call__(self, query: Query, inputs: Sequence[list[Hit]] = ()) -> list[Hit]:
        return list(self._hits.get(query.query_id, []))
