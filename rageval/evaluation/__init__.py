"""Measures and the metric contract: parse measure strings, order rankings under the contract's
rules, evaluate natively or through ir-measures, roll chunks up to parents, measure abstention;
significance and agreement statistics. Pure functions over DataFrames; no I/O.
"""

from __future__ import annotations

from rageval.evaluation.contract import (
    CONTRACT,
    CONTRACT_DIGEST,
    DEFAULT_DEPTH,
    DUPLICATE_POLICIES,
    GAINS,
    MISSING_POLICIES,
    NO_RELEVANT_POLICIES,
    RULES,
    TIE_POLICIES,
    DuplicatePolicy,
    Gain,
    MissingPolicy,
    NoRelevantPolicy,
    TiePolicy,
    contract_differences,
    contract_record,
    require_same_contract,
)
from rageval.evaluation.measures import (
    ALIASES,
    Measure,
    measure_from_key,
    metric_key,
    parse_measure,
    parse_measures,
)
from rageval.evaluation.metrics import Evaluation, Provider, evaluate
from rageval.evaluation.native import NATIVE
from rageval.evaluation.ordering import order_ranking
from rageval.evaluation.rollup import rollup_to_parent
from rageval.evaluation.unanswerable import Abstention, abstention, top_scores

__all__ = [
    "ALIASES",
    "Abstention",
    "CONTRACT",
    "CONTRACT_DIGEST",
    "DEFAULT_DEPTH",
    "DUPLICATE_POLICIES",
    "DuplicatePolicy",
    "Evaluation",
    "GAINS",
    "Gain",
    "MISSING_POLICIES",
    "Measure",
    "MissingPolicy",
    "NO_RELEVANT_POLICIES",
    "NoRelevantPolicy",
    "NATIVE",
    "Provider",
    "RULES",
    "TIE_POLICIES",
    "TiePolicy",
    "abstention",
    "contract_differences",
    "contract_record",
    "evaluate",
    "measure_from_key",
    "metric_key",
    "order_ranking",
    "parse_measure",
    "parse_measures",
    "require_same_contract",
    "rollup_to_parent",
    "top_scores",
]
