"""The formats a comparison's results table is written in, and the file each is recorded as."""

from __future__ import annotations

from typing import Literal, get_args

Format = Literal["text", "markdown", "latex"]
FORMATS: tuple[str, ...] = get_args(Format)
RESULT_FILES: dict[str, str] = {"text": "results.txt", "markdown": "results.md", "latex": "results.tex"}
