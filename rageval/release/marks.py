"""What any run may be marked with, read by the release checklist: the overrides that weakened its
checks, and evidence that was simulated. Apart from :mod:`rageval.release.decision` so that a
command recording one override (``rageval run --today``) does not import the release path's
statistics (scipy: about 0.6 s of every ``rageval run``, measured).

Also the release path's one vocabulary: every kind of run on it (gate, review, shadow, online,
release, rollback) names the pair it concerns, its verdict and its policy by the same keys, its
kind tag saying whose they are (docs/records.md, "The experiments' layout")."""

from __future__ import annotations

import json
from collections.abc import Mapping

# On any run: a JSON list, each entry an override that weakened a check of that run (--today, a policy
# laxer than the shipped one, an optional layer, --allow-simulated). The checklist lists them all.
OVERRIDES_TAG = "rageval.overrides"
SIMULATED_TAG = "rageval.simulated"

# The same keys as rageval.tracking.records.role_tags writes (tests/test_experience_layout.py pins them
# equal: the pure packages do not import tracking). Candidates are comma-separated.
BASELINE_TAG = "rageval.baseline"
CANDIDATES_TAG = "rageval.candidates"
# Where a layer names a configuration instead of a run (a shadow log of services, not runs).
BASELINE_CONFIG_TAG = "rageval.baseline.config"
CANDIDATE_CONFIG_TAG = "rageval.candidate.config"
VERDICT_TAG = "rageval.verdict"  # pass / fail / none: the verdict of the run's kind
POLICY_TAG = "rageval.policy"  # the name of the policy (or rules) the verdict was reached under


def named_pair(tags: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The baseline and candidate run IDs a release-path run names (None where it names none; the
    first candidate where it names several)."""
    candidates = [c for c in tags.get(CANDIDATES_TAG, "").split(",") if c]
    return tags.get(BASELINE_TAG) or None, candidates[0] if candidates else None


def overrides_of(tags: Mapping[str, str]) -> list[str]:
    """The overrides recorded on a run (an unreadable tag is itself reported)."""
    raw = tags.get(OVERRIDES_TAG, "")
    if not raw:
        return []
    try:
        found = json.loads(raw)
    except ValueError:
        return [f"{OVERRIDES_TAG} is not a JSON list: {raw[:80]!r}"]
    return [str(x) for x in found] if isinstance(found, list) else [f"{OVERRIDES_TAG} is not a list: {raw[:80]!r}"]


def overrides_tag(overrides: list[str]) -> dict[str, str]:
    return {OVERRIDES_TAG: json.dumps(overrides)}
