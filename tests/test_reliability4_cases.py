"""Issue 28's generated cases (tools/reliability_cases.py: inputs, faults, concurrency, security,
secrets), each run for real and required to be handled: no case mishandled, none accepted where a
refusal was expected (wrong exit 0), nothing recorded lost. docs/reliability.md holds the table."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
from conftest import ROOT

spec = importlib.util.spec_from_file_location("reliability_cases", ROOT / "tools" / "reliability_cases.py")
assert spec is not None and spec.loader is not None
cases_module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = cases_module  # dataclasses look their module up there
spec.loader.exec_module(cases_module)
CASES = cases_module.cases()


def test_there_are_at_least_forty_cases_in_every_family():
    families = {c.family for c in CASES}
    assert families == {"inputs", "faults", "concurrency", "security", "secrets"}
    assert len(CASES) >= 40 and len({(c.family, c.name) for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.family}: {c.name}" for c in CASES])
def test_a_generated_case_is_handled(case, monkeypatch):
    monkeypatch.setenv("RAGEVAL_SEARCH_TOKEN", cases_module.SECRET)
    cache = os.environ.get("RAGEVAL_CACHE")
    outcome, observed = cases_module.run_case(case)
    assert os.environ.get("RAGEVAL_CACHE") == cache  # a case leaves the session's cache as it found it
    assert outcome == "handled", observed
    assert observed  # what was seen, in words (the table's "observed" column)
