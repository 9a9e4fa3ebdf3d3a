"""What can be known about a stage before anything runs: its plugin imports, its model is installed,
its search backend and run file exist, the environment variables its service headers come from are
set (an http stage's URL is checked by its config model). :func:`rageval.config.load.load_config` calls these, so a run
configuration that cannot work fails with its file, line and field before a run exists."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from pathlib import Path

from rageval.errors import CONFIG, ConfigError, Problem
from rageval.retrieval.encoders import DENSE_EXTRA_FIX, resolve_model
from rageval.retrieval.plugin import load_entrypoint
from rageval.retrieval.schema import DenseConfig, HttpConfig, PluginConfig, RerankConfig, RunFileConfig, StageConfig


def _problems(check: Callable[[], object]) -> list[Problem]:
    try:
        check()
    except ConfigError as exc:
        return exc.problems
    return []


def _encoder(config: DenseConfig | RerankConfig) -> list[Problem]:
    if importlib.util.find_spec("sentence_transformers") is None:
        return [
            Problem(
                file=CONFIG,
                field="type",
                message=f"{config.type} stages need sentence-transformers",
                fix=DENSE_EXTRA_FIX,
            )
        ]
    problems = _problems(lambda: resolve_model(config.model))
    if isinstance(config, DenseConfig) and config.search == "faiss" and importlib.util.find_spec("faiss") is None:
        problems.append(
            Problem(
                file=CONFIG,
                field="search",
                message="search 'faiss' needs faiss-cpu",
                fix="pip install faiss-cpu, or use search: exact",
            )
        )
    return problems


def _runfile(config: RunFileConfig) -> list[Problem]:
    if Path(config.path).is_file():
        return []
    return [
        Problem(
            file=CONFIG,
            field="path",
            message=f"run file not found: {config.path}",
            fix="check the path (relative to the params file)",
        )
    ]


def header_problems(config: HttpConfig) -> list[Problem]:
    """The header variables that are not set (or empty) in this environment, or hold what no header
    may (a line break, a control character). Names only: a value never enters a problem."""
    problems = []
    for header, variable in config.headers_from_env.items():
        value = os.environ.get(variable)
        if value and value.isprintable():
            continue
        message = f"environment variable {variable} is not set (or empty)"
        fix = f"export {variable}=… before the run, or remove the header"
        if value:
            message = f"environment variable {variable} holds a line break or control character"
            fix = f"set {variable} to the header's value alone"
        problems.append(Problem(file=CONFIG, field=f"headers_from_env.{header}", message=message, fix=fix))
    return problems


def _plugin(config: PluginConfig) -> list[Problem]:
    return _problems(lambda: load_entrypoint(config.entrypoint))


CHECKS: dict[str, Callable[..., list[Problem]]] = {
    "dense": _encoder,
    "rerank": _encoder,
    "runfile": _runfile,
    "plugin": _plugin,
    "http": header_problems,
}


def locate(problem: Problem, index: int, source: str, line: int | None = None) -> Problem:
    """A stage's problem, placed in the run configuration: its file, line and full field path."""
    field = f"retrieval.stages[{index}]" + (f".{problem.field}" if problem.field else "")
    return Problem(file=source, line=line, field=field, message=problem.message, fix=problem.fix)


def stage_problems(config: StageConfig) -> list[Problem]:
    """Problems of one stage, their fields relative to the stage (``model``, ``path`` …)."""
    check = CHECKS.get(config.type)
    return check(config) if check else []
