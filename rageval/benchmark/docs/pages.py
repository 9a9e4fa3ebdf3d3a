"""A documentation tree's pages: which files are pages, their IDs, and each page as a Document.

A page is a ``.md``/``.markdown`` (Markdown, mkdocs or plain), ``.html``/``.htm`` or ``.txt`` file;
hidden folders, build and theme folders (:data:`SKIPPED_FOLDERS`) and legal boilerplate
(:data:`SKIPPED_STEMS`: LICENSE, COPYING, NOTICE) are left out and reported. A page's ID is its
path relative to the tree without its suffix (``advanced/clients``). Its title is the front
matter's ``title``, else the first level-1 heading (``<title>`` for HTML), else the page's title in
``mkdocs.yml``'s ``nav`` (beside or above the tree), else its first heading, else the file name. Its ACL
and metadata come from the ACL map's matching rules, then its own front matter (which wins).
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, StrictStr, ValidationError

from rageval.benchmark.docs.html import render_html
from rageval.benchmark.docs.markdown import PageContext, render_markdown
from rageval.benchmark.schema import Document
from rageval.errors import BenchmarkError, InputError, Problem
from rageval.io import read_text, read_yaml
from rageval.validation import Slug, Strict, problems_from_validation

FORMATS = {".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html", ".txt": "text"}
SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "site", "overrides", "_build"})
SKIPPED_STEMS = frozenset({"license", "copying", "notice"})
# Front-matter keys that fill a Document field rather than its metadata.
FIELDS = ("title", "acl", "created", "updated")


class AclRule(Strict):
    """One rule of an ACL map: the pages whose relative path matches ``match`` (a glob such as
    ``advanced/*.md``) get ``acl`` and ``metadata``."""

    match: StrictStr
    acl: list[Slug] | None = None
    metadata: dict[StrictStr, Any] = Field(default_factory=dict)


class AclMap(Strict):
    """``--acl-map FILE``: rules applied in order; a later rule's ``acl`` and metadata keys win."""

    pages: list[AclRule] = Field(min_length=1)


def read_acl_map(path: Path) -> AclMap:
    data, lines = read_yaml(path, BenchmarkError)
    try:
        return AclMap.model_validate(data)
    except ValidationError as exc:
        raise BenchmarkError(problems_from_validation(exc, file=str(path), model=AclMap, lines=lines, line=1)) from None


class _Lenient(yaml.SafeLoader):
    """mkdocs.yml holds tags such as ``!!python/name:…``; the nav is all that is read, so any tag
    reads as its plain value."""


_Lenient.add_multi_constructor("", lambda loader, suffix, node: None)


def nav_titles(root: Path) -> dict[str, str]:
    """Page path (relative to the tree) -> its title in mkdocs.yml's ``nav``; empty without one."""
    config = next((p for p in (root / "mkdocs.yml", root.parent / "mkdocs.yml") if p.is_file()), None)
    if config is None:
        return {}
    try:
        data = yaml.load(read_text(config, BenchmarkError), Loader=_Lenient)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError:
        return {}
    titles: dict[str, str] = {}

    def walk(entries: Any) -> None:
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict):
                continue
            for title, target in entry.items():
                if isinstance(target, str):
                    titles[target.removeprefix("docs/")] = str(title)
                else:
                    walk(target)

    walk(data.get("nav") if isinstance(data, dict) else None)
    return titles


@dataclass(frozen=True)
class TreeOptions:
    """How pages become documents: the steps applied, the include root, the ACL map."""

    steps: frozenset[str]
    include_root: Path | None = None
    acl_map: AclMap | None = None


@dataclass
class Tree:
    """The pages found under a folder, and the files left out (with why)."""

    root: Path
    pages: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    titles: dict[str, str] = field(default_factory=dict)  # from mkdocs.yml's nav


def find_pages(root: Path) -> Tree:
    tree = Tree(root, titles=nav_titles(root))
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if not path.is_file():
            continue
        folders = relative.parts[:-1]
        if any(part.startswith(".") or part in SKIPPED_FOLDERS for part in folders) or path.name.startswith("."):
            continue
        if path.suffix.lower() not in FORMATS:
            tree.skipped.append(f"{relative.as_posix()} (not a page: {path.suffix or 'no suffix'})")
        elif path.stem.lower() in SKIPPED_STEMS:
            tree.skipped.append(f"{relative.as_posix()} (legal boilerplate)")
        else:
            tree.pages.append(path)
    return tree


def page_id(root: Path, path: Path) -> str:
    return path.relative_to(root).with_suffix("").as_posix()


def _rules(relative: str, acl_map: AclMap | None) -> tuple[list[str] | None, dict[str, Any]]:
    acl: list[str] | None = None
    metadata: dict[str, Any] = {}
    for rule in acl_map.pages if acl_map else ():
        if fnmatch.fnmatchcase(relative, rule.match):
            acl = rule.acl if rule.acl is not None else acl
            metadata.update(rule.metadata)
    return acl, metadata


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def render_page(tree: Tree, path: Path, options: TreeOptions, counts: dict[str, int]) -> Document:
    """One page as a Document; every problem (an include not found, bad front matter) raises."""
    root = tree.root
    relative = path.relative_to(root).as_posix()
    fmt = FORMATS[path.suffix.lower()]
    source = read_text(path, BenchmarkError, file=str(path))
    context = PageContext(str(path), path.parent, options.steps, options.include_root, counts=counts)
    if fmt == "markdown":
        text = render_markdown(source, context)
        title = context.h1 or tree.titles.get(relative) or context.title
    elif fmt == "html":
        title, text = render_html(source, options.steps, counts)
    else:
        text, title = source.strip(), tree.titles.get(relative)
    if context.problems:
        raise BenchmarkError(context.problems)
    acl, metadata = _rules(relative, options.acl_map)
    front = context.front_matter
    metadata = {"source": relative, "format": fmt, **metadata, **{k: v for k, v in front.items() if k not in FIELDS}}
    raw = {
        "id": page_id(root, path),
        "title": str(front.get("title") or title or path.stem),
        "text": text,
        "metadata": _jsonable(metadata),
        "acl": front.get("acl", acl),
        "created": _jsonable(front.get("created")),
        "updated": _jsonable(front.get("updated")),
    }
    try:
        return Document.model_validate({k: v for k, v in raw.items() if v is not None})
    except ValidationError as exc:
        problems = problems_from_validation(exc, file=str(path), model=Document, line=1)
        raise BenchmarkError(
            [Problem(p.file, p.message, p.line, f"front matter: {p.field}", p.fix) for p in problems]
        ) from None


def render_tree(tree: Tree, options: TreeOptions) -> tuple[list[Document], dict[str, int]]:
    """Every page as a Document (all problems of all pages raised together) and the conversion counts."""
    counts: dict[str, int] = {}
    documents: list[Document] = []
    problems: list[Problem] = []
    first: dict[str, Path] = {}
    for path in tree.pages:
        key = page_id(tree.root, path)
        if key in first:
            problems.append(
                Problem(
                    file=str(path),
                    message=f"its ID '{key}' is the ID of {first[key].name} too",
                    fix="keep one format of each page in the tree (IDs are paths without their suffix)",
                )
            )
            continue
        first[key] = path
        try:
            documents.append(render_page(tree, path, options, counts))
        except InputError as exc:
            problems.extend(exc.problems)
    if not tree.pages:
        problems.append(
            Problem(file=str(tree.root), message="no pages found", fix=f"give a folder of {', '.join(FORMATS)} files")
        )
    if problems:
        raise BenchmarkError(problems)
    return documents, counts
