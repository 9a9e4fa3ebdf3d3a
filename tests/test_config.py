"""Strict run configurations: unknown keys name file and line; overrides are validated the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from rageval.config.load import flatten, load_config
from rageval.errors import ConfigError

BM25 = ROOT / "params" / "bm25.yaml"


def write_config(tmp_path: Path, mutate) -> Path:
    data = yaml.safe_load(BM25.read_text())
    data["benchmark"] = str(ROOT / "rageval" / "demo")
    mutate(data)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_shipped_baseline_is_valid_and_resolves_its_benchmark():
    config = load_config(BM25)
    assert config.benchmark == str((ROOT / "rageval" / "demo").resolve())
    assert config.retrieval.stages[0].type == "bm25"


def test_unknown_top_level_key_names_file_line_and_allowed_keys(tmp_path):
    path = write_config(tmp_path, lambda d: d.update(finalk=5))
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    (problem,) = raised.value.problems
    assert problem.file == str(path) and problem.field == "finalk"
    assert path.read_text().splitlines()[problem.line - 1].startswith("finalk:")
    assert "final_k" in problem.fix


def test_unknown_nested_key_in_a_stage(tmp_path):
    path = write_config(tmp_path, lambda d: d["retrieval"]["stages"][0].update(k3=1))
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    (problem,) = raised.value.problems
    assert problem.field == "retrieval.stages[0].k3"
    assert path.read_text().splitlines()[problem.line - 1].strip().startswith("k3:")


def test_overrides_are_applied_and_validated_naming_the_override():
    config = load_config(BM25, ["retrieval.stages.0.k1=1.2", "chunking.size=300", "evaluation.measures=[RR, nDCG@5]"])
    assert (config.retrieval.stages[0].k1, config.chunking.size) == (1.2, 300)
    assert config.evaluation.measures == ["RR", "nDCG@5"]
    for override, field in (
        ("chunking.sise=3", "chunking.sise"),
        ("final_k=abc", "final_k"),
        ("retrieval.stages.0.b=2", "retrieval.stages[0].b"),
    ):
        with pytest.raises(ConfigError) as raised:
            load_config(BM25, [override])
        (problem,) = raised.value.problems
        assert problem.file == f"--set {override}" and problem.field == field


def test_bad_measure_and_bad_override_syntax(tmp_path):
    path = write_config(tmp_path, lambda d: d["evaluation"].update(measures=["nDCG@10", "Recall@@5"]))
    with pytest.raises(ConfigError, match="Recall@@5"):
        load_config(path)
    with pytest.raises(ConfigError, match="key=value"):
        load_config(BM25, ["just-a-key"])


def test_unknown_tokenizer_and_oversized_overlap_are_refused():
    with pytest.raises(ConfigError, match="valid choices are words"):
        load_config(BM25, ["chunking.tokenizer=gpt9"])
    with pytest.raises(ConfigError, match="at most half"):
        load_config(BM25, ["chunking.overlap=150"])


def test_flatten_keeps_scalar_lists_whole():
    assert flatten({"a": {"b": [1, 2]}, "s": [{"k": 1}]}) == {"a.b": [1, 2], "s.0.k": 1}


def test_stages_that_cannot_work_fail_with_file_line_and_field_before_a_run_exists(tmp_path):
    def mutate(data):
        data["retrieval"]["stages"] += [
            {"type": "plugin", "name": "mine", "entrypoint": "no_such_module:Thing"},
            {"type": "runfile", "name": "prod", "path": "missing.trec"},
            {"type": "rerank", "name": "ce", "model": "no-such-model-package"},
        ]
        data["context"] = {"tokenizer": "words"}

    path = write_config(tmp_path, mutate)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    found = {(p.file, p.field): p for p in caught.value.problems}
    assert set(found) == {
        (str(path), "retrieval.stages[1].entrypoint"),
        (str(path), "retrieval.stages[2].path"),
        (str(path), "retrieval.stages[3].model"),
    }
    lines = path.read_text().splitlines()
    for (_, field), problem in found.items():
        key = field.rsplit(".", 1)[1]
        assert lines[problem.line - 1].strip().startswith(key), (field, problem.line)
    assert "cannot import 'no_such_module'" in found[(str(path), "retrieval.stages[1].entrypoint")].message
    assert "never downloaded" in found[(str(path), "retrieval.stages[3].model")].message


def test_a_stage_that_fails_to_build_names_its_place_in_the_configuration():
    from rageval.benchmark.chunking import chunk_corpus
    from rageval.benchmark.loading import load_benchmark
    from rageval.benchmark.schema import ChunkingConfig
    from rageval.retrieval import Corpus, Pipeline
    from rageval.retrieval.schema import BM25Config, PluginConfig

    documents = load_benchmark(ROOT / "rageval" / "demo").documents
    corpus = Corpus(chunk_corpus(documents.values(), ChunkingConfig()), documents)
    stages = [
        BM25Config(type="bm25"),
        PluginConfig(type="plugin", entrypoint="plugins.keyword:KeywordOverlap", options={"colour": "red"}),
    ]
    with pytest.raises(ConfigError) as caught:
        Pipeline.from_config(stages, corpus, source="params/mine.yaml")
    (problem,) = caught.value.problems
    assert (problem.file, problem.field) == ("params/mine.yaml", "retrieval.stages[1].options")
    assert "unexpected keyword argument 'colour'" in problem.message


# --------------------------------------------------------------------------- hostile overrides


@pytest.mark.parametrize(
    "override,message",
    [
        ("name.x=1", "name is a value ('bm25-baseline'), not a section: it has no key 'x'"),
        ("final_k.0=1", "final_k is a value (5), not a section: it has no key '0'"),
        ("retrieval.stages.7.k1=1", "retrieval.stages is a list; '7' is not one of its positions (1 item(s): 0–0)"),
        ("retrieval.stages.x=1", "retrieval.stages is a list; 'x' is not one of its positions (1 item(s): 0–0)"),
    ],
)
def test_an_override_through_a_value_or_past_a_list_names_itself(override, message):
    with pytest.raises(ConfigError) as raised:
        load_config(BM25, [override])
    (problem,) = raised.value.problems
    assert (problem.file, problem.field, problem.message) == ("--set", override, message)
    assert problem.fix


def test_an_override_value_follows_the_yaml_rules():
    with pytest.raises(ConfigError) as raised:
        load_config(BM25, ["retrieval.stages.0.tokenizer={stemmer: english, stemmer: none}"])
    (problem,) = raised.value.problems
    assert problem.file == "--set retrieval.stages.0.tokenizer={stemmer: english, stemmer: none}"
    assert problem.message == "key 'stemmer' is given twice (on line 1)"
    with pytest.raises(ConfigError, match="at most 10000 more than are written"):
        load_config(
            BM25,
            [
                "description="
                + "[&a [1,1,1,1,1,1,1,1,1,1], "
                + ", ".join(["[*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]"] * 2000)
                + "]"
            ],
        )


def test_overrides_that_replace_whole_sections_are_validated_not_crashed():
    for override, field in (("retrieval=1", "retrieval"), ("retrieval.stages=5", "retrieval.stages")):
        with pytest.raises(ConfigError) as raised:
            load_config(BM25, [override])
        assert [p.field for p in raised.value.problems] == [field]
    with pytest.raises(ConfigError, match="'٠' is not one of its positions"):  # an Arabic-Indic zero is no 0
        load_config(BM25, ["retrieval.stages.٠.k1=1"])


def test_a_params_file_with_final_k_twice_is_refused(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        BM25.read_text().replace("benchmark: ../rageval/demo", f"benchmark: {ROOT / 'rageval' / 'demo'}")
        + "final_k: 50\n"
    )
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    (problem,) = raised.value.problems
    lines = path.read_text().splitlines()
    assert (problem.file, problem.field, problem.line) == (str(path), "final_k", len(lines))
    first = next(i for i, line in enumerate(lines, 1) if line.startswith("final_k:"))
    assert problem.message == f"key 'final_k' is given twice (on lines {first} and {len(lines)})"


def test_an_override_key_with_an_empty_part_is_refused():
    for override in ("retrieval..k1=1", ".=1", "final_k.=2"):
        with pytest.raises(ConfigError) as raised:
            load_config(BM25, [override])
        (problem,) = raised.value.problems
        assert (problem.file, problem.field) == ("--set", override) and "has an empty part" in problem.message
    with pytest.raises(ConfigError) as raised:
        load_config(BM25, [""])
    assert raised.value.problems[0].field == "''"
