"""Measures and the metric contract: parse measure strings, order rankings under the contract's
rules, evaluate natively or through ir-measures, roll chunks up to parents, measure abstention;
significance and agreement statistics. Pure functions over DataFrames; no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rageval.lazy import exports

# name -> the module that defines it; each loads on first use
_EXPORTS = {
    "CONTRACT": "rageval.evaluation.contract",
    "CONTRACT_DIGEST": "rageval.evaluation.contract",
    "DEFAULT_DEPTH": "rageval.evaluation.contract",
    "DUPLICATE_POLICIES": "rageval.evaluation.contract",
    "GAINS": "rageval.evaluation.contract",
    "MISSING_POLICIES": "rageval.evaluation.contract",
    "NO_RELEVANT_POLICIES": "rageval.evaluation.contract",
    "RULES": "rageval.evaluation.contract",
    "TIE_POLICIES": "rageval.evaluation.contract",
    "DuplicatePolicy": "rageval.evaluation.contract",
    "Gain": "rageval.evaluation.contract",
    "MissingPolicy": "rageval.evaluation.contract",
    "NoRelevantPolicy": "rageval.evaluation.contract",
    "TiePolicy": "rageval.evaluation.contract",
    "contract_differences": "rageval.evaluation.contract",
    "contract_record": "rageval.evaluation.contract",
    "require_same_contract": "rageval.evaluation.contract",
    "as_measures": "rageval.evaluation.convert",
    "as_qrels": "rageval.evaluation.convert",
    "as_run_frame": "rageval.evaluation.convert",
    "ALIASES": "rageval.evaluation.measures",
    "Measure": "rageval.evaluation.measures",
    "measure_from_key": "rageval.evaluation.measures",
    "metric_key": "rageval.evaluation.measures",
    "parse_measure": "rageval.evaluation.measures",
    "parse_measures": "rageval.evaluation.measures",
    "ContractOptions": "rageval.evaluation.metrics",
    "Evaluation": "rageval.evaluation.metrics",
    "Provider": "rageval.evaluation.metrics",
    "evaluate": "rageval.evaluation.metrics",
    "NATIVE": "rageval.evaluation.native",
    "order_ranking": "rageval.evaluation.ordering",
    "PARENT_LEVEL": "rageval.evaluation.rollup",
    "PARENT_PREFIX": "rageval.evaluation.rollup",
    "measure_level": "rageval.evaluation.rollup",
    "rollup_to_parent": "rageval.evaluation.rollup",
    "Evidence": "rageval.evaluation.spans",
    "evidence_spans": "rageval.evaluation.spans",
    "Abstention": "rageval.evaluation.unanswerable",
    "abstention": "rageval.evaluation.unanswerable",
    "top_scores": "rageval.evaluation.unanswerable",
}
__all__ = [
    "ALIASES",
    "Abstention",
    "CONTRACT",
    "CONTRACT_DIGEST",
    "ContractOptions",
    "DEFAULT_DEPTH",
    "DUPLICATE_POLICIES",
    "DuplicatePolicy",
    "Evaluation",
    "Evidence",
    "GAINS",
    "Gain",
    "MISSING_POLICIES",
    "Measure",
    "MissingPolicy",
    "NO_RELEVANT_POLICIES",
    "NoRelevantPolicy",
    "NATIVE",
    "PARENT_LEVEL",
    "PARENT_PREFIX",
    "Provider",
    "RULES",
    "TIE_POLICIES",
    "TiePolicy",
    "abstention",
    "as_measures",
    "as_qrels",
    "as_run_frame",
    "contract_differences",
    "contract_record",
    "evaluate",
    "evidence_spans",
    "measure_from_key",
    "measure_level",
    "metric_key",
    "order_ranking",
    "parse_measure",
    "parse_measures",
    "require_same_contract",
    "rollup_to_parent",
    "top_scores",
]
__getattr__, __dir__ = exports(__name__, _EXPORTS)

if TYPE_CHECKING:
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
    from rageval.evaluation.convert import as_measures, as_qrels, as_run_frame
    from rageval.evaluation.measures import (
        ALIASES,
        Measure,
        measure_from_key,
        metric_key,
        parse_measure,
        parse_measures,
    )
    from rageval.evaluation.metrics import ContractOptions, Evaluation, Provider, evaluate
    from rageval.evaluation.native import NATIVE
    from rageval.evaluation.ordering import order_ranking
    from rageval.evaluation.rollup import PARENT_LEVEL, PARENT_PREFIX, measure_level, rollup_to_parent
    from rageval.evaluation.spans import Evidence, evidence_spans
    from rageval.evaluation.unanswerable import Abstention, abstention, top_scores
