"""Hostile sizes: what a reader costs stays linear in the input (one huge ID, a long unclosed block)."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from rageval.benchmark.trec import read_run
from rageval.evaluation import ContractOptions, evaluate
from rageval.evaluation.ids import _SHORT, hash_strings


def test_a_five_megabyte_id_costs_linear_time(tmp_path):
    # Hashing document IDs word by word over all rows made one long ID quadratic (minutes).
    path = tmp_path / "run"
    lines = [f"q{i % 20} Q0 d{i} {i // 20 + 1} {1.0 / (i + 1):.6f} t" for i in range(2000)]
    lines.insert(3, f"q0 Q0 {'x' * 5_000_000} 1 9.0 t")
    path.write_text("\n".join(lines) + "\n")
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(20)}
    started = time.perf_counter()
    evaluation = evaluate(read_run(path), qrels, ["nDCG@10"], ContractOptions(duplicates="error"))
    assert time.perf_counter() - started < 5
    assert evaluation.evaluated == 20


def test_long_and_short_ids_hash_by_their_own_bytes_alone():
    texts = ["a" * (_SHORT + 1), "a" * _SHORT, "b" * 10_000, "a" * (_SHORT + 1), "é" * 300, "a" * (_SHORT + 2)]
    whole = hash_strings(pa.array(texts)).tolist()
    assert whole[0] == whole[3] and len(set(whole)) == 5
    for cut in range(1, len(texts)):
        assert hash_strings(pa.array(texts[cut:])).tolist() == whole[cut:]
        assert hash_strings(pa.array(texts, type=pa.large_string()).slice(cut)).tolist() == whole[cut:]


HUGE = 5_000_000


def _huge_inputs() -> list[tuple[str, bytes]]:
    import json

    from readers import BY_NAME, PARAMS

    valid = {name: reader.valid for name, reader in BY_NAME.items()}
    return [
        ("params YAML", PARAMS.replace(b"description: ", b"description: " + b"x" * HUGE + b" ")),
        (
            "documents.jsonl",
            valid["documents.jsonl"] + json.dumps({"id": "big", "title": "", "text": "y" * HUGE}).encode(),
        ),
        ("assessor sheet (CSV)", valid["assessor sheet (CSV)"] + b"i9,q1,," + b"z" * HUGE + b",,,ann,2,\n"),
        ("TREC qrels", valid["TREC qrels"] + b"301 0 " + b"d" * HUGE + b" 1\n"),
        ("BEIR qrels", valid["BEIR qrels"] + b"1\t" + b"d" * HUGE + b"\t1\n"),
        ("TREC topics (SGML)", b"<top>\n" * (HUGE // 6)),
        (
            "TREC documents (import)",
            b"<DOC><DOCNO>FT-9</DOCNO>" + b"<TITLE>" * (HUGE // 7) + b"</DOC>\n" + valid["TREC documents (import)"],
        ),
        ("TREC topics (TSV)", b"1\t" + b"w " * (HUGE // 2) + b"\n"),
    ]


@pytest.mark.parametrize("name,data", _huge_inputs(), ids=[name for name, _ in _huge_inputs()])
def test_a_five_megabyte_value_in_any_format_reads_in_linear_time(name, data):
    from readers import BY_NAME

    started = time.perf_counter()
    BY_NAME[name].run(data)  # loads or refuses with placed problems (a Traceback otherwise)
    assert time.perf_counter() - started < 5
