"""Build the docs benchmark (httpx + starlette documentation, graded character spans) into a
gitignored folder with rageval's own commands, and validate it:

    python benchmarks/docs/build.py                       # -> benchmarks/docs/build/
    python benchmarks/docs/build.py --out /tmp/docs-bench --force

It runs, in order (each a real ``rageval`` process; the first failure stops the build):

    rageval benchmark import docs SOURCE --out OUT --name docs-httpx-starlette --version 1
    rageval benchmark label OUT --from benchmarks/docs/questions.yaml
    rageval benchmark validate OUT

SOURCE defaults to ``../shared/datasets/docs-trees`` beside the checkout. The importer makes one
document per page (its ID the page path without the suffix, e.g. ``httpx/advanced/timeouts``);
``label`` finds every quote or heading of ``questions.yaml`` in its page and writes the character
spans. No offset is written by hand, and nothing from docs-trees is committed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "datasets" / "docs-trees"
DEFAULT_OUT = HERE / "build"
QUESTIONS = HERE / "questions.yaml"
NAME = "docs-httpx-starlette"


def commands(source: Path, out: Path, questions: Path = QUESTIONS) -> list[list[str]]:
    """The rageval command lines that build and check the benchmark, in order."""
    return [
        ["benchmark", "import", "docs", str(source), "--out", str(out), "--name", NAME, "--version", "1"],
        ["benchmark", "label", str(out), "--from", str(questions)],
        ["benchmark", "validate", str(out)],
    ]


def build(source: Path, out: Path, questions: Path = QUESTIONS) -> Path:
    """Run :func:`commands`; a failing command's output is raised as SystemExit with its line."""
    rageval = [sys.executable, "-c", "from rageval.cli import main; main()"]
    for command in commands(source, out, questions):
        done = subprocess.run([*rageval, *command], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"rageval {' '.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        print(f"$ rageval {' '.join(command)}\n{done.stdout.rstrip()}", flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the docs-trees folder")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="benchmark folder to write (gitignored)")
    parser.add_argument("--force", action="store_true", help="replace an existing build at --out")
    args = parser.parse_args(argv)
    if not args.source.is_dir():
        raise SystemExit(f"{args.source}: no such folder; pass --source PATH/TO/docs-trees")
    if args.out.exists():
        if not args.force:
            raise SystemExit(f"{args.out} exists; pass --force to replace it")
        shutil.rmtree(args.out)
    build(args.source, args.out)


if __name__ == "__main__":
    main()
