"""Issue 28 item 7: a secret given to rageval (an http stage header, a judge backend's API key)
never reaches a record in any encoding a service may echo it in: as written, JSON-escaped (``\\/``),
URL-encoded, base64 (at any alignment inside a longer text), HTML-escaped, re-wrapped or folded.
Credentials in a URL are refused with the fix. Real services on 127.0.0.1 (FastAPI + uvicorn)."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import textwrap
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
import yaml
from conftest import ROOT
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from http_service import serve

from rageval.errors import ConfigError
from rageval.judging.backends import ChatBackend, Item
from rageval.judging.judges import load_judge
from rageval.safety import Redactor, secret_forms, url_credentials

HTTP = ROOT / "params" / "http-bm25.yaml"
TOKEN_VAR = "RAGEVAL_SEARCH_TOKEN"
TOKEN = "tok/9Zq+e7=Yx_never-recorded~42"  # '/', '+', '=' and '~' encode differently in each form
SECRET = f"Bearer {TOKEN}"


def b64(text: str, prefix: str = "") -> str:
    return base64.b64encode((prefix + text).encode()).decode()


def echoes(secret: str) -> dict[str, str]:
    """The secret as a careless service repeats it: each form in a text of its own."""
    token = secret.split()[-1]
    return {
        "exact": f"denied for {secret}",
        "token only": f"bad token {token}!",
        "json escaped": json.dumps({"auth": secret}).replace("/", "\\/"),
        "url encoded": f"GET /login?next={quote(secret, safe='')}",
        "url encoded, lower hex": re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(secret, safe="")),
        "url plus": f"q={quote_plus(secret)}",
        "base64": f"Basic {b64(secret)}",
        "base64, offset 1": b64(secret, "u:"),
        "base64, offset 2": b64(token, "user:"),
        "base64 url-safe": base64.urlsafe_b64encode(("x" + token).encode()).decode(),
        "base64 wrapped at 8": "\n".join(textwrap.wrap(b64(secret), 8)),
        "re-wrapped": "\n  ".join(textwrap.wrap(secret, 6)),
        "folded in JSON": json.dumps(" ".join(textwrap.wrap(token, 5))),
        "html": f"<p>{html.escape(secret)}</p>",
    }


def leaked(text: str, token: str = TOKEN) -> list[str]:
    """Which of the token's recognisable forms ``text`` still holds (folding whitespace away)."""
    flat = "".join(text.split()).replace("\\n", "")
    probes = {"token": token, "json": token.replace("/", "\\/"), "url": quote(token, safe="")}
    for offset in range(3):
        core = b64(token, "\0" * offset)[3:-3]
        probes[f"base64+{offset}"] = core
        probes[f"base64url+{offset}"] = base64.urlsafe_b64encode(("\0" * offset + token).encode()).decode()[3:-3]
    return [name for name, probe in probes.items() if probe in flat or probe.lower() in flat.lower()]


@pytest.mark.parametrize("form", list(echoes(SECRET)))
def test_a_secret_is_redacted_in_every_encoding(form):
    text = echoes(SECRET)[form]
    assert leaked(text), f"the probe does not see the {form} form"  # the probe itself is real
    redacted = Redactor([SECRET])(text)
    assert leaked(redacted) == [], (form, redacted)
    assert "***" in redacted


def test_redaction_leaves_ordinary_text_alone():
    redact = Redactor([SECRET])
    text = "HTTP 401 Unauthorized: Bearer token missing; see https://example.org/docs?x=1 (tok/9 of 42)"
    assert redact(text) == text
    assert Redactor([])(text) == text and Redactor([""])(text) == text
    assert all(len(f) >= 4 for f in secret_forms("ab"))


@pytest.mark.parametrize(
    ("url", "found"),
    [
        ("https://me:hunter2@api.example/v1", "user:password@"),
        ("https://api.example/v1?api_key=sk-123", "api_key"),
        ("https://api.example/v1?model=x&Token=abc", "Token"),
        ("https://api.example/v1?X-Amz-Signature=ab&X-Amz-Credential=cd", "X-Amz-Credential, X-Amz-Signature"),
        ("http://127.0.0.1:8000/v1", None),
        ("http://127.0.0.1:8000/v1?model=qwen", None),
    ],
)
def test_credentials_in_a_url_are_found_by_name_never_by_value(url, found):
    assert url_credentials(url) == found


# --------------------------------------------------------------------------- the http stage, end to end


def echo_app(secret_header: str = "authorization") -> FastAPI:
    """A search service that refuses every query with a 400 whose body repeats the caller's
    Authorization header in one encoding per query (the encodings taken in turn)."""
    app = FastAPI()
    forms = list(echoes(SECRET))
    seen: list[str] = []

    @app.post("/search")
    async def search(request: Request) -> Response:
        await request.body()
        header = request.headers.get(secret_header, "")
        seen.append(header)
        form = forms[len(seen) % len(forms)]
        return Response(echoes(header)[form], status_code=400, media_type="text/plain")

    app.state.seen = seen
    return app


@pytest.mark.e2e
def test_an_http_stage_echoing_its_token_in_every_encoding_leaves_no_trace_in_the_sealed_run(tmp_path, monkeypatch):
    from rageval.tracking.store import Tracker
    from rageval.workflows.run import RunRequest, execute_run

    monkeypatch.setenv(TOKEN_VAR, SECRET)
    app = echo_app()
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    with serve(app) as base:
        overrides = [f"retrieval.stages.0.url={base}/search", "retrieval.stages.0.retries=0"]
        # Every query fails; the budget lets the run be sealed so that its whole record can be read.
        outcome = execute_run(RunRequest(HTTP, overrides=[*overrides, "failures.max_fraction=1.0"]), tracker)
    assert app.state.seen and set(app.state.seen) == {SECRET}  # the token reached the service
    info = tracker.run(outcome.run_id)
    assert info.sealed and info.metrics["queries_failed"] == info.metrics["queries_total"] >= len(echoes(SECRET))
    root = Path(info.artifact_uri.removeprefix("file://"))
    failures = json.loads((root / "failures.json").read_text())
    assert len(failures) == info.metrics["queries_total"] and all("***" in f["message"] for f in failures)
    files = [p for p in root.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"failures.json", "evaluate.ipynb", "evaluate.html", "config.yaml"} <= names, names
    for path in files:
        text = path.read_bytes().decode("utf-8", errors="replace")
        assert leaked(text) == [], path
    texts = [*info.params.values(), *info.tags.values()]
    assert [t for t in texts if leaked(t)] == []


# --------------------------------------------------------------------------- the judge backend


def chat_app(key_seen: list[str]) -> FastAPI:
    """An OpenAI-compatible endpoint whose reasons repeat its caller's key, one encoding per call."""
    app = FastAPI()
    forms = list(echoes(SECRET))

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        key = request.headers.get("authorization", "")
        key_seen.append(key)
        reason = echoes(key)[forms[(len(key_seen) - 1) % len(forms)]]
        content = json.dumps({"grade": 2, "reason": reason[:2000], "evidence": []})
        return JSONResponse({"choices": [{"message": {"content": content}}], "usage": {"prompt_tokens": 5}})

    return app


def judge_at(tmp_path: Path, base_url: str) -> Path:
    folder = shutil.copytree(ROOT / "params" / "judges", tmp_path / "judges")
    path = folder / "openai-local.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["backend"]["base_url"] = base_url
    spec["backend"]["api_key_env"] = "JUDGE_KEY_FOR_TEST"
    spec["limits"] = {"timeout_s": 5, "retries": 0, "backoff_s": 0.0}
    spec["calibration"]["benchmark"] = str(ROOT / "rageval" / "demo")
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_a_judge_endpoint_echoing_its_key_in_every_encoding_gives_labels_without_it(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY_FOR_TEST", TOKEN)
    seen: list[str] = []
    with serve(chat_app(seen)) as base:
        backend = ChatBackend(load_judge(judge_at(tmp_path, f"{base}/v1")))
        try:
            samples = [backend(Item(f"i{n}", "query", "title", "text"), 0) for n in range(len(echoes(SECRET)))]
        finally:
            backend.close()
    assert set(seen) == {SECRET}  # "Bearer " + the key: it reached the endpoint
    assert all(s.reply is not None and s.reply.grade == 2 for s in samples), [s.error for s in samples]
    reasons = [s.reply.reason for s in samples if s.reply is not None]
    assert [r for r in reasons if leaked(r)] == [] and all("***" in r for r in reasons)


@pytest.mark.parametrize("base_url", ["http://me:sk-123@127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1?api_key=sk-123"])
def test_a_judge_url_carrying_credentials_is_refused_with_the_fix(tmp_path, monkeypatch, base_url):
    monkeypatch.setenv("JUDGE_KEY_FOR_TEST", TOKEN)
    with pytest.raises(ConfigError) as raised:
        ChatBackend(load_judge(judge_at(tmp_path, base_url)))
    (problem,) = raised.value.problems
    assert problem.field == "backend.base_url" and "carries credentials" in problem.message
    assert problem.fix and "api_key_env" in problem.fix and "sk-123" not in str(raised.value)


def test_a_credential_typed_into_a_set_is_not_repeated_in_the_error(monkeypatch):
    from rageval.config.load import load_config
    from rageval.safety import mask_credentials

    monkeypatch.setenv(TOKEN_VAR, SECRET)
    for url, shown in [
        ("https://me:hunter2@search.example/q", "https://me:***@search.example/q"),
        ("https://search.example/q?model=x&api_key=hunter2", "https://search.example/q?model=x&api_key=***"),
    ]:
        with pytest.raises(ConfigError) as raised:
            load_config(HTTP, [f"retrieval.stages.0.url={url}"])
        (problem,) = raised.value.problems
        assert problem.file == f"--set retrieval.stages.0.url={shown}" and "hunter2" not in str(raised.value)
        assert mask_credentials(url) == shown
    assert mask_credentials("a=b&c=d k=v") == "a=b&c=d k=v"
