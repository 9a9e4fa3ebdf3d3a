"""The house rules of docs/architecture.md, read from the source with ``ast``: which package may import
which, no import cycle between modules (function-level and TYPE_CHECKING imports count too), mlflow
only under rageval/tracking/, and no module past 600 lines. Each failure names the file and line."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rageval"

BASE = frozenset({"errors", "paths", "hashing", "io", "validation", "safety", "lazy", "progress", "retry", "keys", "csvfiles"})
PURE = ("benchmark", "retrieval", "evaluation", "config", "experiment", "judging", "analysis", "release")
# What each top-level part of rageval may import from rageval (besides itself). The arrows follow the
# data flow: params → config → benchmark + chunks → stages → rankings → measures → sealed run → comparison.
ALLOWED: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "paths": frozenset(),
    "hashing": frozenset(),
    "io": frozenset({"errors"}),
    "validation": frozenset({"errors"}),
    "safety": frozenset(),
    "lazy": frozenset(),
    "progress": frozenset(),
    "retry": frozenset(),
    "keys": frozenset({"errors"}),
    "csvfiles": frozenset({"errors", "io"}),
    "benchmark": BASE,
    "retrieval": BASE | {"benchmark"},
    "evaluation": BASE | {"benchmark"},
    "config": BASE | {"benchmark", "retrieval", "evaluation"},
    "experiment": BASE | {"benchmark", "retrieval", "evaluation", "config"},
    "judging": BASE | {"benchmark", "evaluation"},
    "analysis": BASE | {"benchmark", "evaluation", "config", "experiment"},
    "release": BASE | {"benchmark", "evaluation", "config", "experiment", "analysis"},
    "tracking": BASE | {"benchmark", "evaluation", "config", "experiment", "analysis"},
    "testing": BASE | {"benchmark", "retrieval"},
    "execution": BASE | set(PURE) | {"tracking"},
    "workflows": BASE | set(PURE) | {"tracking", "execution"},
    "cli": BASE | set(PURE) | {"tracking", "execution", "workflows"},
    "__init__": BASE | set(PURE) | {"tracking", "workflows"},
    "demo": frozenset(),
}
MAX_LINES = 600


@dataclass(frozen=True)
class Edge:
    source: str  # importing module, dotted
    target: str  # imported rageval module, dotted
    file: Path
    line: int
    root: Path = PACKAGE

    def __str__(self) -> str:
        return f"{self.file.relative_to(self.root.parent)}:{self.line}: {self.source} imports {self.target}"


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def known_modules(root: Path = PACKAGE) -> set[str]:
    return {module_name(p, root) for p in root.rglob("*.py")}


def imports(path: Path) -> Iterator[tuple[str, str | None, int]]:
    """Every import in ``path`` as (module, imported name or None, line), wherever it stands
    (function bodies and ``if TYPE_CHECKING:`` blocks included)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                yield node.module, alias.name, node.lineno


def edges(root: Path = PACKAGE) -> list[Edge]:
    modules = known_modules(root)
    out = []
    for path in sorted(root.rglob("*.py")):
        source = module_name(path, root)
        seen: set[str] = set()
        for module, name, line in imports(path):
            # `from rageval.evaluation import evaluate` is an edge to rageval.evaluation, while
            # `from rageval.retrieval import encoders` is one to the module rageval.retrieval.encoders.
            target = f"{module}.{name}" if f"{module}.{name}" in modules else module
            if target in modules and target != source and target not in seen:
                seen.add(target)
                out.append(Edge(source, target, path, line, root))
    return out


def part(module: str) -> str:
    """The top-level part of rageval a module belongs to: ``rageval.benchmark.chunking`` → ``benchmark``."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def arrow_violations(found: list[Edge]) -> list[str]:
    bad = []
    for edge in found:
        src, dst = part(edge.source), part(edge.target)
        if src != dst and dst not in ALLOWED.get(src, frozenset()):
            bad.append(
                f"{edge}: {src} may not import {dst} (allowed: {', '.join(sorted(ALLOWED.get(src, ()))) or 'nothing'})"
            )
    return bad


def cycles(found: list[Edge]) -> list[str]:
    """Each import cycle between modules, once, as the chain of its edges."""
    graph: dict[str, list[Edge]] = {}
    for edge in found:
        graph.setdefault(edge.source, []).append(edge)
    reported: set[frozenset[str]] = set()
    out = []
    state: dict[str, int] = {}
    stack: list[Edge] = []

    def visit(node: str) -> None:
        state[node] = 1
        for edge in graph.get(node, []):
            if state.get(edge.target) == 1:
                start = next(i for i, e in enumerate(stack + [edge]) if e.source == edge.target)
                chain = (stack + [edge])[start:]
                key = frozenset(e.source for e in chain)
                if key not in reported:
                    reported.add(key)
                    out.append(" → ".join(str(e) for e in chain))
            elif state.get(edge.target) is None:
                stack.append(edge)
                visit(edge.target)
                stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return out


def mlflow_outside_tracking(root: Path = PACKAGE) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        if part(module_name(path, root)) == "tracking":
            continue
        for module, _, line in imports(path):
            if module == "mlflow" or module.startswith("mlflow."):
                bad.append(f"{path.relative_to(root.parent)}:{line}: imports {module}; only rageval/tracking/ may")
                break
    return bad


def long_modules(root: Path = PACKAGE) -> list[str]:
    return [
        f"{p.relative_to(root.parent)}: {n} lines (at most {MAX_LINES}; split it along its seams)"
        for p in sorted(root.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    ]


def test_every_top_level_part_has_its_rules():
    parts = {part(m) for m in known_modules()}
    assert parts <= set(ALLOWED), f"add rules for {sorted(parts - set(ALLOWED))} to ALLOWED and docs/architecture.md"


def test_arrows_follow_the_data_flow():
    found = arrow_violations(edges())
    assert not found, "\n" + "\n".join(found)


def test_no_import_cycles():
    found = cycles(edges())
    assert not found, "\n" + "\n".join(found)


def test_only_tracking_imports_mlflow():
    found = mlflow_outside_tracking()
    assert not found, "\n" + "\n".join(found)


def test_no_module_over_600_lines():
    found = long_modules()
    assert not found, "\n" + "\n".join(found)


# ------------------------------------------------------------------ the rules catch what they claim


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "rageval"
    for name in ("benchmark", "evaluation", "tracking"):
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    return root


def test_a_pure_package_importing_tracking_is_named_with_file_and_line(tree: Path):
    (tree / "tracking" / "store.py").write_text("import mlflow\n")
    (tree / "evaluation" / "engine.py").write_text("def f():\n    from rageval.tracking.store import Tracker\n")
    [problem] = arrow_violations(edges(tree))
    assert "rageval/evaluation/engine.py:2" in problem and "evaluation may not import tracking" in problem
    assert mlflow_outside_tracking(tree) == []


def test_a_function_level_cycle_is_a_cycle(tree: Path):
    (tree / "benchmark" / "a.py").write_text("from rageval.benchmark import b\n")
    (tree / "benchmark" / "b.py").write_text("def g():\n    from rageval.benchmark.a import x\n")
    [cycle] = cycles(edges(tree))
    assert "rageval/benchmark/a.py:1" in cycle and "rageval/benchmark/b.py:2" in cycle


def test_mlflow_outside_tracking_is_named(tree: Path):
    (tree / "benchmark" / "x.py").write_text("if True:\n    import mlflow.entities\n")
    assert mlflow_outside_tracking(tree) == [
        "rageval/benchmark/x.py:2: imports mlflow.entities; only rageval/tracking/ may"
    ]


def test_a_long_module_is_named(tree: Path):
    (tree / "benchmark" / "big.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert long_modules(tree) == [
        f"rageval/benchmark/big.py: {MAX_LINES + 1} lines (at most 600; split it along its seams)"
    ]
