"""rageval's hand-written statistics against the reference libraries: same inputs, values checked,
seconds per call.

    python benchmarks/stats_libraries.py                # 3 repeats
    python benchmarks/stats_libraries.py --repeats 5 --seconds 0.5

Per function and input size (the sizes rageval sees: 5-300 paired per-query scores, 10,000
resamples or sign patterns, a few dozen p-values, 20-300 items graded 0-3 by 2-6 assessors), it
times the hand-written version ("ours"), the library called as rageval would have to call it
(converting rageval's inputs included) and the function rageval ships now ("rageval": the same as
ours where ours is kept, the wrapper around the library where it was replaced). Each repeat times
all three, one after the other, on calls enough to fill ``--seconds``; printed are the min and the
median over the repeats of the seconds per call, and library / ours and rageval / ours of both.
Before timing, the values are compared (max abs difference; Monte-Carlo p-values from the
library's own draws are printed beside ours, not compared).

The import cost of each library is measured in a fresh interpreter that has already imported
numpy and pandas (as every rageval process has), min and median over the repeats.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import krippendorff
import numpy as np
from scipy import stats as scipy_stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa
from statsmodels.stats.multitest import multipletests

from rageval.evaluation import agreement, stats

GRADES = [0, 1, 2, 3]
IMPORTS = (
    "scipy.stats",
    "statsmodels.stats.multitest",
    "statsmodels.stats.inter_rater",
    "sklearn.metrics",
    "krippendorff",
)


# ---------------------------------------------------------------- the hand-written version replaced
# rageval.evaluation.agreement computed ordinal alpha by hand until it called krippendorff; kept here
# verbatim so that the comparison that decided it can be run again.


def handwritten_krippendorff_alpha_ordinal(
    units: Sequence[Sequence[int]], categories: Sequence[int] | None = None
) -> float:
    pairable = [list(unit) for unit in units if len(unit) >= 2]
    if not pairable:
        return float("nan")
    categories = sorted({v for unit in pairable for v in unit}) if categories is None else list(categories)
    k = len(categories)
    coincidences = np.zeros((k, k))
    for unit in pairable:
        counts = np.bincount(agreement._index(categories, unit), minlength=k).astype(float)
        coincidences += (np.outer(counts, counts) - np.diag(counts)) / (len(unit) - 1)
    totals = coincidences.sum(axis=1)
    n = totals.sum()
    cumulative = np.concatenate([[0.0], np.cumsum(totals)])
    low, high = np.minimum.outer(np.arange(k), np.arange(k)), np.maximum.outer(np.arange(k), np.arange(k))
    delta = (cumulative[high + 1] - cumulative[low] - (totals[:, None] + totals[None, :]) / 2) ** 2
    expected = float((np.outer(totals, totals) * delta).sum())
    if expected == 0:
        return float("nan")
    return float(1 - (n - 1) * float((coincidences * delta).sum()) / expected)


# ---------------------------------------------------------------- the library, called as rageval would


def mean_difference(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    return np.mean(y - x, axis=axis)


def scipy_randomization(a: np.ndarray, b: np.ndarray, samples: int, seed: int) -> float:
    result = scipy_stats.permutation_test(
        (a, b),
        mean_difference,
        permutation_type="samples",
        vectorized=True,
        n_resamples=samples,
        rng=np.random.default_rng(seed),
    )
    return float(result.pvalue)


def scipy_bootstrap(values: np.ndarray, resamples: int, seed: int) -> tuple[float, float]:
    result = scipy_stats.bootstrap(
        (values,), np.mean, n_resamples=resamples, method="percentile", vectorized=True, rng=np.random.default_rng(seed)
    )
    return (float(result.confidence_interval.low), float(result.confidence_interval.high))


def krippendorff_from_units(units: Sequence[Sequence[int]], categories: Sequence[int]) -> float:
    counts = np.stack([np.bincount(unit, minlength=len(categories)) for unit in units])
    return float(krippendorff.alpha(value_counts=counts, value_domain=categories, level_of_measurement="ordinal"))


# ---------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    function: str
    library: str
    size: str
    ours: Callable[[], object]
    lib: Callable[[], object]
    rageval: Callable[[], object]
    compare: bool = True  # False: Monte-Carlo values from different draws, printed only


def paired_scores(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-query scores in [0, 1]: a third 0, the candidate unchanged on 40% of the queries."""
    base = np.where(rng.random(n) < 1 / 3, 0.0, rng.random(n))
    cand = np.where(rng.random(n) < 0.4, base, np.clip(base + rng.normal(0.03, 0.15, n), 0, 1))
    return base, cand


def grade_sheet(rng: np.random.Generator, items: int, assessors: int) -> np.ndarray:
    truth = rng.choice(GRADES, size=items, p=[0.5, 0.25, 0.15, 0.1])
    other = rng.choice(GRADES, size=(items, assessors), p=[0.5, 0.25, 0.15, 0.1])
    return np.where(rng.random((items, assessors)) < 0.3, other, truth[:, None])


def cases(seed: int) -> list[Case]:
    rng = np.random.default_rng(seed)
    out: list[Case] = []
    for n in (5, 31, 300):
        _, values = paired_scores(rng, n)
        out.append(
            Case(
                "bootstrap_ci",
                "scipy.stats.bootstrap",
                f"n={n}, B=10000",
                lambda v=values: stats.bootstrap_ci(v, resamples=10_000, seed=seed),
                lambda v=values: scipy_bootstrap(v, 10_000, seed),
                lambda v=values: stats.bootstrap_ci(v, resamples=10_000, seed=seed),
            )
        )
    for n, exact in ((5, True), (13, True), (31, False), (300, False)):
        a, b = paired_scores(rng, n)
        out.append(
            Case(
                "paired_randomization",
                "scipy.stats.permutation_test",
                f"n={n}, {'exact' if exact else 'B=10000'}",
                lambda a=a, b=b: stats.paired_randomization(a, b, samples=10_000, seed=seed),
                lambda a=a, b=b: scipy_randomization(a, b, 10_000, seed),
                lambda a=a, b=b: stats.paired_randomization(a, b, samples=10_000, seed=seed),
                compare=exact,
            )
        )
    for m in (8, 40):
        p = rng.random(m)
        out.append(
            Case(
                "holm",
                "statsmodels multipletests(holm)",
                f"m={m}",
                lambda p=p: stats.holm(p),
                lambda p=p: multipletests(p, method="holm")[1],
                lambda p=p: stats.holm(p),
            )
        )
    for items in (20, 300):
        sheet = grade_sheet(rng, items, 2)
        a, b = sheet[:, 0].tolist(), sheet[:, 1].tolist()
        out.append(
            Case(
                "cohen_kappa",
                "sklearn cohen_kappa_score",
                f"items={items}",
                lambda a=a, b=b: agreement.cohen_kappa(a, b, GRADES),
                lambda a=a, b=b: cohen_kappa_score(a, b, labels=GRADES),
                lambda a=a, b=b: agreement.cohen_kappa(a, b, GRADES),
            )
        )
    for items, assessors in ((20, 3), (300, 6)):
        counts = np.stack([np.bincount(row, minlength=4) for row in grade_sheet(rng, items, assessors)])
        out.append(
            Case(
                "fleiss_kappa",
                "statsmodels fleiss_kappa",
                f"items={items}, assessors={assessors}",
                lambda c=counts: agreement.fleiss_kappa(c),
                lambda c=counts: statsmodels_fleiss_kappa(c, method="fleiss"),
                lambda c=counts: agreement.fleiss_kappa(c),
            )
        )
    for items, assessors in ((20, 3), (300, 6)):
        sheet = grade_sheet(rng, items, assessors)
        absent = rng.random(sheet.shape) < 0.4
        units = [
            [int(g) for g, gone in zip(row, gaps, strict=True) if not gone]
            for row, gaps in zip(sheet, absent, strict=True)
        ]
        out.append(
            Case(
                "krippendorff_alpha_ordinal",
                "krippendorff.alpha(ordinal)",
                f"items={items}, assessors≤{assessors}, 40% missing",
                lambda u=units: handwritten_krippendorff_alpha_ordinal(u, GRADES),
                lambda u=units: krippendorff_from_units(u, GRADES),
                lambda u=units: agreement.krippendorff_alpha_ordinal(u, GRADES),
            )
        )
    return out


# ---------------------------------------------------------------- measuring


def difference(x: object, y: object) -> float:
    return float(np.max(np.abs(np.asarray(x, dtype=float) - np.asarray(y, dtype=float))))


def per_call(function: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - start) / calls


def import_seconds(module: str) -> float:
    code = f"import numpy, pandas, time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def summary(values: list[float]) -> str:
    return f"{min(values):.2e} / {statistics.median(values):.2e}"


def ratio(top: list[float], bottom: list[float]) -> str:
    return f"{min(top) / min(bottom):.2f} / {statistics.median(top) / statistics.median(bottom):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.3, help="time to fill per function per repeat")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    print("values (max abs difference: library vs ours, rageval vs ours)")
    for case in cases(args.seed):
        ours, lib, now = case.ours(), case.lib(), case.rageval()
        if case.compare:
            print(f"  {case.function:<27} {case.size:<36} {difference(lib, ours):.1e}  {difference(now, ours):.1e}")
        else:
            print(f"  {case.function:<27} {case.size:<36} p ours {ours:.4f}, library {lib:.4f} (other draws)")

    start = time.perf_counter()
    gc.collect()
    print(f"\ngc.collect() in this process (multipletests calls it for Holm): {time.perf_counter() - start:.2e} s")

    header = f"{'function':<27} {'size':<36} {'ours s/call':>19} {'library s/call':>19} {'rageval s/call':>19} {'lib/ours':>11} {'rageval/ours':>12}"
    print(f"\nseconds per call, min / median of {args.repeats} repeats; ratios min / median\n{header}")
    for case in cases(args.seed):
        calls = {}
        for name, function in (("ours", case.ours), ("lib", case.lib), ("rageval", case.rageval)):
            calls[name] = max(1, int(args.seconds / max(per_call(function, 1), 1e-7)))
        times: dict[str, list[float]] = {"ours": [], "lib": [], "rageval": []}
        for _ in range(args.repeats):
            for name, function in (("ours", case.ours), ("lib", case.lib), ("rageval", case.rageval)):
                times[name].append(per_call(function, calls[name]))
        print(
            f"{case.function:<27} {case.size:<36} {summary(times['ours']):>19} {summary(times['lib']):>19}"
            f" {summary(times['rageval']):>19} {ratio(times['lib'], times['ours']):>11}"
            f" {ratio(times['rageval'], times['ours']):>12}"
        )

    print(f"\nimport cost after numpy and pandas, seconds, min / median of {args.repeats} fresh interpreters")
    for module in IMPORTS:
        seconds = [import_seconds(module) for _ in range(args.repeats)]
        print(f"  {module:<32} {summary(seconds)}")


if __name__ == "__main__":
    main()
