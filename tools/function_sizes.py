"""Every function in ``rageval/``: its lines and parameters, and those over the limits.

``python tools/function_sizes.py [--lines 60] [--params 8] [--all]`` prints the functions over
either limit, longest first (``--all``: every function). Lines run from the ``def`` (decorators
excluded) to the last line of the body; parameters count every name a caller could pass or that
the function receives: positional, ``*args``, keyword-only, ``**kwargs``, and ``self``/``cls``.
A function whose ``def`` line, or the line above it, carries ``# long: <reason>`` is listed with
that reason (``tests/test_function_sizes.py`` allows only those past 60 lines or 8 parameters).
"""

from __future__ import annotations

import argparse
import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REASON = re.compile(r"#\s*long:\s*(\S.*)$")


@dataclass(frozen=True)
class Function:
    path: str  # relative to the repository
    name: str  # Class.method or function, nested ones as outer.inner
    line: int
    lines: int
    params: int
    reason: str  # the "# long:" comment's reason, or ""


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    return len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)


def _reason(source: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    for number in (node.lineno, node.lineno - 1):
        found = REASON.search(source[number - 1]) if number >= 1 else None
        if found:
            return found.group(1).strip()
    return ""


def _visit(node: ast.AST, prefix: str, source: list[str], relative: str, found: list[Function]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + child.name
            lines = (child.end_lineno or child.lineno) - child.lineno + 1
            found.append(Function(relative, name, child.lineno, lines, _params(child), _reason(source, child)))
            _visit(child, name + ".", source, relative, found)
        elif isinstance(child, ast.ClassDef):
            _visit(child, prefix + child.name + ".", source, relative, found)
        else:
            _visit(child, prefix, source, relative, found)


def functions(root: Path = ROOT) -> list[Function]:
    """Every function and method under ``root / "rageval"``, nested ones as ``outer.inner``."""
    found: list[Function] = []
    for path in sorted((root / "rageval").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        relative = path.relative_to(root).as_posix()
        _visit(ast.parse(text, filename=relative), "", text.splitlines(), relative, found)
    return found


def over(limit_lines: int, limit_params: int, root: Path = ROOT) -> list[Function]:
    """The functions over either limit, longest first."""
    big = [f for f in functions(root) if f.lines > limit_lines or f.params > limit_params]
    return sorted(big, key=lambda f: (-f.lines, -f.params, f.path, f.name))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=60)
    parser.add_argument("--params", type=int, default=8)
    parser.add_argument("--all", action="store_true", help="every function, not only those over a limit")
    options = parser.parse_args()
    shown = over(0, -1) if options.all else over(options.lines, options.params)
    for f in shown:
        note = f"  # long: {f.reason}" if f.reason else ""
        print(f"{f.lines:4d} lines {f.params:3d} params  {f.path}:{f.line} {f.name}{note}")
    every = functions()
    print(
        f"{len(shown)} of {len(every)} functions over {options.lines} lines or {options.params} parameters"
        if not options.all
        else f"{len(every)} functions"
    )


if __name__ == "__main__":
    main()
