"""Online evidence: an A/B cohort's outcome log, its import policy, its metric definitions, the
analysis per metric (the decision is :func:`rageval.release.online_decision.decide_online`) — pure,
the recording is :mod:`rageval.workflows.release.online`'s.

- The **log** (JSONL or parquet) holds one record per unit (a session or a query): an opaque
  ``session_id``, ``arm``, ``time``, the outcomes, ``latency_ms``; never raw query text (at most its
  sha256 as ``query_hash``). Simulated records say ``simulated: true``.
- The **import policy** names the authorization, the redaction applied
  (:class:`rageval.benchmark.provenance.Redaction`) and the retention date; a log is refused without
  one, and past the date.
- The **metrics file** defines each metric: a proportion of units with an outcome, or a mean of a
  value; its direction; a primary metric must improve (its ``mde`` says how large a change the cohort
  should be able to see) or, with ``claim: non-inferiority``, be no worse than its ``margin`` (a
  cheaper retriever that loses nothing users feel); a guardrail may not regress beyond its ``margin``.

Statistics: proportions by the two-proportion z-test and Newcombe's hybrid-score interval of the
difference (statsmodels), means by Welch's t-test and its interval (scipy); a sample-ratio-mismatch
check (chi-square of the arm counts against the planned split, scipy). With ``sequential: true`` (the
team peeks at the cohort while it runs) every decision reads instead the always-valid normal-mixture
confidence sequence and mSPRT p-value of Johari, Koomen, Pekelis and Walsh, "Always valid inference:
continuous monitoring of A/B tests", Operations Research 70(3), 2022 (arXiv:1512.04922), evaluated
after every unit in time order and intersected, so that stopping at any look keeps the error rate.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import numpy as np
import pandas as pd
from pydantic import (
    AfterValidator,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from rageval.errors import InputError, PolicyError, Problem
from rageval.io import read_jsonl, read_yaml
from rageval.release.traffic import TrafficPolicy, load_traffic_policy
from rageval.validation import Sha256, Strict, problems_from_validation, validated

Arm = Literal["baseline", "candidate"]
ARMS: tuple[Arm, ...] = get_args(Arm)
# The outcomes a proportion metric counts, and the values a mean metric averages.
ProportionEvent = Literal["successful_search", "citation_opened", "reformulation", "escalation", "answer_outcome"]
MeanEvent = Literal["latency_ms", "citation_rank"]
PROPORTION_EVENTS: tuple[str, ...] = get_args(ProportionEvent)
MEAN_EVENTS: tuple[str, ...] = get_args(MeanEvent)
# What a primary metric must show: an improvement (its interval above 0), or non-inferiority (its
# interval no worse than -margin: a cheaper retriever that loses nothing users feel).
Claim = Literal["improvement", "non-inferiority"]
CLAIMS: tuple[str, ...] = get_args(Claim)
# Keys that would carry raw text; named so that the refusal says why.
RAW_TEXT_KEYS = ("query", "query_text", "text", "question", "answer")
_OPAQUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


def _opaque(value: str) -> str:
    if not _OPAQUE.fullmatch(value):
        raise ValueError(
            "an ID must be opaque or hashed (letters, digits, '.', '_', ':', '-'; no spaces or '@'; at most 128 "
            "characters): hash user or session identifiers before export"
        )
    return value


OpaqueId = Annotated[StrictStr, AfterValidator(_opaque)]


class OnlineEvent(Strict):
    """One unit (session or query) of the cohort and its outcomes."""

    session_id: OpaqueId
    arm: Arm
    time: dt.datetime = Field(strict=False, description="ISO 8601, when the unit started")
    successful_search: StrictBool
    citation_opened: StrictBool
    citation_rank: StrictInt | None = Field(default=None, ge=1, description="rank of the first citation opened")
    reformulation: StrictBool
    escalation: StrictBool
    latency_ms: float = Field(ge=0)
    answer_outcome: StrictBool | None = Field(default=None, description="an answer-level outcome, where one exists")
    segment: OpaqueId | None = None
    query_hash: Sha256 | None = Field(default=None, description="sha256 of the query text, never the text")
    simulated: StrictBool = False

    @model_validator(mode="before")
    @classmethod
    def _no_raw_text(cls, data: Any) -> Any:
        if isinstance(data, dict):
            raw = [key for key in RAW_TEXT_KEYS if key in data]
            if raw:
                raise ValueError(
                    f"key {raw[0]!r} would carry raw text, which an online log may not hold: drop it "
                    "(record sha256 of the query as query_hash where the query must be known)"
                )
        return data

    @field_validator("time")
    @classmethod
    def _with_offset(cls, value: dt.datetime) -> dt.datetime:
        if value.tzinfo is None:
            raise ValueError("give the time with its UTC offset (e.g. 2026-11-02T09:00:00Z): clocks differ")
        return value

    @model_validator(mode="after")
    def _rank_with_citation(self) -> OnlineEvent:
        if self.citation_opened != (self.citation_rank is not None):
            raise ValueError("citation_rank is given exactly when citation_opened is true")
        return self


class ImportPolicy(TrafficPolicy):
    """``params/online/policy.yaml``: the terms under which a cohort's log may be analysed."""


class MetricDefinition(Strict):
    kind: Literal["proportion", "mean"]
    event: ProportionEvent | MeanEvent
    direction: Literal["higher", "lower"] = Field(description="which way is better")
    role: Literal["primary", "guardrail"]
    claim: Claim = Field(default="improvement", description=f"primary: what it must show, one of {', '.join(CLAIMS)}")
    mde: float | None = Field(default=None, gt=0, description="primary: the smallest change worth detecting")
    margin: float | None = Field(
        default=None, ge=0, description="guardrail, or non-inferiority primary: the largest regression allowed"
    )

    @model_validator(mode="after")
    def _consistent(self) -> MetricDefinition:
        events = PROPORTION_EVENTS if self.kind == "proportion" else MEAN_EVENTS
        if self.event not in events:
            raise ValueError(f"a {self.kind} metric counts one of {', '.join(events)} (got {self.event!r})")
        if self.role == "guardrail" and self.claim != "improvement":
            raise ValueError("claim is a primary metric's: a guardrail is always held to its margin")
        if self.role == "primary" and self.claim == "non-inferiority":
            if not self.margin:
                raise ValueError("a non-inferiority primary needs margin > 0: the largest loss it accepts")
        elif self.role == "primary" and self.mde is None:
            raise ValueError("a primary metric needs mde: the smallest change the cohort must be able to detect")
        if self.role == "guardrail" and self.margin is None:
            raise ValueError("a guardrail needs margin: the largest regression allowed (0 for none)")
        return self

    @property
    def threshold(self) -> float:
        improvement = self.role == "primary" and self.claim == "improvement"
        return float(self.mde if improvement else self.margin)  # type: ignore[arg-type]


class MetricsPolicy(Strict):
    """``params/online/metrics.yaml``: the metrics of a cohort and how they decide."""

    version: Literal[1]
    name: StrictStr
    description: StrictStr | None = None
    planned_split: dict[Arm, float] = Field(description="the share of units assigned to each arm")
    alpha: float = Field(default=0.05, gt=0, lt=0.5, description="two-sided, for every interval and test")
    srm_alpha: float = Field(default=0.001, gt=0, lt=0.5, description="a sample-ratio p below this fails")
    power: float = Field(default=0.8, gt=0, lt=1, description="for the sample size a primary's mde needs")
    sequential: StrictBool = Field(default=False, description="decide on always-valid intervals (peeking allowed)")
    min_units_per_arm: StrictInt = Field(default=100, ge=2, description="sequential: looks start after this many")
    metrics: dict[StrictStr, MetricDefinition] = Field(min_length=1)

    @model_validator(mode="after")
    def _split(self) -> MetricsPolicy:
        if set(self.planned_split) != set(ARMS) or abs(sum(self.planned_split.values()) - 1) > 1e-9:
            raise ValueError("planned_split gives both arms (baseline, candidate) shares that add up to 1")
        if any(share <= 0 for share in self.planned_split.values()):
            raise ValueError("planned_split: every share must be above 0")
        if not any(m.role == "primary" for m in self.metrics.values()):
            raise ValueError("define at least one primary metric (the improvement the cohort is run to show)")
        return self


# --------------------------------------------------------------------------- reading


def _model_problems(
    exc: ValidationError, file: str, line: int | None, model: type[Strict], lines: Any = None
) -> list[Problem]:
    return problems_from_validation(exc, file=file, line=line, model=model, lines=lines)


def load_import_policy(path: str | Path | None, today: dt.date) -> ImportPolicy:
    """The import policy, refused when absent, without authorization or past its retention date."""
    return load_traffic_policy(
        path, today, model=ImportPolicy, what="an online cohort's log", example="params/online/policy.yaml"
    )


def load_metrics_policy(path: str | Path) -> MetricsPolicy:
    return validated(*read_yaml(Path(path), PolicyError), str(path), MetricsPolicy, PolicyError, what="policy keys")


def _parquet_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a file that is not parquet
        raise InputError(Problem(file=str(path), message=f"cannot be read as parquet: {exc}")) from None
    rows = []
    for number, record in enumerate(frame.to_dict(orient="records"), start=1):
        clean = {}
        for key, value in record.items():
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue  # an absent optional value
            if isinstance(value, np.generic):
                value = value.item()
            if isinstance(value, pd.Timestamp):
                value = value.to_pydatetime()
            # pandas writes an integer column with gaps as floats: 2.0 is the rank 2 it was.
            if key == "citation_rank" and isinstance(value, float) and value.is_integer():
                value = int(value)
            clean[str(key)] = value
        rows.append((number, clean))
    return rows


def load_events(path: str | Path) -> list[OnlineEvent]:
    """Every unit of a log (``.jsonl``, or ``.parquet`` whose row n is "line" n); all problems raised
    at once, each naming file, line and field. A unit may appear once, in one arm."""
    path = Path(path)
    problems: list[Problem] = []
    if path.suffix == ".parquet":
        rows = _parquet_rows(path)
    elif path.suffix == ".jsonl":
        rows, problems = read_jsonl(path)
    else:
        raise InputError(
            Problem(file=str(path), message=f"unknown log format '{path.suffix}'", fix="use .jsonl or .parquet")
        )
    events: list[OnlineEvent] = []
    seen: dict[str, int] = {}
    for line, row in rows:
        try:
            event = OnlineEvent.model_validate(row)
        except ValidationError as exc:
            problems += _model_problems(exc, str(path), line, OnlineEvent)
            continue
        if event.session_id in seen:
            problems.append(
                Problem(
                    file=str(path),
                    line=line,
                    field="session_id",
                    message=f"unit {event.session_id!r} appears again (first on line {seen[event.session_id]})",
                    fix="one record per session (or query): aggregate its outcomes before export",
                )
            )
            continue
        seen[event.session_id] = line
        events.append(event)
    if not events and not problems:
        problems.append(Problem(file=str(path), message="the log holds no units", fix="export the cohort's units"))
    kinds = {e.simulated for e in events}
    if len(kinds) > 1:
        problems.append(
            Problem(file=str(path), field="simulated", message="the log mixes simulated and real units",
                    fix="analyse simulated and real cohorts separately")
        )  # fmt: skip
    if problems:
        raise InputError(problems)
    return events


def events_frame(events: Sequence[OnlineEvent]) -> pd.DataFrame:
    """The units as a frame in time order (the order a sequential analysis looks in)."""
    frame = pd.DataFrame([e.model_dump() for e in events])
    return frame.sort_values(["time", "session_id"], kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class SampleRatio:
    counts: dict[str, int]
    expected: dict[str, float]
    statistic: float
    p_value: float
    passed: bool


def sample_ratio(frame: pd.DataFrame, policy: MetricsPolicy) -> SampleRatio:
    """Chi-square goodness of fit of the arm counts to the planned split."""
    from scipy.stats import chisquare

    counts: dict[str, int] = {arm: int((frame["arm"] == arm).sum()) for arm in ARMS}
    total = sum(counts.values())
    expected: dict[str, float] = {arm: total * policy.planned_split[arm] for arm in ARMS}
    result = chisquare([counts[a] for a in ARMS], f_exp=[expected[a] for a in ARMS])
    p = float(result.pvalue)
    return SampleRatio(counts, expected, float(result.statistic), p, p >= policy.srm_alpha)


@dataclass(frozen=True)
class MetricResult:
    """One metric's evidence: both arms, the difference (candidate − baseline) and its interval."""

    metric: str
    kind: str
    event: str
    role: str
    direction: str
    n_baseline: int
    n_candidate: int
    baseline: float
    candidate: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    test: str
    threshold: float
    seq_ci_low: float | None = None
    seq_ci_high: float | None = None
    seq_p_value: float | None = None
    needed_per_arm: int | None = None  # a primary's: units per arm that detect its mde at the policy's power
    claim: str = "improvement"  # a primary's: improvement or non-inferiority (within threshold)


def _values(frame: pd.DataFrame, arm: str, event: str) -> np.ndarray:
    column = frame.loc[frame["arm"] == arm, event]
    return column.dropna().to_numpy(dtype=float)


def fixed_horizon(kind: str, base: np.ndarray, cand: np.ndarray, alpha: float) -> tuple[float, float, float, str]:
    """(interval low, high, p-value, test) of candidate − baseline at one look."""
    if kind == "proportion":
        from statsmodels.stats.proportion import confint_proportions_2indep, proportions_ztest

        c1, n1, c0, n0 = int(cand.sum()), cand.size, int(base.sum()), base.size
        low, high = confint_proportions_2indep(c1, n1, c0, n0, method="newcombe", compare="diff", alpha=alpha)
        if c1 + c0 in (0, n1 + n0):  # both arms all 0 or all 1: no variance, no evidence of a difference
            p = 1.0
        else:
            _, p = proportions_ztest([c1, c0], [n1, n0])
        return float(low), float(high), float(p), "two-proportion z-test, Newcombe interval"
    from scipy.stats import ttest_ind

    result = ttest_ind(cand, base, equal_var=False)
    interval = result.confidence_interval(1 - alpha)
    return float(interval.low), float(interval.high), float(result.pvalue), "Welch's t-test"


def confidence_sequence(
    kind: str, arms: np.ndarray, values: np.ndarray, tau: float, alpha: float, min_per_arm: int
) -> tuple[float, float, float]:
    """The always-valid interval and p-value of candidate − baseline after the last unit.

    ``arms`` (1 = candidate) and ``values`` in time order. After each unit from ``min_per_arm`` per
    arm on, the normal-mixture likelihood ratio with mixing variance ``tau``² (Johari et al. 2022,
    eq. 11, the difference's variance V estimated by plug-in) gives the interval
    ``θ̂ ± sqrt(V(V+τ²)/τ² · (2 log(1/α) + log((V+τ²)/V)))``; the running intersection of those intervals
    and the running minimum of ``1/Λ(0)`` are valid at every look at once."""
    cand, base = arms == 1, arms == 0
    stats = []
    for mask in (cand, base):
        n = np.cumsum(mask)
        s = np.cumsum(np.where(mask, values, 0.0))
        q = np.cumsum(np.where(mask, values * values, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = s / n
            var = (q - n * mean * mean) / (n - 1) if kind == "mean" else mean * (1 - mean)
        stats.append((n, mean, np.maximum(var, 0.0)))
    (n1, m1, v1), (n0, m0, v0) = stats
    looks = (n1 >= min_per_arm) & (n0 >= min_per_arm)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = v1 / n1 + v0 / n0
    looks &= v > 0
    if not looks.any():
        return -math.inf, math.inf, 1.0
    v, diff, t2 = v[looks], (m1 - m0)[looks], tau * tau
    half = np.sqrt(v * (v + t2) / t2 * (2 * math.log(1 / alpha) + np.log((v + t2) / v)))
    log_lambda = 0.5 * np.log(v / (v + t2)) + t2 * diff * diff / (2 * v * (v + t2))
    p = float(min(1.0, np.exp(-log_lambda).min()))
    return float((diff - half).max()), float((diff + half).min()), p


def needed_per_arm(kind: str, base: np.ndarray, mde: float, alpha: float, power: float) -> int:
    """Units per arm a two-sided test at ``alpha`` needs to detect ``mde`` with ``power`` (the
    baseline's variance for both arms)."""
    from scipy.stats import norm

    variance = float(base.var(ddof=1)) if base.size > 1 else 0.0
    if kind == "proportion":
        p = float(base.mean()) if base.size else 0.5
        variance = p * (1 - p) + min(max(p + mde, 0.0), 1.0) * (1 - min(max(p + mde, 0.0), 1.0))
    else:
        variance *= 2
    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    return max(2, math.ceil(z * z * variance / (mde * mde)))


def analyze(frame: pd.DataFrame, policy: MetricsPolicy) -> list[MetricResult]:
    """Every metric of the policy on the cohort (``frame`` from :func:`events_frame`)."""
    out = []
    for name, metric in policy.metrics.items():
        base, cand = _values(frame, "baseline", metric.event), _values(frame, "candidate", metric.event)
        if min(base.size, cand.size) < 2:
            low, high, p, test = -math.inf, math.inf, 1.0, "too few units for a test"
        else:
            low, high, p, test = fixed_horizon(metric.kind, base, cand, policy.alpha)
        seq: tuple[float | None, float | None, float | None] = (None, None, None)
        if policy.sequential:
            present = frame[metric.event].notna().to_numpy()
            arms = (frame["arm"] == "candidate").to_numpy(dtype=int)[present]
            values = frame[metric.event].to_numpy(dtype=float, na_value=np.nan)[present]
            # The mixing scale: the effect the metric is about (its mde or margin); 1e-9 for a zero margin.
            tau = max(metric.threshold, 1e-9)
            seq = confidence_sequence(metric.kind, arms, values, tau, policy.alpha, policy.min_units_per_arm)
        out.append(
            MetricResult(
                metric=name,
                kind=metric.kind,
                event=metric.event,
                role=metric.role,
                direction=metric.direction,
                n_baseline=int(base.size),
                n_candidate=int(cand.size),
                baseline=float(base.mean()) if base.size else math.nan,
                candidate=float(cand.mean()) if cand.size else math.nan,
                diff=float(cand.mean() - base.mean()) if base.size and cand.size else math.nan,
                ci_low=low,
                ci_high=high,
                p_value=p,
                test=test,
                threshold=metric.threshold,
                seq_ci_low=seq[0],
                seq_ci_high=seq[1],
                seq_p_value=seq[2],
                needed_per_arm=needed_per_arm(metric.kind, base, metric.threshold, policy.alpha, policy.power)
                if metric.role == "primary"
                else None,
                claim=metric.claim,
            )
        )
    return out
