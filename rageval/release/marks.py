"""What any run may be marked with, read by the release checklist: the overrides that weakened its
checks, and evidence that was simulated. Apart from :mod:`rageval.release.decision` so that a
command recording one override (``rageval run --today``) does not import the release path's
statistics (scipy: about 0.6 s of every ``rageval run``, measured)."""

from __future__ import annotations

import json
from collections.abc import Mapping

# On any run: a JSON list, each entry an override that weakened a check of that run (--today, a policy
# laxer than the shipped one, an optional layer, --allow-simulated). The checklist lists them all.
OVERRIDES_TAG = "rageval.overrides"
SIMULATED_TAG = "rageval.simulated"


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
