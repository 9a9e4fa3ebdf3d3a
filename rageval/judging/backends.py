"""What a judge sees and how it answers: the prompt (corpus text as delimited data), instruction-like
text in documents, the structured reply (pydantic), and the two backends: any OpenAI-compatible
chat-completions endpoint, and an offline similarity pre-labeler over a local sentence encoder.

A backend sees an :class:`Item`: a blind item ID, the query, a title and the text. Nothing names
the systems, runs or ranks that found it. Each call returns a :class:`Sample`; failures are values
(an error string and the attempts made), never exceptions, so one bad item does not stop a pool.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from string import Template
from typing import Any

import httpx
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from rageval.errors import ConfigError, Problem
from rageval.hashing import sha256_text
from rageval.judging.judges import Judge, OpenAIBackend, SimilarityBackend
from rageval.retry import call_with_retries
from rageval.safety import Redactor, url_credentials

# Instruction-like text in a document: a document is data, and one that talks to the model is an
# attack or an accident either way; its label goes to human review.
INJECTION_PATTERNS: dict[str, re.Pattern[str]] = {
    "ignore-instructions": re.compile(
        r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(previous|prior|above|earlier|all|your|the)\b[^.\n]{0,20}"
        r"\b(instructions?|prompts?|rules|directions)\b",
        re.I,
    ),
    "role-change": re.compile(r"\byou are now\b|\bact as (an?|the)\b|\bpretend to be\b|\bfrom now on,? you\b", re.I),
    "role-marker": re.compile(r"(^|\n)\s*(system|assistant|user|developer)\s*:|<\|im_start\|>|\[/?INST\]", re.I),
    "new-instructions": re.compile(r"\b(new|updated|real) instructions?\b\s*:?", re.I),
    "grade-demand": re.compile(
        r"\b(grade|rate|score|label|mark)\b[^.\n]{0,30}\b(this|the)\b[^.\n]{0,20}\b(as|with)\b\s*\d", re.I
    ),
    "reply-format": re.compile(r"\b(respond|reply|answer|output)\b[^.\n]{0,20}\b(only|exactly)\b", re.I),
}


def injection_flags(text: str) -> list[str]:
    """The names of the instruction-like patterns ``text`` holds (empty for ordinary prose)."""
    return [name for name, pattern in INJECTION_PATTERNS.items() if pattern.search(text)]


@dataclass(frozen=True)
class Item:
    """What a judge is shown: the blind item ID, the query and the text (with its title)."""

    item_id: str
    query: str
    title: str
    text: str


class Span(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    start: StrictInt = Field(ge=0)
    end: StrictInt = Field(ge=0)
    text: StrictStr


class JudgeReply(BaseModel):
    """The structured reply every backend gives: grade on the rubric, a reason, evidence spans as
    character offsets into the text shown (whose text must be found there)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    grade: StrictInt
    reason: StrictStr = Field(min_length=1, max_length=2000)
    evidence: list[Span] = Field(default_factory=list, max_length=20)


REPLY_SCHEMA = json.dumps(
    {"grade": "<one grade of the rubric>", "reason": "<one or two sentences>", "evidence": [
        {"start": "<offset>", "end": "<offset, exclusive>", "text": "<the exact text between them>"}
    ]}
)  # fmt: skip


@dataclass
class Sample:
    """One independent judgment of one item (or the failure to get one)."""

    reply: JudgeReply | None = None
    error: str | None = None
    attempts: int = 0
    errors: list[str] = field(default_factory=list)  # every failed attempt's reason
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    uncertain: bool = False  # the backend's own doubt (a score at a threshold)


def delimiters(item: Item) -> tuple[str, str]:
    """Markers around the document that its text cannot close: they carry a digest of the text."""
    tag = sha256_text(item.item_id + "\0" + item.text)[:16]
    return f"<<<DOCUMENT {tag}>>>", f"<<<END DOCUMENT {tag}>>>"


def render(judge: Judge, item: Item) -> list[dict[str, str]]:
    """The chat messages for one item: the template's ``[system]`` part and its ``[user]`` part with
    the query and the document substituted once (text that looks like ``$query`` stays text)."""
    begin, end = delimiters(item)
    values = {
        "rubric": "\n".join(f"{g}: {t}" for g, t in sorted(judge.config.rubric.items())),
        "grades": ", ".join(str(g) for g in sorted(judge.config.rubric)),
        "schema": REPLY_SCHEMA,
        "query": item.query,
        "title": item.title,
        "document": item.text,
        "begin": begin,
        "end": end,
    }
    parts = re.split(r"^\[(system|user)\]\s*$", judge.template, flags=re.M)
    sections = dict(zip(parts[1::2], parts[2::2], strict=True))
    return [
        {"role": role, "content": Template(sections[role].strip("\n")).substitute(values)}
        for role in ("system", "user")
        if role in sections
    ]


def check_template(judge: Judge) -> None:
    """A template must have both parts and keep the document inside its delimiters."""
    text = judge.template
    problems = []
    for needed in ("[system]", "[user]", "$begin", "$document", "$end", "$query"):
        if needed not in text:
            problems.append(f"the template lacks {needed}")
    user = text.split("[user]", 1)[-1]
    if not problems and not (0 <= user.rfind("$begin") < user.find("$document") < user.find("$end")):
        problems.append("in the [user] part, $document must stand between $begin and $end")
    if problems:
        raise ConfigError(
            [
                Problem(file=str(judge.file), field="prompt", message=p, fix="see params/judges/prompt.txt")
                for p in problems
            ]
        )


# --------------------------------------------------------------------------- OpenAI-compatible


class ChatBackend:
    """POST ``{base_url}/chat/completions`` with the rendered messages; the reply's content must be
    a :class:`JudgeReply` as JSON. Timeouts, transport errors, 429/5xx and malformed replies are
    retried (``limits.retries`` times, exponential backoff); every attempt's reason is kept."""

    def __init__(self, judge: Judge, client: httpx.Client | None = None) -> None:
        backend = judge.config.backend
        assert isinstance(backend, OpenAIBackend)
        self.judge, self.backend = judge, backend
        headers = {}
        if backend.api_key_env:
            key = os.environ.get(backend.api_key_env)
            if not key:
                raise ConfigError(
                    Problem(
                        file=str(judge.file),
                        field="backend.api_key_env",
                        message=f"the environment variable {backend.api_key_env} is not set",
                        fix=f"export {backend.api_key_env}=<key> (keys are read from the environment, never from files)",
                    )
                )
            headers["Authorization"] = f"Bearer {key}"
        found = url_credentials(backend.base_url)
        if found:
            raise ConfigError(
                Problem(
                    file=str(judge.file),
                    field="backend.base_url",
                    message=f"the URL carries credentials ({found}); it would be recorded with every label",
                    fix="remove them from the URL and give the key with backend.api_key_env",
                )
            )
        # What the endpoint echoes of its key (in a reason, any encoding) never reaches a label.
        self._redact = Redactor(headers.values())
        self.client = client or httpx.Client(headers=headers, timeout=judge.config.limits.timeout_s)
        self.url = backend.base_url.rstrip("/") + "/chat/completions"

    def close(self) -> None:
        self.client.close()

    def __call__(self, item: Item, sample: int) -> Sample:
        config = self.judge.config
        decoding = config.decoding.model_dump(exclude_none=True)
        if "seed" in decoding:
            decoding["seed"] += sample  # independent samples, each reproducible
        body: dict[str, Any] = {"model": config.model, "messages": render(self.judge, item), **decoding}
        if self.backend.json_mode:
            body["response_format"] = {"type": "json_object"}
        out = Sample()

        def attempt() -> tuple[JudgeReply, tuple[int, int]]:
            out.attempts += 1
            started = time.perf_counter()
            try:
                response = self.client.post(self.url, json=body, timeout=config.limits.timeout_s)
                out.latency_s += time.perf_counter() - started
                return _parse(response)
            except httpx.TimeoutException:
                out.latency_s += time.perf_counter() - started
                out.errors.append(f"timeout after {config.limits.timeout_s}s")
                raise
            except httpx.TransportError as exc:
                out.latency_s += time.perf_counter() - started
                out.errors.append(f"transport: {type(exc).__name__}")
                raise
            except ValueError as exc:  # a status, a body that is not JSON, a reply that is not a JudgeReply
                out.tokens_in += getattr(exc, "tokens", (0, 0))[0]
                out.tokens_out += getattr(exc, "tokens", (0, 0))[1]
                out.errors.append(str(exc))
                raise

        try:
            reply, tokens = call_with_retries(
                attempt, retries=config.limits.retries, backoff_s=config.limits.backoff_s, retry_if=_retryable
            )
        except (httpx.TransportError, ValueError):
            out.errors = [self._redact(e) for e in out.errors]
            out.error = out.errors[-1]
            return out
        out.errors = [self._redact(e) for e in out.errors]
        out.tokens_in += tokens[0]
        out.tokens_out += tokens[1]
        out.reply = self._redacted(reply)
        return out

    def _redacted(self, reply: JudgeReply) -> JudgeReply:
        """The reply with the key taken out of its texts (evidence whose text changed then fails its
        span check, as any evidence not found in the text does)."""
        reason = self._redact(reply.reason)
        evidence = [span.model_copy(update={"text": self._redact(span.text)}) for span in reply.evidence]
        if reason == reply.reason and all(a.text == b.text for a, b in zip(evidence, reply.evidence, strict=True)):
            return reply
        return reply.model_copy(update={"reason": reason, "evidence": evidence})


def _retryable(exc: BaseException) -> bool:
    """Timeouts, transport errors, 429/5xx and malformed replies are tried again; other statuses are not."""
    if isinstance(exc, _Status):
        return exc.retry
    return isinstance(exc, (httpx.TransportError, ValueError))


class _Status(ValueError):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.retry = status == 429 or status >= 500


class _Malformed(ValueError):
    def __init__(self, message: str, tokens: tuple[int, int]) -> None:
        super().__init__(message)
        self.tokens = tokens


def _parse(response: httpx.Response) -> tuple[JudgeReply, tuple[int, int]]:
    if response.status_code != 200:
        raise _Status(response.status_code)
    try:
        payload = response.json()
    except ValueError:
        raise _Malformed("malformed reply: the body is not JSON", (0, 0)) from None
    usage = payload.get("usage") or {} if isinstance(payload, dict) else {}
    tokens = (int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
    try:
        content = payload["choices"][0]["message"]["content"]
        return JudgeReply.model_validate_json(content), tokens
    except (KeyError, IndexError, TypeError):
        raise _Malformed("malformed reply: no choices[0].message.content", tokens) from None
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "reply"
        raise _Malformed(f"malformed reply: {where}: {first['msg']}", tokens) from None


# --------------------------------------------------------------------------- offline similarity

_SENTENCE = re.compile(r"[^\n.!?]+[.!?]?")


class SimilarityJudge:
    """Grade = the highest grade whose threshold the cosine of query and text reaches; evidence =
    the sentence most similar to the query. Deterministic: one sample is all it can give."""

    def __init__(self, judge: Judge, encode: Callable[[list[str]], np.ndarray]) -> None:
        backend = judge.config.backend
        assert isinstance(backend, SimilarityBackend)
        self.backend, self.encode = backend, encode
        self.ladder = sorted(backend.thresholds.items(), key=lambda kv: kv[1])
        self.floor = min(judge.config.rubric)
        self.cache: dict[str, np.ndarray] = {}

    def __call__(self, item: Item, sample: int) -> Sample:
        started = time.perf_counter()
        sentences = [(m.start(), m.end()) for m in _SENTENCE.finditer(item.text) if m.group().strip()]
        texts = [item.query, item.text, *(item.text[a:b] for a, b in sentences)]
        fresh = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if fresh:  # a pool repeats its queries and documents: each text is encoded once
            self.cache.update(zip(fresh, self.encode(fresh), strict=True))
        vectors = np.stack([self.cache[t] for t in texts])
        scores = vectors[1:] @ vectors[0]
        whole = float(scores[0])
        grade = self.floor
        for g, threshold in self.ladder:
            if whole >= threshold:
                grade = max(grade, g)
        evidence = []
        if sentences:
            best = int(np.argmax(scores[1:]))
            a, b = sentences[best]
            while a < b and item.text[a].isspace():
                a += 1
            evidence = [Span(start=a, end=b, text=item.text[a:b])]
        near = any(abs(whole - t) < self.backend.margin for _, t in self.ladder)
        reply = JudgeReply(
            grade=grade,
            reason=f"cosine similarity {whole:.3f} of query and text (thresholds {dict(self.ladder)})",
            evidence=evidence,
        )
        return Sample(reply=reply, attempts=1, latency_s=time.perf_counter() - started, uncertain=near)


Backend = Callable[[Item, int], Sample]


def spans_problem(reply: JudgeReply, text: str, rubric: Sequence[int]) -> str | None:
    """Why a well-formed reply is still rejected: a grade off the rubric, or a span whose text is
    not at its offsets in the text shown."""
    if reply.grade not in rubric:
        return f"grade {reply.grade} is not on the rubric ({', '.join(map(str, sorted(rubric)))})"
    if reply.grade > min(rubric) and not reply.evidence:
        return f"grade {reply.grade} without an evidence span"
    for span in reply.evidence:
        if not 0 <= span.start < span.end <= len(text):
            return f"evidence span {span.start}-{span.end} lies outside the text (length {len(text)})"
        if text[span.start : span.end] != span.text:
            return f"evidence span {span.start}-{span.end} does not hold the quoted text"
    return None
