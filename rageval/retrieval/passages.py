"""How another system names what it retrieved: the hit forms of the ``http`` stage's reply and of
JSONL run files, and their one resolution into a hit ID of the corpus.

A hit is one of:

* ``{"id": …}`` — a chunk ID of this corpus and chunking, or a document ID (then the whole
  document is the passage: graded at passage level as the whole document);
* ``{"documentId": …, "start": …, "end": …}`` — a passage by character offsets into that document
  of this corpus version, end exclusive;
* ``{"documentId": …, "text": …}`` — a passage by its text, located in the document (exact first,
  then tolerant of whitespace and Unicode forms); absent or ambiguous text fails that hit.
"""

from __future__ import annotations

from pydantic import Field, StrictInt, StrictStr, model_validator

from rageval.errors import InputError
from rageval.retrieval.base import Corpus
from rageval.validation import Strict

HIT_FORMS = '{"id"}, {"documentId", "start", "end"} or {"documentId", "text"}'


class PassageFields(Strict):
    """The fields naming a hit (see the module docstring); ``score`` and the rest belong to the caller."""

    id: StrictStr | None = Field(default=None, min_length=1, description="a chunk ID or a document ID")
    documentId: StrictStr | None = Field(default=None, min_length=1, description="the passage's document")
    start: StrictInt | None = Field(default=None, ge=0, description="character offset, inclusive")
    end: StrictInt | None = Field(default=None, gt=0, description="character offset, exclusive")
    text: StrictStr | None = Field(
        default=None, min_length=1, description="the passage's text, located in the document"
    )

    @model_validator(mode="after")
    def _one_form(self) -> PassageFields:
        offsets = (self.start is not None, self.end is not None)
        # Beside an id, a text is only shown (services often send it): the id decides.
        if self.id is not None and (self.documentId is not None or any(offsets)):
            raise ValueError(f"give either an id or a passage, not both; a hit is {HIT_FORMS}")
        if self.id is None:
            if self.documentId is None:
                raise ValueError(f"a hit needs an id or a documentId; a hit is {HIT_FORMS}")
            if self.text is not None and any(offsets):
                raise ValueError("give a passage by offsets or by text, not both")
            if self.text is None and not all(offsets):
                raise ValueError("a passage by offsets needs both start and end (end exclusive)")
            if self.start is not None and self.end is not None and self.end <= self.start:
                raise ValueError(f"end ({self.end}) must be greater than start ({self.start})")
        return self


def problem_text(error: InputError) -> str:
    """What an unresolvable hit's error says, without the placeholder file name."""
    return "; ".join(problem.message for problem in error.problems)


def resolve_hit(corpus: Corpus, hit: PassageFields | str) -> str:
    """The hit ID of ``hit`` (its fields, or an ID alone) in ``corpus``; an unknown ID, document or
    text raises :class:`~rageval.errors.InputError` (the caller names where)."""
    if isinstance(hit, str) or hit.id is not None:
        named = hit if isinstance(hit, str) else str(hit.id)
        return named if corpus.knows(named) else corpus.whole_document(named)
    document = hit.documentId or ""  # the validator guarantees a document, and offsets or a text
    if hit.text is not None:
        return corpus.locate_passage(document, hit.text)
    return corpus.passage(document, hit.start or 0, hit.end or 0)
