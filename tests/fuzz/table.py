"""The closing note's table: per file type, how many hostile inputs were tried and how they ended.

    PYTHONPATH=. python tests/fuzz/table.py [--random N]

Two kinds of input per file type:

- **with a known right answer** (:func:`oracles`): a byte-order mark, CRLF line ends or a blank line
  added must load and give the same value as the valid file; invalid UTF-8, an empty file (where
  empty is not legitimate), records that contradict each other, a key given twice and a YAML alias
  bomb must be refused, with problems that name the file and a line or field;
- **random** (the fuzz suite's strategies, derandomized): N per file type, each must load or be
  refused with placed problems — their right answer is unknown, so they can count as a traceback
  but never as a wrong result.

Columns: tried; handled (the right answer, or for random inputs a load or a placed refusal);
tracebacks (any other exception, or a problem naming no file and line or field); wrong result
with exit 0 (an input with a known answer that loaded when it must be refused, or loaded a
different value); the slowest single input in seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # tests/: conftest's tiny benchmark

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from mutations import hostile, override  # noqa: E402
from readers import READERS, Outcome, Reader, Traceback, read_overrides  # noqa: E402

BOMB = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)


@dataclass
class Row:
    name: str
    tried: int = 0
    handled: int = 0
    tracebacks: int = 0
    wrong: int = 0
    slowest: float = 0.0
    notes: list[str] = field(default_factory=list)

    def count(self, run: Callable[[], Outcome], expect: str | None, label: str, same: Outcome | None = None) -> None:
        """One input: ``expect`` is 'same', 'refuse', 'load' or None (random: any placed outcome)."""
        self.tried += 1
        started = time.perf_counter()
        try:
            result = run()
        except Traceback as exc:
            self.tracebacks += 1
            self.notes.append(f"traceback ({label}): {exc}"[:300])
            return
        finally:
            self.slowest = max(self.slowest, time.perf_counter() - started)
        right = (
            expect is None
            or (expect == "refuse" and not result.loaded)
            or (expect == "load" and result.loaded)
            or (expect == "same" and result.loaded and same is not None and result.value == same.value)
        )
        if right:
            self.handled += 1
        else:
            self.wrong += 1
            self.notes.append(
                f"wrong ({label}): expected {expect}, got {'a load' if result.loaded else result.problems[:2]}"
            )


def oracles(reader: Reader) -> list[tuple[str, str, bytes]]:
    """(label, expectation, bytes) with a known right answer for ``reader``'s file."""
    valid = reader.valid
    first = valid.find(b"\n") + 1 or len(valid)
    out = [
        ("byte-order mark", "same", b"\xef\xbb\xbf" + valid),
        ("CRLF line ends", "same", valid.replace(b"\n", b"\r\n")),
        ("a blank line at the end", "same", valid + b"\n"),
        ("invalid UTF-8 (Latin-1 é) on line 2", "refuse", valid[:first] + b"caf\xe9 " + valid[first:]),
        ("a lone continuation byte at the start", "refuse", b"\x80" + valid),
        ("empty file", "load" if reader.empty_ok else "refuse", b""),
        ("blank lines only", "load" if reader.empty_ok else "refuse", b"\n\n  \n"),
    ]
    if reader.kind in ("lines", "jsonl", "csv") and not reader.target.endswith(".sgml"):
        # (In SGML the mark falls between blocks, into no value: the joined file holds the same topics.)
        out.append(("the file again, joined with its byte-order mark", "refuse", valid + b"\xef\xbb\xbf" + valid))
    if reader.conflict is not None:
        out.append(("records that contradict each other", "refuse", reader.conflict(valid)))
    if reader.kind == "yaml":
        out.append(("YAML alias bomb", "refuse", BOMB.encode()))
        out.append(
            ("YAML alias bomb after the valid keys", "refuse", valid + b"\n" + BOMB.replace("a:", "zz:").encode())
        )
        out.append(("recursive YAML alias", "refuse", valid + b"\nzz: &zz [*zz]\n"))
    if reader.kind in ("jsonl", "json"):
        brace = valid.find(b"{")
        out.append(
            ("a JSON key given twice", "refuse", valid[: brace + 1] + b'"zz": 1, "zz": 2, ' + valid[brace + 1 :])
        )
        out.append(
            ("a lone surrogate escape", "refuse", valid[: brace + 1] + b'"zz": "\\ud800", ' + valid[brace + 1 :])
        )
    if reader.kind == "csv":
        header_end = valid.find(b"\n")
        first_column = valid[: valid.find(b",")]
        out.append(
            ("a CSV column named twice", "refuse", valid[:header_end] + b"," + first_column + valid[header_end:])
        )
    return out


def override_oracles() -> list[tuple[str, str, list[str]]]:
    return [
        ("a path through a value", "refuse", ["name.x=1"]),
        ("past a list's end", "refuse", ["retrieval.stages.5.k1=1"]),
        ("an empty key part", "refuse", ["retrieval..k1=1"]),
        (
            "a key given twice in the value",
            "refuse",
            ["retrieval.stages.0.tokenizer={stemmer: english, stemmer: none}"],
        ),
        (
            "an alias bomb in the value",
            "refuse",
            [
                "description="
                + "[&a [1,1,1,1,1,1,1,1,1,1], "
                + ", ".join(["[*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]"] * 2000)
                + "]"
            ],
        ),
        ("a control character in the value", "refuse", ['description="a\\0b"']),
        ("no '='", "refuse", ["final_k"]),
        ("a valid override", "load", ["final_k=7"]),
    ]


def random_inputs(row: Row, count: int, strategy: st.SearchStrategy, run: Callable[[object], Outcome]) -> None:
    if count <= 0:
        return

    @settings(
        max_examples=count,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def each(value: object) -> None:
        row.count(lambda: run(value), None, f"random {value!r}"[:120])

    each()


def table(random: int) -> list[Row]:
    rows = []
    for reader in READERS:
        row = Row(reader.name)
        base = reader.run(reader.valid)
        assert base.loaded, (reader.name, base.problems)
        for label, expect, data in oracles(reader):
            row.count(lambda data=data, reader=reader: reader.run(data), expect, label, same=base)
        random_inputs(row, random, hostile(reader.valid, reader.kind), reader.run)
        rows.append(row)
    row = Row("--set overrides")
    for label, expect, overrides in override_oracles():
        row.count(lambda overrides=overrides: read_overrides(overrides), expect, label)
    random_inputs(row, random, st.lists(override(), min_size=1, max_size=3), read_overrides)
    rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--random", type=int, default=200, help="random inputs per file type")
    args = parser.parse_args()
    rows = table(args.random)
    print("| file type | inputs tried | handled | tracebacks | wrong result, exit 0 | slowest input (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row.name} | {row.tried} | {row.handled} | {row.tracebacks} | {row.wrong} | {row.slowest:.2f} |")
    total = Row("all", *(sum(getattr(r, k) for r in rows) for k in ("tried", "handled", "tracebacks", "wrong")))
    print(
        f"| **all** | {total.tried} | {total.handled} | {total.tracebacks} | {total.wrong} | {max(r.slowest for r in rows):.2f} |"
    )
    for row in rows:
        for note in row.notes[:5]:
            print(f"- {row.name}: {note}")


if __name__ == "__main__":
    main()
