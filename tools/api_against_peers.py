"""rageval.evaluate on an ir_measures run and a ranx Run, as they are: values against those libraries' own.

    .venv/bin/python tools/api_against_peers.py ../shared/datasets/trec_eval

The run and qrels: trec_eval's own test files (../shared/datasets/trec_eval/results.test, qrels.test)."""

from __future__ import annotations

import sys

import ir_measures
import ranx

import rageval

base = sys.argv[1]
qrels = {}
for q in ir_measures.read_trec_qrels(f"{base}/qrels.test"):
    qrels.setdefault(q.query_id, {})[q.doc_id] = q.relevance
run = {}
for s in ir_measures.read_trec_run(f"{base}/results.test"):
    run.setdefault(s.query_id, {})[s.doc_id] = s.score
print(f"trec_eval's test files: {len(run)} queries, {sum(map(len, run.values()))} ranked documents")
measures = [ir_measures.nDCG @ 10, ir_measures.AP, ir_measures.RR, ir_measures.P @ 5, ir_measures.R @ 100]
theirs = ir_measures.calc_aggregate(measures, qrels, run)
trec_eval_ties = rageval.ContractOptions(ties="docid-desc")  # trec_eval breaks ties by docno descending
# ir_measures' dict-of-dicts and measure objects, as they are
ours = rageval.evaluate(run, qrels, measures, trec_eval_ties).aggregates
print(f"{'measure':10} {'rageval (dict run)':>19} {'ir_measures':>12} {'|diff|':>9}")
for m in measures:
    print(f"{repr(m):10} {ours[repr(m)]:19.6f} {theirs[m]:12.6f} {abs(ours[repr(m)] - theirs[m]):9.1e}")
names = ["ndcg@10", "map", "mrr", "precision@5", "recall@100"]
r_run, r_qrels = ranx.Run(run), ranx.Qrels(qrels)
ranx_values = ranx.evaluate(r_qrels, r_run, names)
ours_ranx = rageval.evaluate(r_run, r_qrels, ["nDCG@10", "AP", "RR", "P@5", "R@100"], trec_eval_ties).aggregates
print(f"{'measure':10} {'rageval (ranx Run)':>19} {'ranx':>12} {'|diff|':>9}")
for ours_name, name in zip(["nDCG@10", "AP", "RR", "P@5", "R@100"], names, strict=True):
    print(
        f"{ours_name:10} {ours_ranx[ours_name]:19.6f} {ranx_values[name]:12.6f} {abs(ours_ranx[ours_name] - ranx_values[name]):9.1e}"
    )
