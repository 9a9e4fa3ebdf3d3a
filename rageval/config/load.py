"""Load a run configuration: strict validation, ``--set`` overrides, resolved paths.

Errors name the file and line of a bad key, or the ``--set`` override that introduced it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rageval.benchmark.schema import recorded_chunking
from rageval.benchmark.tokenizers import get_tokenizer
from rageval.config.schema import RunConfig
from rageval.errors import ConfigError, Problem
from rageval.evaluation.measures import param, parse_measures
from rageval.io import parse_yaml, read_yaml
from rageval.retrieval.preflight import locate, stage_problems
from rageval.safety import mask_credentials
from rageval.validation import field_path, problems_from_validation, shorten

Override = tuple[str, list[str | int], Any]  # the --set text, its key path, its value


def parse_override(text: str) -> tuple[list[str | int], Any]:
    """``key.path=value`` → the key path (list positions as integers) and the value, read as YAML
    under the same rules as a params file (:func:`rageval.io.parse_yaml`)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(
            Problem(
                file="--set",
                field=shorten(text) or "''",
                message="expected key=value",
                fix="e.g. --set retrieval.stages.0.k1=1.2",
            )
        )
    parts = key.strip().split(".")
    if "" in parts:
        raise ConfigError(
            Problem(
                file="--set",
                field=shorten(text),
                message=f"the key path {key.strip()!r} has an empty part",
                fix="separate keys by single dots, e.g. retrieval.stages.0.k1",
            )
        )
    path: list[str | int] = [int(p) if re.fullmatch(r"[0-9]{1,9}", p) else p for p in parts]
    value, _ = parse_yaml(raw, f"--set {shorten(mask_credentials(text))}", ConfigError, field=key.strip())
    return path, value


def apply_override(data: dict[str, Any], path: list[str | int], value: Any, text: str) -> None:
    """Set ``value`` at ``path`` in ``data``, creating sections that are absent; a path through a
    value (``name.x`` where ``name`` is text) or past a list's end is a :class:`ConfigError`."""
    node: Any = data
    for depth, part in enumerate(path):
        where = field_path(tuple(path[:depth])) or "the configuration"
        last = depth == len(path) - 1
        if isinstance(node, list):
            if not isinstance(part, int) or part >= len(node):
                size = f"{len(node)} item(s): 0–{len(node) - 1}" if node else "no items"
                raise ConfigError(
                    Problem(
                        file="--set",
                        field=text,
                        message=f"{where} is a list; '{part}' is not one of its positions ({size})",
                        fix="name an existing position, e.g. retrieval.stages.0.k1",
                    )
                )
        elif not isinstance(node, dict):
            raise ConfigError(
                Problem(
                    file="--set",
                    field=text,
                    message=f"{where} is a value ({shorten(repr(node), 40)}), not a section: it has no key '{part}'",
                    fix=f"set {where} itself, e.g. --set {where}=…",
                )
            )
        if last:
            node[part] = value
        elif isinstance(node, dict) and (part not in node or node[part] is None):
            node[part] = [] if isinstance(path[depth + 1], int) else {}
            node = node[part]
        else:
            node = node[part]


def load_config(
    path: str | Path,
    overrides: Sequence[str] = (),
    *,
    benchmark: str | Path | None = None,
    split: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> RunConfig:
    """Validate a params file, apply overrides, and resolve the benchmark path.

    ``benchmark`` (relative to the working directory) and ``split`` are overrides too. The
    benchmark path in the file is relative to the file. ``warn`` receives what is allowed but
    probably not meant (:func:`config_warnings`).
    """
    path = Path(path)
    data, lines = _read_params(path)
    data = copy.deepcopy(data)
    data["benchmark"] = str((path.parent / data["benchmark"]).resolve())
    for stage in data["retrieval"]["stages"]:
        _resolve_stage_paths(stage, path.parent)
    parsed = [(text, *parse_override(text)) for text in overrides]
    _apply_overrides(data, parsed)
    if benchmark is not None:
        data["benchmark"] = str(Path(benchmark).resolve())
    if split is not None:
        data["split"] = split
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        problems = problems_from_validation(exc, file=str(path), model=RunConfig, lines=lines)
        raise ConfigError([_blamed(problem, parsed) for problem in problems]) from None
    preflight(config, str(path), lines)
    if warn is not None:
        for warning in config_warnings(config, str(path), lines):
            warn(warning)
    return config


def _read_params(path: Path) -> tuple[dict[str, Any], dict[tuple[Any, ...], int]]:
    """The params file as written, and the line of each key; it must validate before any override."""
    data, lines = read_yaml(path, ConfigError)
    if not isinstance(data, dict):
        raise ConfigError(Problem(file=str(path), line=1, message="expected a mapping of configuration keys"))
    try:
        RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(problems_from_validation(exc, file=str(path), model=RunConfig, lines=lines)) from None
    return data, lines


def _apply_overrides(data: dict[str, Any], parsed: Sequence[Override]) -> None:
    """Apply each ``--set``; a path given by ``--set`` is relative to the working directory."""
    for text, key_path, value in parsed:
        apply_override(data, key_path, value, text)
    for _, key_path, _ in parsed:
        stages = data["retrieval"].get("stages") if isinstance(data.get("retrieval"), dict) else None
        if key_path[:2] == ["retrieval", "stages"] and isinstance(stages, list):
            for stage in stages:
                if isinstance(stage, dict):
                    _resolve_stage_paths(stage, Path.cwd())


def _blamed(problem: Problem, parsed: Sequence[Override]) -> Problem:
    """``problem`` placed on the ``--set`` whose key path it lies on, if any."""
    culprit = next((t for t, p, _ in parsed if problem.field and problem.field.startswith(field_path(tuple(p)))), None)
    if culprit is None:
        culprit = next((t for t, p, _ in parsed if field_path(tuple(p)).startswith(problem.field or "\0")), None)
    if culprit is None:
        return problem
    # a credential typed into a --set is not repeated on the terminal
    return Problem(**{**problem.__dict__, "file": f"--set {mask_credentials(culprit)}", "line": None})


def config_warnings(config: RunConfig, file: str, lines: dict[tuple[Any, ...], int]) -> list[str]:
    """What a run may do but probably does not mean: measures cut off deeper than the context
    budget ``final_k`` score chunks the generator never receives."""
    deeper = [
        m.text
        for m in parse_measures(config.evaluation.measures)
        if isinstance(cutoff := param(m.measure, "cutoff"), int) and cutoff > config.final_k
    ]
    if not deeper:
        return []
    line = lines.get(("evaluation", "measures"))
    where = f"{file}:{line}" if line else file
    return [
        f"warning: {where}: evaluation.measures: {', '.join(deeper)} cut off deeper than final_k {config.final_k}: "
        "they score chunks the generator never receives (they measure candidate recall; to measure the context, "
        f"add measures at k <= {config.final_k}, or raise final_k)"
    ]


def preflight(config: RunConfig, file: str, lines: dict[tuple[Any, ...], int]) -> None:
    """Everything about the stages and tokenizers that can be checked before a run exists: plugins
    import, models and search backends are installed, run files exist (see rageval.retrieval.preflight)."""
    problems = []
    for index, stage in enumerate(config.retrieval.stages):
        for problem in stage_problems(stage):
            where = ("retrieval", "stages", index)
            line = lines.get((*where, problem.field)) or lines.get(where)
            problems.append(locate(problem, index, file, line))
    for name, key in ((config.chunking.tokenizer, "chunking"), (config.context.tokenizer, "context")):
        try:
            if name is not None:
                get_tokenizer(name)
        except ConfigError as exc:
            line = lines.get((key, "tokenizer"))
            problems += [
                Problem(**{**p.__dict__, "file": file, "line": line, "field": f"{key}.tokenizer"}) for p in exc.problems
            ]
    if problems:
        raise ConfigError(problems)


def _resolve_stage_paths(stage: dict[str, Any], base: Path) -> None:
    """Run files, a dense stage's imported vectors (and their keys), and models named by a path (a
    value with '/'), are relative to ``base``."""
    if stage.get("type") == "runfile" and isinstance(stage.get("path"), str):
        stage["path"] = str((base / stage["path"]).resolve())
    vectors = stage.get("vectors")
    if stage.get("type") == "dense" and isinstance(vectors, dict):
        for key in ("path", "keys"):
            if isinstance(vectors.get(key), str):
                vectors[key] = str((base / Path(vectors[key]).expanduser()).resolve())
    model = stage.get("model")
    if isinstance(model, str) and "/" in model:
        stage["model"] = str((base / Path(model).expanduser()).resolve())


def dump_config(config: RunConfig) -> str:
    """The resolved configuration as YAML: what a run logs and its notebook receives."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


def config_from_yaml(text: str, file: str = "config.yaml") -> RunConfig:
    """A configuration as a run recorded it (:func:`dump_config`), read back."""
    data, lines = parse_yaml(text, file, ConfigError)
    if isinstance(data, dict):  # recorded before the chunking version existed: version 1
        data["chunking"] = recorded_chunking(data.get("chunking", {}))
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(problems_from_validation(exc, file=file, model=RunConfig, lines=lines)) from None


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": [1, {"c": 2}]}}`` → ``{"a.b.0": 1, "a.b.1.c": 2}``; lists of scalars stay whole."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        for index, item in enumerate(value):
            out.update(flatten(item, f"{prefix}.{index}"))
    else:
        out[prefix] = value
    return out
