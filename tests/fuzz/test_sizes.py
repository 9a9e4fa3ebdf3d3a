"""Hostile sizes: what a reader costs stays linear in the input (one huge ID, a long unclosed block)."""

from __future__ import annotations

import time

import pyarrow as pa

from rageval.benchmark.trec import read_run
from rageval.evaluation import evaluate
from rageval.evaluation.ids import _SHORT, hash_strings


def test_a_five_megabyte_id_costs_linear_time(tmp_path):
    # Hashing document IDs word by word over all rows made one long ID quadratic (minutes).
    path = tmp_path / "run"
    lines = [f"q{i % 20} Q0 d{i} {i // 20 + 1} {1.0 / (i + 1):.6f} t" for i in range(2000)]
    lines.insert(3, f"q0 Q0 {'x' * 5_000_000} 1 9.0 t")
    path.write_text("\n".join(lines) + "\n")
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(20)}
    started = time.perf_counter()
    evaluation = evaluate(read_run(path), qrels, ["nDCG@10"], duplicates="error")
    assert time.perf_counter() - started < 5
    assert evaluation.evaluated == 20


def test_long_and_short_ids_hash_by_their_own_bytes_alone():
    texts = ["a" * (_SHORT + 1), "a" * _SHORT, "b" * 10_000, "a" * (_SHORT + 1), "é" * 300, "a" * (_SHORT + 2)]
    whole = hash_strings(pa.array(texts)).tolist()
    assert whole[0] == whole[3] and len(set(whole)) == 5
    for cut in range(1, len(texts)):
        assert hash_strings(pa.array(texts[cut:])).tolist() == whole[cut:]
        assert hash_strings(pa.array(texts, type=pa.large_string()).slice(cut)).tolist() == whole[cut:]
