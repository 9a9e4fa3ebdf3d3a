"""Hostile inputs with a known right answer, for every reader: a byte-order mark, CRLF or a blank
line changes nothing; invalid UTF-8, an empty file (where that is not legitimate), contradicting
records, a key given twice and YAML alias bombs are refused with placed problems."""

from __future__ import annotations

import pytest
from readers import READERS
from table import Row, oracles, override_oracles

from rageval.io import UTF8_FIX

CASES = [(reader, label, expect, data) for reader in READERS for label, expect, data in oracles(reader)]


@pytest.mark.parametrize(
    "reader,label,expect,data", CASES, ids=[f"{reader.name}: {label}" for reader, label, _, _ in CASES]
)
def test_an_input_with_a_known_answer_gets_it(reader, label, expect, data):
    base = reader.run(reader.valid)
    result = reader.run(data)
    if expect == "same":
        assert result.loaded and result.value == base.value, result.problems
    elif expect == "load":
        assert result.loaded, result.problems
    else:
        assert not result.loaded, f"{label} was accepted"
        if "UTF-8" in label:  # the first problem: what follows from a file read only in part may come after
            problem = result.problems[0]
            assert problem.line in (1, 2) and "byte offset" in problem.message and problem.fix == UTF8_FIX


@pytest.mark.parametrize("label,expect,overrides", override_oracles(), ids=[o[0] for o in override_oracles()])
def test_an_override_with_a_known_answer_gets_it(label, expect, overrides):
    row = Row("--set")
    row.count(lambda: __import__("readers").read_overrides(overrides), expect, label)
    assert (row.handled, row.tracebacks, row.wrong) == (1, 0, 0), row.notes


def test_a_relative_plugin_entrypoint_is_an_input_error():
    from readers import read_overrides

    override = 'retrieval.stages=[{type: plugin, entrypoint: ".x:y"}]'
    result = read_overrides([override])  # a traceback (anything but an InputError) raises here
    assert not result.loaded
    assert [(p.file, p.field) for p in result.problems] == [(f"--set {override}", "retrieval.stages[0].entrypoint")]
    assert "(got '.x:y')" in result.problems[0].message
