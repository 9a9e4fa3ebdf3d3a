"""A search log turned into a redacted query set: the import policy, reading the log, redacting,
frequency bands, near-duplicate clusters and each query's provenance. Pure: the workflow
(:mod:`rageval.workflows.queries`) writes the files and records the import.

Raw text stays in this process: problems name a log's file, line and field, never its values; the
query set holds redacted text only; user and session IDs are dropped or salted-hashed (HMAC-SHA256,
the salt from the environment, never written). A query that still matches a :data:`RESIDUAL
<rageval.benchmark.redaction.RESIDUAL>` pattern after redaction is dropped and counted.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PositiveInt, StrictStr, ValidationError, model_validator

from rageval.benchmark.provenance import Provenance, Redaction, Reference, Source, provenance_problems
from rageval.benchmark.redaction import DETECTORS, RULES, RULES_VERSION, Detector, Redactor, residual
from rageval.benchmark.schema import Case
from rageval.csvfiles import read_table
from rageval.errors import BenchmarkError, PolicyError, Problem
from rageval.io import read_yaml
from rageval.validation import Strict, integer_cells, problems_from_validation

Band = Literal["frequent", "torso", "long-tail"]


class RedactionRules(Strict):
    rules: Reference = RULES
    version: Reference = RULES_VERSION
    detectors: list[Detector] = Field(default_factory=lambda: list(DETECTORS), min_length=1)
    tokens: dict[Detector, StrictStr] = Field(default_factory=dict, description="replacement tokens, e.g. <EMAIL>")

    @model_validator(mode="after")
    def _plain_tokens(self) -> RedactionRules:
        for name, token in self.tokens.items():
            if not token.strip() or residual(token) is not None:
                raise ValueError(
                    f"the token for {name} is empty or looks secret-like itself (the residual check would drop "
                    "every query it replaces in): use a word in angle brackets, e.g. <EMAIL>"
                )
        return self

    @model_validator(mode="after")
    def _this_rule_set(self) -> RedactionRules:
        if (self.rules, self.version) != (RULES, RULES_VERSION):
            raise ValueError(
                f"the policy asks for rules {self.rules} version {self.version}, but rageval applies {RULES} "
                f"version {RULES_VERSION}: review the policy against docs/queries.md and set that version"
            )
        return self


class Retention(Strict):
    """``until`` a date, or ``days`` after the query was first seen; with both, the earlier."""

    until: dt.date | None = Field(default=None, strict=False)
    days: PositiveInt | None = None

    @model_validator(mode="after")
    def _one_given(self) -> Retention:
        if self.until is None and self.days is None:
            raise ValueError("give `until: YYYY-MM-DD` or `days: N` (counted from the day a query was first seen)")
        return self

    def date_for(self, first_seen: dt.datetime) -> dt.date:
        dates = [d for d in (self.until, self.days and first_seen.date() + dt.timedelta(days=self.days)) if d]
        return min(dates)


class LogFields(Strict):
    """The log's column names, and the other fields that may be kept (redacted like the query)."""

    query: StrictStr = "query"
    time: StrictStr = "time"
    count: StrictStr | None = "count"
    user: StrictStr | None = "user"
    session: StrictStr | None = "session"
    keep: list[StrictStr] = Field(default_factory=list)


class Identifiers(Strict):
    mode: Literal["drop", "salted-hash"] = "drop"
    salt_env: StrictStr = Field(default="RAGEVAL_QUERY_SALT", description="the variable holding the salt")


class Frequency(Strict):
    frequent_min_count: PositiveInt = 10
    long_tail_max_count: PositiveInt = 2

    @model_validator(mode="after")
    def _ordered(self) -> Frequency:
        if self.long_tail_max_count >= self.frequent_min_count:
            raise ValueError("long_tail_max_count must be below frequent_min_count")
        return self

    def band(self, count: int) -> Band:
        if count >= self.frequent_min_count:
            return "frequent"
        return "long-tail" if count <= self.long_tail_max_count else "torso"


class NearDuplicates(Strict):
    jaccard: float = Field(default=0.8, gt=0, le=1, description="token-set Jaccard at or above which two join")


class QueryPolicy(Strict):
    """``params/queries/policy.yaml``: the terms a log may be imported under (docs/queries.md)."""

    name: Reference
    source: Source = "search-log"
    authorization: Reference
    access: list[Reference] = Field(min_length=1)
    redaction: RedactionRules = Field(default_factory=RedactionRules)
    retention: Retention
    fields: LogFields = Field(default_factory=LogFields)
    identifiers: Identifiers = Field(default_factory=Identifiers)
    frequency: Frequency = Field(default_factory=Frequency)
    near_duplicates: NearDuplicates = Field(default_factory=NearDuplicates)


def load_query_policy(path: str | Path) -> QueryPolicy:
    """Read and validate an import policy; one without an authorization is refused first."""
    path = Path(path)
    data, lines = read_yaml(path, PolicyError)
    if not isinstance(data, dict):
        raise PolicyError(Problem(file=str(path), line=1, message="expected a mapping of policy keys"))
    if data.get("authorization") in (None, ""):
        raise PolicyError(
            Problem(
                file=str(path),
                line=lines.get(("authorization",), 1),
                field="authorization",
                message="no authorization: a search log is a record of real users, and no log is read without "
                "the approval that allows this use",
                fix="add `authorization: REF`, the reference of the approval (a DPA, a ticket), e.g. DPA-2026-014",
            )
        )
    try:
        policy = QueryPolicy.model_validate(data)
    except ValidationError as exc:
        raise PolicyError(problems_from_validation(exc, file=str(path), model=QueryPolicy, lines=lines)) from None
    return policy


# --------------------------------------------------------------------------- the log


@dataclass(frozen=True)
class LogRow:
    """One line of the log, as read; held in memory only."""

    line: int
    query: str
    time: dt.datetime
    count: int
    user: str | None
    session: str | None
    kept: Mapping[str, str]


def read_log(path: str | Path, fields: LogFields) -> tuple[list[LogRow], list[str]]:
    """The rows of a JSONL or CSV log and the names of the fields not kept. Every problem names the
    file, line and field, never the value (it may be what redaction is for)."""
    path = Path(path)
    records, problems = read_table(path)
    if problems:
        raise BenchmarkError([Problem(p.file, _valueless(p.message), p.line, p.field, p.fix) for p in problems])
    used = {fields.query, fields.time, fields.count, fields.user, fields.session, *fields.keep} - {None}
    dropped: set[str] = set()
    rows = []
    for line, record in records:
        dropped.update(key for key in record if key not in used)
        row = _row(line, integer_cells(record, [fields.count] if fields.count else []), fields, str(path), problems)
        if row is not None:
            rows.append(row)
    if problems:
        raise BenchmarkError(problems)
    if not rows:
        raise BenchmarkError(Problem(file=str(path), message="the log holds no rows", fix="give a non-empty log"))
    return rows, sorted({recorded_name(name) for name in dropped})


# What a name that still looks secret after redaction is recorded as.
WITHHELD = "<WITHHELD>"


def recorded_name(name: str) -> str:
    """A name from the log (a field name, a part of its path) as the import record may hold it: every
    detector applied, and a name the residual check still flags withheld. A CSV without a header row
    makes its first row the field names, and a log's file name can hold an address."""
    redacted = Redactor()(name).text
    return WITHHELD if residual(redacted) else redacted


def log_name(path: str | Path) -> str:
    """The log's path for the import record, each part through :func:`recorded_name`."""
    path = Path(path)
    parts = [part if part in (path.anchor, "..", ".") else recorded_name(part) for part in path.parts]
    return str(Path(*parts)) if parts else str(path)


def _valueless(message: str) -> str:
    # The readers quote a bad line's start in some messages: a log's line may hold a secret.
    return re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", message)


def _row(line: int, record: Mapping[str, Any], fields: LogFields, file: str, problems: list[Problem]) -> LogRow | None:
    def problem(name: str, message: str, fix: str) -> None:
        problems.append(Problem(file=file, line=line, field=name, message=message, fix=fix))

    query = record.get(fields.query)
    if not isinstance(query, str) or not query.strip():
        problem(fields.query, "missing, empty or not text", "every row needs the query text")
    when = parse_time(record.get(fields.time))
    if when is None:
        problem(fields.time, "missing or not a time", "give ISO 8601 (2026-11-30T14:05:00Z) or epoch seconds")
    count = record.get(fields.count, 1) if fields.count else 1
    if count is None:
        count = 1
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        problem(str(fields.count), "not a positive whole number", "a count is how often the query was issued")
    ids = {}
    for role in ("user", "session"):
        name = getattr(fields, role)
        value = record.get(name) if name else None
        if value is not None and not isinstance(value, (str, int)):
            problem(name, "not text or a number", f"a {role} ID is text or a number")
        ids[role] = None if value is None else str(value)
    kept = {}
    for name in fields.keep:
        value = record.get(name)
        if isinstance(value, (dict, list)):
            problem(name, "not a plain value", "kept fields hold text, numbers or booleans")
        elif value is not None:
            kept[name] = str(value)
    if not isinstance(query, str) or not query.strip() or when is None or not isinstance(count, int) or count < 1:
        return None
    return LogRow(line, query.strip(), when, count, ids["user"], ids["session"], kept)


def parse_time(value: Any) -> dt.datetime | None:
    """ISO 8601 (a date, or a date and time; naive times are UTC) or epoch seconds, as UTC."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        try:
            return dt.datetime.fromtimestamp(value, dt.UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"\d{9,11}", text):
            return parse_time(int(text))
        try:
            parsed = dt.datetime.fromisoformat(text)
        except ValueError:
            return None
        return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed.astimezone(dt.UTC)
    return None


def salted_hash(value: str, salt: str) -> str:
    """HMAC-SHA256 of an ID under the salt: stable within one salt, unlinkable across salts."""
    return "h" + hmac.new(salt.encode(), value.encode(), hashlib.sha256).hexdigest()[:16]


# --------------------------------------------------------------------------- the query set


@dataclass
class QueryEntry:
    """One redacted query, aggregated over its log rows."""

    queryId: str
    query: str
    count: int
    firstSeen: dt.datetime
    lastSeen: dt.datetime
    users: set[str] = field(default_factory=set)
    sessions: set[str] = field(default_factory=set)
    removed: Counter[str] = field(default_factory=Counter)
    kept: dict[str, set[str]] = field(default_factory=dict)
    band: Band = "long-tail"
    cluster: str = ""
    clusterSize: int = 1


@dataclass(frozen=True)
class QuerySet:
    entries: list[QueryEntry]
    counts: dict[str, Any]


def query_id(text: str) -> str:
    """From the redacted text: the same redacted query gets the same ID in every import."""
    return "q" + hashlib.sha256(text.encode()).hexdigest()[:12]


def build_query_set(
    rows: Sequence[LogRow], policy: QueryPolicy, salt: str | None = None, today: dt.date | None = None
) -> QuerySet:
    """Redact, check for residue, aggregate, band and cluster; ``counts`` is the import's record.
    A query whose retention date is already past (``today``) is dropped and counted: it may not be used."""
    if policy.identifiers.mode == "salted-hash" and not salt:
        raise ValueError("salted-hash needs a salt")
    redact = Redactor(policy.redaction.detectors, policy.redaction.tokens)
    entries: dict[str, QueryEntry] = {}
    matches: Counter[str] = Counter()
    queries_redacted: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    hashes: dict[str, str] = {}  # one HMAC per distinct ID
    for row in rows:
        result = redact(row.query)
        kept = {name: redact(value) for name, value in row.kept.items()}
        reason = residual(result.text) or next((r for v in kept.values() if (r := residual(v.text))), None)
        if reason is not None:
            dropped[reason] += 1
            continue
        for redacted in (result, *kept.values()):
            matches.update(redacted.removed)
        queries_redacted.update(result.removed.keys())
        entry = entries.get(result.text)
        if entry is None:
            entry = entries[result.text] = QueryEntry(query_id(result.text), result.text, 0, row.time, row.time)
        entry.count += row.count
        entry.firstSeen, entry.lastSeen = min(entry.firstSeen, row.time), max(entry.lastSeen, row.time)
        entry.removed.update(result.removed)
        for role, value in (("users", row.user), ("sessions", row.session)):
            if value is not None:
                if salt and value not in hashes:
                    hashes[value] = salted_hash(value, salt)
                getattr(entry, role).add(hashes[value] if salt else value)
        for name, redacted in kept.items():
            entry.kept.setdefault(name, set()).add(redacted.text)
    today = today or dt.date.today()
    live = [e for e in entries.values() if policy.retention.date_for(e.firstSeen) >= today]
    ordered = sorted(live, key=lambda e: (-e.count, e.queryId))
    for entry in ordered:
        entry.band = policy.frequency.band(entry.count)
    clusters = cluster(ordered, policy.near_duplicates.jaccard)
    counts = {
        "rows_read": len(rows),
        "rows_dropped_residual": sum(dropped.values()),
        "dropped_by_reason": dict(sorted(dropped.items())),
        "redactions_by_type": {name: matches[name] for name in redact.detectors},
        "queries_redacted_by_type": {name: queries_redacted[name] for name in redact.detectors},
        "queries_expired": len(entries) - len(live),
        "queries": len(ordered),
        "issued": sum(e.count for e in ordered),
        "bands": {band: sum(e.band == band for e in ordered) for band in ("frequent", "torso", "long-tail")},
        "clusters": clusters,
        "near_duplicate_queries": sum(e.clusterSize > 1 for e in ordered),
    }
    return QuerySet(ordered, counts)


# --------------------------------------------------------------------------- near duplicates


def normalise(text: str) -> list[str]:
    """Case-folded NFKC word tokens; a redaction token (``<EMAIL>``) counts as one word."""
    return re.findall(r"<[A-Z_]+>|\w+", unicodedata.normalize("NFKC", text).casefold())


def cluster(entries: Sequence[QueryEntry], threshold: float) -> int:
    """Join queries whose token sets have Jaccard ≥ ``threshold`` (single link), each cluster named
    by its most issued member; returns the number of clusters. Candidate pairs come from the prefix
    filter (Bayardo et al., 2007): sets that reach the threshold share a token among the rarest
    ``|x| - ceil(t·|x|) + 1`` of each, so common words never make the search quadratic."""
    sets = [frozenset(normalise(e.query)) for e in entries]
    df = Counter(token for tokens in sets for token in tokens)
    parent = list(range(len(entries)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    index: dict[str, list[int]] = {}
    for i, tokens in enumerate(sets):
        ranked = sorted(tokens, key=lambda t: (df[t], t))
        prefix = ranked[: len(ranked) - math.ceil(threshold * len(ranked)) + 1] if ranked else []
        # and sets that reach it differ in size by at most the factor t
        low, high = threshold * len(tokens), len(tokens) / threshold
        candidates = {j for token in prefix for j in index.get(token, ()) if low <= len(sets[j]) <= high}
        for j in candidates:
            if root(i) != root(j) and len(tokens & sets[j]) / len(tokens | sets[j]) >= threshold:
                parent[root(i)] = root(j)
        for token in prefix:
            index.setdefault(token, []).append(i)
    # entries come most issued first: the first member of each cluster names it
    members: dict[int, list[QueryEntry]] = {}
    for i, entry in enumerate(entries):
        members.setdefault(root(i), []).append(entry)
    for group in members.values():
        for entry in group:
            entry.cluster, entry.clusterSize = group[0].queryId, len(group)
    return len(members)


# --------------------------------------------------------------------------- output lines


def provenance_of(entry: QueryEntry, policy: QueryPolicy) -> Provenance:
    return Provenance(
        source=policy.source,
        authorization=policy.authorization,
        redaction=Redaction(
            rules=policy.redaction.rules, version=policy.redaction.version, types=sorted(entry.removed)
        ),
        retention=policy.retention.date_for(entry.firstSeen),
        access=list(policy.access),
    )


def query_lines(entries: Iterable[QueryEntry], policy: QueryPolicy) -> list[dict[str, Any]]:
    """The query set's JSON lines (``queries.jsonl``); each provenance block validated."""
    out = []
    hashed = policy.identifiers.mode == "salted-hash"
    # Queries removed of the same types and first seen the same day share one block: built and checked once.
    blocks: dict[tuple[tuple[str, ...], dt.date], dict[str, Any]] = {}
    for entry in entries:
        key = (tuple(sorted(entry.removed)), entry.firstSeen.date())
        if key not in blocks:
            provenance = provenance_of(entry, policy)
            problems = provenance_problems(provenance, file="queries.jsonl", line=None, field="provenance")
            if problems:
                raise PolicyError(problems)
            blocks[key] = provenance.model_dump(mode="json", exclude_none=True)
        out.append(
            {
                "queryId": entry.queryId,
                "query": entry.query,
                "count": entry.count,
                "frequency": entry.band,
                "firstSeen": _iso(entry.firstSeen),
                "lastSeen": _iso(entry.lastSeen),
                "users": len(entry.users),
                "sessions": len(entry.sessions),
                **({"userIds": sorted(entry.users), "sessionIds": sorted(entry.sessions)} if hashed else {}),
                "cluster": entry.cluster,
                "clusterSize": entry.clusterSize,
                "redacted": dict(sorted(entry.removed.items())),
                **({"fields": {k: sorted(v) for k, v in sorted(entry.kept.items())}} if entry.kept else {}),
                "provenance": blocks[key],
            }
        )
    return out


def case_lines(lines: Iterable[Mapping[str, Any]], corpus_version: str, split: str) -> list[dict[str, Any]]:
    """Draft ``cases.jsonl`` lines for a new benchmark version: unjudged (``relevant: []``) until
    pooled and labelled, sliced by frequency band, carrying their provenance."""
    out = []
    for line in lines:
        case = Case.model_validate(
            {
                "queryId": line["queryId"],
                "query": line["query"],
                "corpusVersion": corpus_version,
                "relevant": [],
                "slice": [line["frequency"]],
                "notes": f"unjudged: from a query import (issued {line['count']}x, cluster {line['cluster']})",
                "split": split,
                "provenance": line["provenance"],
            }
        )
        out.append(case.model_dump(mode="json", exclude_none=True))
    return out


def _iso(value: dt.datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")
