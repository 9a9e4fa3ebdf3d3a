"""Measure strings, parsed once: ``nDCG@10``, ``Hit@5``, ``MRR`` … as ir-measures defines them, and
their reversible names as MLflow metric keys."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import ir_measures

from rageval.errors import MeasureError, Problem
from rageval.validation import key_text, metric_key

# Names users know from other tools → the ir-measures name that computes the same thing.
ALIASES: dict[str, str] = {"Hit": "Success", "MRR": "RR"}
_ALIAS_PATTERN = re.compile(r"^(" + "|".join(ALIASES) + r")(?=$|[@(])")


@dataclass(frozen=True)
class Measure:
    """A measure as the user wrote it, and the ir-measures object that defines it."""

    text: str
    measure: ir_measures.measures.Measure

    @property
    def key(self) -> str:
        """Its name in MLflow (see :func:`metric_key`)."""
        return metric_key(self.text)

    @property
    def definition(self) -> str:
        return repr(self.measure)


def parse_measure(text: str) -> Measure:
    """Parse ``nDCG@10``, ``Hit@5``, ``MRR`` … into a :class:`Measure`."""
    canonical = _ALIAS_PATTERN.sub(lambda m: ALIASES[m.group(1)], text.strip())
    try:
        measure = ir_measures.parse_measure(canonical)
    except (ValueError, NameError, SyntaxError, TypeError, AttributeError) as exc:
        raise MeasureError(
            Problem(
                file="<measures>",
                field="measures",
                message=f"cannot parse measure {text!r}: {exc}",
                fix="write measures as ir-measures names them, e.g. nDCG@10, R@100, RR, P@5, AP, Rprec, Success@5 "
                f"(aliases: {', '.join(f'{a}→{b}' for a, b in ALIASES.items())})",
            )
        ) from None
    wrong = _parameter_problem(measure)
    if wrong:
        raise MeasureError(
            Problem(file="<measures>", field="measures", message=f"measure {text!r}: {wrong[0]}", fix=wrong[1])
        )
    return Measure(text=text.strip(), measure=measure)


# Parameters that count: a cut-off is a rank, ``rel`` a grade. ir-measures takes any number for them
# (``P@1.5`` computes P@1, ``P@0`` divides by zero), so they are checked here, before anything runs.
_COUNTS = {"cutoff": 1, "rel": 0}


def _parameter_problem(measure: ir_measures.measures.Measure) -> tuple[str, str] | None:
    """What is wrong with a counting parameter of ``measure`` (message, fix), or None."""
    for name, least in _COUNTS.items():
        value = measure.params.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            what = "a positive integer" if least == 1 else f"an integer >= {least}"
            example = "@10" if name == "cutoff" else "(rel=2)"
            return f"{name} {value!r} is not {what}", f"write the {name} as {what}, e.g. {measure.NAME}{example}"
    return None


def parse_measures(texts: Iterable[str]) -> list[Measure]:
    """Parse each text (:func:`parse_measure`); two texts with the same definition are an error."""
    measures = [parse_measure(t) for t in texts]
    seen: dict[str, str] = {}
    for m in measures:
        if m.definition in seen:
            raise MeasureError(
                Problem(file="<measures>", field="measures", message=f"{m.text!r} repeats {seen[m.definition]!r}")
            )
        seen[m.definition] = m.text
    return measures


def param_default(measure: ir_measures.measures.Measure, name: str) -> Any:
    """The value ``measure`` has for parameter ``name`` when it is not given; None for none."""
    supported = measure.SUPPORTED_PARAMS.get(name)
    default = supported.default if supported is not None else None
    # ir-measures marks "no default" (no cutoff, no gains) with a bare object() sentinel.
    return default if isinstance(default, bool | int | float | str) else None


def param(measure: ir_measures.measures.Measure, name: str) -> Any:
    """The value of parameter ``name`` of ``measure``: as given, else its default (None for none)."""
    return measure.params[name] if name in measure.params else param_default(measure, name)


# --------------------------------------------------------------------------- metric keys


def measure_from_key(key: str) -> str:
    """``nDCG_at_10`` → ``nDCG@10``: the measure text :func:`metric_key` wrote (one scheme, in
    :mod:`rageval.validation`)."""
    return key_text(key)
