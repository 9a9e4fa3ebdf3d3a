"""The import policy under which logged traffic may be read: the terms every log of real users'
requests carries before rageval reads a line of it — the shadow log (:mod:`rageval.release.shadow`)
and the online cohort's events (:mod:`rageval.release.online`) alike.

A policy names the authorization that allows this use, the redaction the log went through (the
provenance block's :class:`~rageval.benchmark.provenance.Redaction`: rules and version, never the
removed text), the retention date after which the log may not be used, and who may see the raw log.
References only: no policy field may hold prose or removed text."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import Field, StrictStr

from rageval.benchmark.provenance import Redaction, Reference
from rageval.errors import PolicyError, Problem
from rageval.io import read_yaml
from rageval.validation import Strict, validated


class TrafficPolicy(Strict):
    """The terms under which a log of traffic may be read."""

    version: Literal[1]
    name: StrictStr | None = None
    # Optional in the model so that its absence gets its own message (no approval, no reading).
    authorization: Reference | None = Field(default=None, description="the approval of this use of traffic")
    redaction: Redaction = Field(description="the redaction applied before the log was exported")
    retention: dt.date = Field(strict=False, description="the last day the log may be used")
    access: list[Reference] | None = Field(default=None, min_length=1, description="who may see the raw log")


P = TypeVar("P", bound=TrafficPolicy)


def load_traffic_policy(path: str | Path | None, today: dt.date, *, model: type[P], what: str, example: str) -> P:
    """``model`` read from ``path``; refused when absent, invalid, without authorization or past its
    retention date. ``what`` names the log (``a shadow log``), ``example`` the shipped policy file."""
    if path is None:
        raise PolicyError(
            Problem(
                file="--policy",
                message=f"{what} is real users' traffic: it is read only under an import policy",
                fix=f"give --policy {example} naming the authorization, redaction and retention",
            )
        )
    path = Path(path)
    data, lines = read_yaml(Path(path), PolicyError)
    policy = validated(data, lines, str(path), model, PolicyError, what="policy keys")
    if policy.authorization is None:
        raise PolicyError(
            Problem(
                file=str(path),
                line=1,
                field="authorization",
                message="no authorization is named: traffic is read only under an approval",
                fix="add `authorization`: the reference of the approval (e.g. DPA-2026-014)",
            )
        )
    if policy.retention < today:
        raise PolicyError(
            Problem(
                file=str(path),
                line=lines.get(("retention",)),
                field="retention",
                message=f"the log is past its retention date {policy.retention} (today is {today}): it may no "
                "longer be used",
                fix="delete the log, or record the new date where the authorization was renewed",
            )
        )
    return policy
