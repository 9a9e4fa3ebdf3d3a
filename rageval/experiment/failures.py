"""Failed queries: a query whose stage failed (a service error, a timeout, a bad reply) has no
ranking and scores 0 in every measure. A run configuration's ``failures.max_fraction`` (default 0.0)
is how many may fail before :func:`rageval.experiment.run.run_experiment` refuses the run; within
it, the run carries a warning, and compare and gate refuse it (docs/reliability.md, "Failed
queries")."""

from __future__ import annotations

import pandas as pd

__all__ = ["FAILURE_COLUMNS", "failure_warning", "over_budget"]

FAILURE_COLUMNS = ["query_id", "stage", "error", "message"]


def failure_warning(failures: pd.DataFrame, total: int) -> str | None:
    """What a person must know about a run with failed queries, or None when none failed."""
    if failures.empty:
        return None
    failed = failures["query_id"].nunique()
    stages = ", ".join(sorted(failures["stage"].astype(str).unique()))
    return (
        f"{failed} of {total} queries failed (stage {stages}) and score 0 in every measure; "
        "compare and gate refuse a run with failed queries (failures.json lists them)"
    )


def over_budget(failures: pd.DataFrame, total: int, max_fraction: float) -> str | None:
    """The refusal of a run whose failed queries exceed ``failures.max_fraction`` of ``total``,
    naming the first few failures and the fix; None when the run is within its budget."""
    failed = failures["query_id"].nunique() if not failures.empty else 0
    if failed == 0 or failed <= max_fraction * total:
        return None
    shown = "; ".join(
        f"{row.query_id} at {row.stage}: {row.error}: {row.message}" for row in failures.head(3).itertuples()
    )
    more = f" (and {len(failures) - 3} more)" if len(failures) > 3 else ""
    return (
        f"{failed} of {total} queries failed ({failed / max(total, 1):.0%}), more than the run's failure "
        f"budget failures.max_fraction={max_fraction:g} allows: {shown}{more}. Fix the service or stage "
        "and run again; to record a run with failed queries anyway, raise failures.max_fraction "
        "(e.g. --set failures.max_fraction=0.1)"
    )
