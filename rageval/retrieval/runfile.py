"""A precomputed run as a retriever, so a production system's output is measured by the same
machinery: TREC (``qid Q0 id rank score tag``) or JSONL (``{"query_id", "score"[, "rank"]}`` and a
hit: ``"id"``, or ``"documentId"`` with ``"start"``/``"end"`` or ``"text"``; see
:mod:`rageval.retrieval.passages`).

IDs may be chunk IDs of this corpus and chunking, or document IDs (the whole document is then the
passage); a JSONL line may instead give the system's own passage, graded on the judged spans at
passage level whatever its chunking. Each query's hits are ordered by score, then by the file's
rank, then by file order; a passage repeated within a query keeps its best place.
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
from rageval.retrieval.passages import HIT_FORMS, PassageFields, problem_text, resolve_hit
from rageval.retrieval.schema import RunFileConfig
from rageval.validation import Slug, valid_rows

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


class RunLine(PassageFields):
    """One line of a JSON-lines run file."""

    query_id: Slug
    score: FiniteFloat
    rank: StrictInt | None = None


def read_run_file(path: Path, form: str) -> pd.DataFrame:
    """``query_id, hit, score, rank, line`` from a TREC or JSONL run; ``hit`` holds each line's
    :class:`PassageFields` (a TREC line's: its ID)."""
    if form == "auto":
        form = "jsonl" if path.suffix in (".jsonl", ".json") else "trec"
    if form == "trec":
        return read_run(path).rename(columns={"doc_id": "hit"})[["query_id", "hit", "score", "rank", "line"]]
    missing = file_problem(path)
    if missing is not None:
        raise InputError(
            replace(
                missing, message=f"run {missing.message}", fix="check the stage's path (relative to the params file)"
            )
        )
    rows, problems = read_jsonl(path)
    lines = [
        (row.query_id, row, row.score, 0 if row.rank is None else row.rank, number)
        for number, row in valid_rows(rows, RunLine, str(path), problems)
    ]
    if not lines and not problems:
        problems.append(
            Problem(
                file=str(path),
                message="no results in the run file",
                fix=f'write {{"query_id": …, "score": …}} lines with a hit: {HIT_FORMS}',
            )
        )
    if problems:
        raise InputError(problems)
    return pd.DataFrame(lines, columns=["query_id", "hit", "score", "rank", "line"])


class RunFileStage:
    def __init__(self, config: RunFileConfig, corpus: Corpus) -> None:
        self.name = config.name
        self.config = config
        path = Path(config.path)
        frame = read_run_file(path, config.format)
        ids: list[str | None] = []
        problems: list[Problem] = []
        for row in frame.itertuples():
            try:
                ids.append(resolve_hit(corpus, row.hit))
            except InputError as exc:
                ids.append(None)
                if len(problems) < 20:
                    problems.append(Problem(file=str(path), line=int(row.line), message=problem_text(exc)))
        unknown = sum(i is None for i in ids)
        if unknown:
            raise InputError(
                problems
                + [
                    Problem(
                        file=str(path),
                        message=f"{unknown} hits name nothing in this corpus",
                        fix="check the run was made on this corpus version (and, for chunk IDs, this chunking)",
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
