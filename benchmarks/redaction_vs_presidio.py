"""rageval's regex detectors against Presidio's pattern recognizers on a labelled log (recall per
type, false positives, ms per query): the measurement behind docs/queries.md's choice.

Presidio is not a dependency: install it into a venv of its own (it pulls spaCy, ~400 MB; its
default AnalyzerEngine downloads a model, so only the pattern recognizers are used), then
    PYTHONPATH=. /tmp/presidio-venv/bin/python benchmarks/redaction_vs_presidio.py \
        params/queries/redaction-eval.jsonl [regex] [presidio]
The labelled log is simulated (written for this test), not user data."""

import json
import sys
import time
from collections import Counter

rows = [json.loads(line) for line in open(sys.argv[1])]
TYPES = ["email", "phone", "card", "iban", "secret", "url-credentials"]


def score(name, spans_of):
    t0 = time.perf_counter()
    spans = [spans_of(r["text"]) for r in rows]
    first = time.perf_counter() - t0
    n = 20
    t0 = time.perf_counter()
    for _ in range(n):
        for r in rows:
            spans_of(r["text"])
    per_q = (time.perf_counter() - t0) / (n * len(rows)) * 1e3
    hit, total, fp, tp_spans, all_spans = Counter(), Counter(), 0, 0, 0
    for r, found in zip(rows, spans, strict=True):
        labels = []
        for s in r["secrets"]:
            a = r["text"].index(s["value"])
            b = a + len(s["value"])
            labels.append((a, b))
            total[s["type"]] += 1
            # recalled: every character of the secret lies inside detected spans (of any type)
            covered = set()
            for x, y, _ in found:
                covered.update(range(x, y))
            if all(i in covered for i in range(a, b)):
                hit[s["type"]] += 1
        for x, y, _ in found:
            all_spans += 1
            if any(x < b and a < y for a, b in labels):
                tp_spans += 1
            else:
                fp += 1
    print(f"## {name}")
    for t in TYPES:
        print(f"  {t:16} recall {hit[t]}/{total[t]}")
    print(
        f"  all              recall {sum(hit.values())}/{sum(total.values())} = {sum(hit.values()) / sum(total.values()):.3f}"
    )
    print(f"  spans {all_spans}, false positives {fp}, precision {tp_spans / max(all_spans, 1):.3f}")
    print(f"  {per_q:.3f} ms/query (mean of {n} passes over {len(rows)} queries); first pass {first * 1e3:.0f} ms")
    return fp


which = sys.argv[2:] or ["regex", "presidio"]
if "regex" in which:
    from rageval.benchmark.redaction import Redactor

    red = Redactor()
    score("rageval-regex v1", red.spans)
if "presidio" in which:
    t0 = time.perf_counter()
    from presidio_analyzer.predefined_recognizers import (
        CreditCardRecognizer,
        EmailRecognizer,
        IbanRecognizer,
        PhoneRecognizer,
        UrlRecognizer,
    )

    recs = [EmailRecognizer(), PhoneRecognizer(), CreditCardRecognizer(), IbanRecognizer(), UrlRecognizer()]
    print(f"presidio import + recognizers: {(time.perf_counter() - t0) * 1e3:.0f} ms")

    def pres(text, threshold=0.0):
        out = []
        for r in recs:
            for res in r.analyze(text, r.supported_entities, None):
                if res.score >= threshold:
                    out.append((res.start, res.end, res.entity_type))
        return out

    score("presidio pattern recognizers (score >= 0)", pres)
    score("presidio pattern recognizers (score >= 0.5)", lambda t: pres(t, 0.5))
