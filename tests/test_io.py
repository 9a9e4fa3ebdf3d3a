"""rageval.io, the one door: encodings, files, duplicate keys, aliases and values, with the exact
problem (file, line or byte offset, field, fix) a user reads."""

from __future__ import annotations

import time

import pytest

from rageval.csvfiles import read_table
from rageval.errors import ConfigError, InputError
from rageval.io import (
    ALIAS_BUDGET,
    parse_json,
    parse_yaml,
    read_jsonl,
    read_lines,
    read_text,
    read_yaml,
)

BILLION_LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)


def one_problem(raised):
    (problem,) = raised.value.problems
    return problem


# --------------------------------------------------------------------------- encodings


@pytest.mark.parametrize("reader", ["lines", "text", "jsonl", "csv", "yaml"])
def test_a_byte_order_mark_is_never_part_of_the_first_value(tmp_path, reader):
    plain = {"lines": b"q1 0 d1 1\n", "text": b"q1\n", "jsonl": b'{"a": 1}\n', "csv": b"a,b\n1,2\n", "yaml": b"a: 1\n"}
    path = tmp_path / f"file.{'csv' if reader == 'csv' else 'txt'}"
    results = []
    for data in (plain[reader], b"\xef\xbb\xbf" + plain[reader]):
        path.write_bytes(data)
        if reader == "lines":
            results.append(list(read_lines(path, [])))
        elif reader == "text":
            results.append(read_text(path))
        elif reader == "jsonl":
            results.append(read_jsonl(path))
        elif reader == "csv":
            results.append(read_table(path))
        else:
            results.append(read_yaml(path, ConfigError))
    assert results[0] == results[1]
    if reader == "lines":
        assert results[1] == [(1, "q1 0 d1 1")]


def test_invalid_utf8_names_file_line_and_byte_offset_in_every_reader(tmp_path):
    # 'café' in Latin-1 on line 3: the é is byte 24 of the file (counted from 0).
    data = b"line one\r\nline two\nx caf\xe9\n"
    expected = "not UTF-8: byte 0xe9 at byte offset 24 (invalid continuation byte)"
    for suffix in ("txt", "jsonl", "csv", "yaml"):
        path = tmp_path / f"f.{suffix}"
        path.write_bytes(data)
        problems: list = []
        if suffix == "txt":
            assert list(read_lines(path, problems)) == [(1, "line one"), (2, "line two")]
        elif suffix == "jsonl":
            problems = read_jsonl(path)[1][-1:]
        elif suffix == "csv":
            problems = read_table(path)[1]
        else:
            with pytest.raises(ConfigError) as raised:
                read_yaml(path, ConfigError)
            problems = raised.value.problems
        (problem,) = problems
        assert (problem.file, problem.line, problem.message) == (str(path), 3, expected)
        assert problem.fix == "save the file as UTF-8 (with or without a byte-order mark)"


def test_lines_end_as_python_counts_them(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"a\r\nb\rc\n\nd")
    assert list(read_lines(path, [])) == [(1, "a"), (2, "b"), (3, "c"), (4, ""), (5, "d")]


@pytest.mark.parametrize("make", ["missing", "folder"])
def test_a_missing_file_or_a_folder_is_a_problem_not_an_oserror(tmp_path, make):
    path = tmp_path / "thing"
    if make == "folder":
        path.mkdir()
    problems: list = []
    assert list(read_lines(path, problems)) == []
    message = "is a folder, not a file" if make == "folder" else "file not found"
    assert [(p.file, p.message) for p in problems] == [(str(path), message)]
    with pytest.raises(ConfigError, match=message):
        read_yaml(path, ConfigError)
    assert read_table(path.with_suffix(".csv"))[1][0].message == "file not found"


# --------------------------------------------------------------------------- YAML


def test_a_yaml_key_given_twice_names_both_lines():
    with pytest.raises(ConfigError) as raised:
        parse_yaml("name: a\nfinal_k: 5\nsplit: dev\nfinal_k: 50\n", "p.yaml", ConfigError)
    problem = one_problem(raised)
    assert (problem.file, problem.line, problem.field) == ("p.yaml", 4, "final_k")
    assert problem.message == "key 'final_k' is given twice (on lines 2 and 4)"
    assert problem.fix == "keep one of them: YAML would silently use the last"


def test_keys_python_would_merge_are_duplicates_and_merge_keys_may_be_overridden():
    with pytest.raises(InputError, match="given twice"):
        parse_yaml("x:\n  1: a\n  true: b\n", "p.yaml")
    data, lines = parse_yaml("base: &b {k1: 1, b: 2}\nstage:\n  <<: *b\n  k1: 3\n", "p.yaml")
    assert data["stage"] == {"k1": 3, "b": 2} and lines[("stage", "k1")] == 4


def test_a_billion_laughs_is_refused_in_milliseconds():
    started = time.perf_counter()
    with pytest.raises(InputError) as raised:
        parse_yaml(BILLION_LAUGHS, "bomb.yaml")
    assert time.perf_counter() - started < 0.5
    problem = one_problem(raised)
    assert problem.line == 1 and f"at most {ALIAS_BUDGET} more than are written" in problem.message
    assert problem.fix == "write the values out, or reuse fewer anchors"


def test_aliases_within_the_budget_are_fine_and_recursion_is_refused():
    data, _ = parse_yaml("s: &s {type: bm25, k1: 1}\nlist: [*s, *s, *s]\n", "p.yaml")
    assert data["list"] == [{"type": "bm25", "k1": 1}] * 3
    with pytest.raises(InputError, match="refers to the anchor that contains it"):
        parse_yaml("a: &a [1, *a]\n", "p.yaml")


@pytest.mark.parametrize(
    "text,line,message",
    [
        ("a:\n  b: 2024-13-45\n", 2, "not a valid value: month must be in 1..12"),
        ('a: "\\ud800"\n', 1, "escape"),  # libyaml's words or rageval's: a lone surrogate is refused
        ('a: "x\\0y"\n', 1, "a control character (U+0000) in a value"),
        ("a: \x01\n", 1, "the character U+0001 is not allowed in YAML"),
        ("[" * 200 + "]" * 200, 1, "nested more than 100 levels deep"),
        ("a: 1\n---\nb: 2\n", 2, "not valid YAML: but found another document"),
        ("a: b: c\n", 1, "not valid YAML: mapping values are not allowed in this context"),
    ],
)
def test_values_yaml_accepts_but_rageval_cannot_use(text, line, message):
    with pytest.raises(InputError) as raised:
        parse_yaml(text, "p.yaml")
    problem = one_problem(raised)
    assert (problem.file, problem.line) == ("p.yaml", line)
    assert problem.message == message or (message == "escape" and "escape" in problem.message)


def test_deep_block_nesting_is_refused_not_a_recursion_error():
    text = "".join(" " * i + "k:\n" for i in range(400))
    started = time.perf_counter()
    with pytest.raises(InputError, match="nested more than 100 levels deep"):
        parse_yaml(text, "p.yaml")
    assert time.perf_counter() - started < 1


# --------------------------------------------------------------------------- JSON


@pytest.mark.parametrize(
    "text,message",
    [
        ('{"grade": 1, "grade": 3}', "key 'grade' appears twice in one object (JSON keeps only the last)"),
        ('{"score": NaN}', "NaN is not a JSON number"),
        ('{"score": -Infinity}', "-Infinity is not a JSON number"),
        ('{"score": 1e999}', "number 1e999 is out of range"),
        ('{"id": "\\udc00"}', "a \\u escape that is not a character (a lone UTF-16 surrogate such as \\ud800)"),
        ("[" * 100_000, "JSON nested too deeply"),
        ('{"id": ' + "1" * 5000 + "}", "malformed JSON: Exceeds the limit (4300 digits)"),
    ],
)
def test_json_values_that_would_become_wrong_data(text, message):
    with pytest.raises(InputError) as raised:
        parse_json(text, "f.jsonl", 7)
    problem = one_problem(raised)
    assert (problem.file, problem.line) == ("f.jsonl", 7) and problem.message.startswith(message)


def test_jsonl_reports_each_bad_line_and_keeps_the_good_ones(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text('{"a": 1}\n\n[1]\n{"a": \n{"a": 2, "a": 2}\n{"b": 2}\n', encoding="utf-8")
    rows, problems = read_jsonl(path)
    assert rows == [(1, {"a": 1}), (6, {"b": 2})]
    assert [(p.line, p.message[:26]) for p in problems] == [
        (3, "expected a JSON object, go"),
        (4, "malformed JSON: Expecting "),
        (5, "key 'a' appears twice in o"),
    ]


# --------------------------------------------------------------------------- CSV


def test_an_excel_csv_utf8_sheet_reads_like_any_other(tmp_path):
    path = tmp_path / "sheet.csv"
    path.write_bytes(b'\xef\xbb\xbfitemId,grade,notes\r\ni1,2,"two\r\nlines"\r\ni2,,\r\n')
    rows, problems = read_table(path)
    assert problems == [] and rows == [
        (2, {"itemId": "i1", "grade": "2", "notes": "two\r\nlines"}),
        (4, {"itemId": "i2"}),
    ]


def test_a_csv_header_naming_a_column_twice_is_refused(tmp_path):
    path = tmp_path / "sheet.csv"
    path.write_text("itemId,grade,grade\ni1,1,3\n", encoding="utf-8")
    rows, (problem,) = read_table(path)
    assert rows == [] and (problem.line, problem.field) == (1, "grade")
    assert problem.message == "the header names column(s) grade more than once"


def test_a_semicolon_separated_sheet_says_so(tmp_path):
    path = tmp_path / "sheet.csv"
    path.write_text("itemId;grade\ni1;1\n", encoding="utf-8")
    _, (problem,) = read_table(path)
    assert "not comma-separated" in problem.message and "comma delimited" in problem.fix


def test_a_cell_longer_than_the_csv_default_limit_reads(tmp_path):
    path = tmp_path / "sheet.csv"
    path.write_text("itemId,text\ni1," + "x" * 200_000 + "\n", encoding="utf-8")
    rows, problems = read_table(path)
    assert problems == [] and len(rows[0][1]["text"]) == 200_000


# --------------------------------------------------------------------------- every YAML the user writes


def yaml_readers():
    """(name, read) for every reader of a user-written YAML file; ``read(path)`` raises its InputError."""
    from rageval.analysis.gate import load_policy
    from rageval.benchmark.loading import load_benchmark
    from rageval.benchmark.migration import load_chunking
    from rageval.config.load import load_config
    from rageval.config.sweep import load_sweep

    def benchmark(path):
        folder = path.parent / "bench"
        folder.mkdir(exist_ok=True)
        (folder / "benchmark.yaml").write_bytes(path.read_bytes())
        return load_benchmark(folder)

    return [
        ("params", load_config),
        ("sweep", load_sweep),
        ("policy", load_policy),
        ("chunking", load_chunking),
        ("benchmark.yaml", benchmark),
    ]


@pytest.mark.parametrize("name,read", yaml_readers(), ids=[name for name, _ in yaml_readers()])
def test_every_yaml_reader_refuses_duplicate_keys_and_alias_bombs(tmp_path, name, read):
    path = tmp_path / "file.yaml"
    path.write_text("version: 1\nname: x\nversion: 2\n", encoding="utf-8")
    with pytest.raises(InputError) as raised:
        read(path)
    problem = next(p for p in raised.value.problems if "given twice" in p.message)
    assert (problem.line, problem.field, problem.message) == (
        3,
        "version",
        "key 'version' is given twice (on lines 1 and 3)",
    )
    path.write_text(BILLION_LAUGHS, encoding="utf-8")
    started = time.perf_counter()
    with pytest.raises(InputError, match="anchors and aliases expand"):
        read(path)
    assert time.perf_counter() - started < 1
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(InputError, match="not UTF-8: byte 0xe9 at byte offset 9"):
        read(path)


def test_a_byte_order_mark_inside_a_file_is_refused_not_read_into_an_id(tmp_path):
    path = tmp_path / "qrels"
    path.write_bytes(b"\xef\xbb\xbfq1 0 d1 1\n\xef\xbb\xbfq2 0 d2 1\n")  # two exported files joined
    problems: list = []
    assert list(read_lines(path, problems)) == [(1, "q1 0 d1 1")]
    (problem,) = problems
    assert (problem.line, problem.message) == (
        2,
        "a byte-order mark at the start of line 2, inside the file (were files joined with their marks?)",
    )


def test_an_error_with_very_many_problems_lists_fifty_and_counts_the_rest():
    from rageval.errors import InputError, Problem

    error = InputError([Problem(file="f", line=n, message="bad") for n in range(1, 201)])
    lines = str(error).splitlines()
    assert lines[0] == "200 problems found:" and lines[1] == "f:1: bad" and lines[50] == "f:50: bad"
    assert lines[-1] == "… and 150 more" and len(error.problems) == 200
