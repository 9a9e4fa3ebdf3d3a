"""Sweep files (``params/sweeps/*.yaml``): one base configuration, a ``grid`` (every combination of
the listed values) and/or ``variants`` (named sets of overrides). Each member is the base loaded
with its overrides through :func:`rageval.config.load.load_config`, exactly as ``rageval run --set``
would. Everything is validated before a run exists: every member's configuration, duplicate names
and configurations, and the release rule: a sweep on the release split needs ``release=True``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StrictInt, StrictStr, ValidationError, field_validator, model_validator

from rageval.benchmark.schema import RELEASE_SPLIT
from rageval.config.load import dump_config, load_config
from rageval.config.schema import RunConfig, RunName
from rageval.errors import ConfigError, InputError, Problem
from rageval.io import Lines, read_yaml
from rageval.validation import Slug, Strict, problems_from_validation, shorten

# More members than this is a typo or a generated grid, not a sweep anyone runs (each member is a run).
MAX_MEMBERS = 1000
# Notebooks run at once: each is a kernel process with its own copy of the models and indexes.
MAX_WORKERS = 64


def _writable(value: Any) -> Any:
    """A value an override can carry: JSON (what YAML reads back the same), finite numbers."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise ValueError(
            f"{shorten(repr(value))} cannot be an override value: use text, numbers, true/false, null, lists and mappings"
        ) from None
    return value


OverrideValue = Annotated[Any, AfterValidator(_writable)]


class Variant(Strict):
    name: RunName
    set: dict[StrictStr, OverrideValue] = Field(
        default_factory=dict, description="key.path → value, as `rageval run --set`"
    )


class SweepConfig(Strict):
    """``params/sweeps/*.yaml``."""

    version: Literal[1]
    name: RunName
    description: StrictStr | None = None
    base: StrictStr = Field(description="params file, relative to this file")
    grid: dict[StrictStr, list[OverrideValue]] = Field(
        default_factory=dict, description="key.path → values; every combination"
    )
    variants: list[Variant] = Field(default_factory=list)
    benchmark: StrictStr | None = Field(default=None, description="benchmark folder, relative to this file (or ~/...)")
    split: Slug | None = None
    workers: StrictInt = Field(default=1, ge=1, le=MAX_WORKERS, description="notebooks run at once")

    @field_validator("grid")
    @classmethod
    def _values(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        empty = [key for key, values in value.items() if not values]
        if empty:
            raise ValueError(f"no values for {', '.join(empty)}")
        return value

    @model_validator(mode="after")
    def _members(self) -> SweepConfig:
        if not self.grid and not self.variants:
            raise ValueError("a sweep needs a grid, variants or both")
        count = math.prod(len(values) for values in self.grid.values()) if self.grid else 0
        if count + len(self.variants) > MAX_MEMBERS:
            raise ValueError(
                f"the sweep has {count + len(self.variants)} members ({count} grid combinations), more than "
                f"{MAX_MEMBERS}: split it into several sweeps"
            )
        return self


@dataclass(frozen=True)
class Member:
    name: str
    overrides: tuple[str, ...]
    config: RunConfig
    line: int | None = None


@dataclass(frozen=True)
class Sweep:
    path: Path
    spec: SweepConfig
    members: list[Member]
    sha256: str
    # Resolved once, before any member runs: papermill changes the process's working directory
    # while a notebook executes, so a relative path resolved in a worker thread could go astray.
    base: Path
    benchmark: Path | None

    @property
    def split(self) -> str:
        return self.members[0].config.split


def _value(value: Any) -> str:
    """An override value as YAML that reads back the same (JSON is YAML)."""
    return json.dumps(value)


def expand(spec: SweepConfig) -> list[tuple[str, tuple[str, ...], tuple[Any, ...]]]:
    """Members as (name, overrides, YAML location): the grid's combinations, then the variants."""
    out: list[tuple[str, tuple[str, ...], tuple[str, str | int]]] = []
    keys = list(spec.grid)
    last = [key.rsplit(".", 1)[-1] for key in keys]
    short = [part if last.count(part) == 1 else key for key, part in zip(keys, last, strict=True)]
    for values in itertools.product(*(spec.grid[k] for k in keys)) if keys else ():
        name = ",".join(f"{s}={v}" for s, v in zip(short, values, strict=True))
        out.append((name, tuple(f"{k}={_value(v)}" for k, v in zip(keys, values, strict=True)), ("grid", keys[0])))
    for index, variant in enumerate(spec.variants):
        out.append((variant.name, tuple(f"{k}={_value(v)}" for k, v in variant.set.items()), ("variants", index)))
    return out


def load_sweep(path: str | Path, *, release: bool = False) -> Sweep:
    """Read a sweep file and load every member's configuration; report every problem at once."""
    path = Path(path)
    data, lines = read_yaml(path, ConfigError)
    if not isinstance(data, dict):
        raise ConfigError(Problem(file=str(path), line=1, message="expected a mapping of sweep keys"))
    try:
        spec = SweepConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(problems_from_validation(exc, file=str(path), model=SweepConfig, lines=lines)) from None
    base = (path.parent / spec.base).resolve()
    benchmark = (path.parent / Path(spec.benchmark).expanduser()).resolve() if spec.benchmark else None

    members, problems = _members(spec, path, lines, base, benchmark)
    if problems:
        raise ConfigError(problems)
    release_members = [m.name for m in members if m.config.split == RELEASE_SPLIT]
    if release_members and not release:
        raise ConfigError(
            Problem(
                file=str(path),
                line=lines.get(("split",)),
                field="split",
                message=f"the sweep evaluates on the frozen '{RELEASE_SPLIT}' split ({len(release_members)} member(s)); "
                "tuning on it turns the release set into training data",
                fix=f"sweep on dev; to evaluate on '{RELEASE_SPLIT}' on purpose, pass --release (recorded and counted)",
            )
        )
    return Sweep(path, spec, members, hashlib.sha256(path.read_bytes()).hexdigest(), base, benchmark)


def _members(
    spec: SweepConfig, path: Path, lines: Lines, base: Path, benchmark: Path | None
) -> tuple[list[Member], list[Problem]]:
    """Every member's configuration loaded, and the problems of those that fail (named by member and line)."""
    problems: list[Problem] = []
    members: list[Member] = []
    seen_names: dict[str, int | None] = {}
    seen_configs: dict[str, str] = {}
    for name, overrides, where in expand(spec):
        line = lines.get(where)
        if name in seen_names:
            problems.append(
                Problem(
                    file=str(path),
                    line=line,
                    field=name,
                    message="member name repeats",
                    fix="give each variant its own name",
                )
            )
            continue
        seen_names[name] = line
        try:
            config = load_config(base, overrides, benchmark=benchmark, split=spec.split)
        except InputError as exc:
            for problem in exc.problems:
                where_text = f"{problem.file}:{problem.line}" if problem.line else problem.file
                problems.append(
                    Problem(
                        file=str(path),
                        line=line,
                        field=f"member {name}",
                        message=f"{where_text}: {problem.field + ': ' if problem.field else ''}{problem.message}",
                        fix=problem.fix,
                    )
                )
            continue
        resolved = dump_config(config)
        if resolved in seen_configs:
            problems.append(
                Problem(
                    file=str(path),
                    line=line,
                    field=f"member {name}",
                    message=f"the same configuration as member {seen_configs[resolved]}",
                    fix="remove one of them",
                )
            )
            continue
        seen_configs[resolved] = name
        members.append(Member(name, overrides, config, line))
    return members, problems
