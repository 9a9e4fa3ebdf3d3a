"""The clone itself: ``rageval setup-git`` (the nbstripout filter that keeps notebook outputs out
of commits; see docs/notebooks.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rageval.cli.common import app, echo
from rageval.paths import project_root


@app.command("setup-git")
def setup_git(
    path: Annotated[Path | None, typer.Argument(help="a folder of the clone [default: the project's]")] = None,
) -> None:
    """Configure this clone's git (.git/config) to strip notebook outputs on add, status and diff (nbstripout)."""
    from rageval.workflows.provenance import install_notebook_filter

    settings = install_notebook_filter(path or project_root())
    for key, value in settings.items():
        echo(f"{key} = {value}")
    echo("outputs, execution counts and kernel details of notebooks now stay out of git diff and commits")


@app.command("init")
def init(
    folder: Annotated[Path, typer.Argument(help="the project folder to make (new or empty)")],
    force: Annotated[
        bool, typer.Option("--force", help="lay out into a non-empty folder, adding missing files, overwriting none")
    ] = False,
) -> None:
    """Lay out a team's project: params/, a benchmark skeleton, the notebooks, store and cache, git and its filter."""
    from rageval.workflows.init import init_project

    result = init_project(folder, force=force)
    for name in result.written:
        echo(f"wrote {name}")
    for name in result.kept:
        echo(f"kept {name} (already there)")
    echo(f"git: {'a new repository' if result.git_init else 'the repository holding it'}, nbstripout filter set")
    echo("next:")
    for command in result.next_commands():
        echo(f"  {command}")
