"""Non-inferiority of a candidate to the baseline on one measure (or one critical slice), the two
rules of :data:`rageval.analysis.gate_policy.NONINFERIORITY_RULES`:

- ``max_loss``: the plain delta. A mean loss beyond the margin fails whether or not a test calls it
  significant: on a 20-query release set a real loss rarely is.
- ``ci_lower_above``: non-inferiority as a clinical trial shows it. The lower bound of the two-sided
  bootstrap interval of the mean delta (candidate − baseline) must lie above ``-margin``; with a
  95% interval that is the one-sided 97.5% bound. A small set gives a wide interval, so this rule
  asks for evidence where ``max_loss`` asks only for the point estimate.

Both are absolute, in the measure's own units (nDCG points), like ``tolerance`` and the slices'
``min``: a relative margin would allow nothing on a slice whose baseline is near 0.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from rageval.analysis.gate_policy import NONINFERIORITY_RULES, NonInferiority, RuleResult
from rageval.evaluation.stats import bootstrap_ci

_EPS = 1e-12  # a loss equal to the margin passes despite float rounding


def _max_loss(said: str, loss: float, low: float, limit: float, tested: str) -> tuple[bool, str]:
    if loss <= _EPS:
        return True, f"{said}: no loss (max_loss {limit:g})"
    if loss <= limit + _EPS:
        return True, f"{said}: loss {loss:+.4f} within the max_loss {limit:g}"
    return False, f"{said}: loss {loss:+.4f} beyond the max_loss {limit:g}, which fails it significant or not{tested}"


def _ci_lower_above(said: str, loss: float, low: float, limit: float, tested: str) -> tuple[bool, str]:
    margin = f"non-inferiority within the margin {abs(limit):g}"
    if low > limit:
        return True, f"{said}: the interval's lower bound {low:+.4f} lies above {limit:g}: {margin} shown"
    return False, f"{said}: the interval's lower bound {low:+.4f} is not above {limit:g}: {margin} not shown"


# One check per rule name; tests hold the keys equal to NONINFERIORITY_RULES.
CHECKS: dict[str, Callable[[str, float, float, float, str], tuple[bool, str]]] = {
    "max_loss": _max_loss,
    "ci_lower_above": _ci_lower_above,
}


def noninferiority_rules(
    label: str,
    pair: pd.DataFrame,
    rule: NonInferiority,
    *,
    confidence: float,
    resamples: int,
    seed: int,
    tested: str = "",
) -> list[RuleResult]:
    """A row per rule ``rule`` sets, labelled ``"<label> <rule name>"``, over ``pair`` (columns
    ``baseline`` and ``candidate``, a row per query both runs evaluated; not empty). ``tested``:
    what the significance test said, for the reason (measures have one, slices do not)."""
    limits = {name: getattr(rule, name) for name in NONINFERIORITY_RULES if getattr(rule, name) is not None}
    if not limits:
        return []
    before, after = pair["baseline"].to_numpy(), pair["candidate"].to_numpy()
    delta = after - before
    mean = float(delta.mean())
    low, high = bootstrap_ci(delta, confidence=confidence, resamples=resamples, seed=seed)
    said = (
        f"{before.mean():.4f} → {after.mean():.4f} (Δ {mean:+.4f}, {confidence:.0%} CI {low:+.4f} to {high:+.4f}, "
        f"n={delta.size})"
    )
    rows = []
    for name, limit in limits.items():
        ok, reason = CHECKS[name](said, -mean, low, limit, f" ({tested})" if tested else "")
        value = -mean if name == "max_loss" else low
        rows.append(RuleResult(f"{label} {name}", "pass" if ok else "fail", reason, value, limit))
    return rows
