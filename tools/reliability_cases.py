"""Issue 28's generated cases, run for real: inputs, faults, concurrency, security and secrets.

Each case does what a user or a fault would (a params override, a corrupted cache file, a dead
service, a secret echoed in some encoding, a half-finished registry move) through rageval's own
functions, and classifies what happened:

- ``handled``: the expected outcome (a clear refusal naming the field or file, a rebuild, a
  redaction, a repair) was observed;
- ``mishandled``: something else happened (another exception, a traceback, a different message);
- ``wrong-exit-0``: accepted silently where a refusal was expected;
- ``lost``: something recorded was lost or changed.

    PYTHONPATH=. python tools/reliability_cases.py          # the table (Markdown) and the counts

tests/test_reliability4_cases.py runs the same cases and requires every one ``handled``. Not part of
the rageval package.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import socket
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, quote_plus

ROOT = Path(__file__).resolve().parent.parent
BM25 = ROOT / "params" / "bm25.yaml"
HTTP = ROOT / "params" / "http-bm25.yaml"
TOKEN_VAR = "RAGEVAL_SEARCH_TOKEN"
TOKEN = "tok/9Zq+e7=Yx_never-recorded~42"
SECRET = f"Bearer {TOKEN}"


@dataclass(frozen=True)
class Case:
    family: str
    name: str
    expected: str
    run: Callable[[], str]  # returns what was observed; raises Mishandled / WrongExit0 / Lost


class Mishandled(Exception):
    pass


class WrongExit0(Exception):
    pass


class Lost(Exception):
    pass


# --------------------------------------------------------------------------- helpers


def refused(call: Callable[[], object], *needles: str, error: type | None = None) -> str:
    """``call`` must raise a rageval error (``error`` when given) whose text holds every needle."""
    from rageval.errors import RagevalError

    try:
        call()
    except RagevalError as exc:
        text = str(exc)
        if error is not None and not isinstance(exc, error):
            raise Mishandled(f"{type(exc).__name__}: {text[:200]}") from None
        missing = [n for n in needles if n not in text]
        if missing:
            raise Mishandled(f"message lacks {missing}: {text[:300]}") from None
        return f"refused ({type(exc).__name__}): {one_line(text)}"
    except Exception as exc:  # noqa: BLE001 - any other exception is what this classifies
        raise Mishandled(f"{type(exc).__name__}: {exc}") from None
    raise WrongExit0("accepted")


def one_line(text: str, width: int = 150) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def config_refused(override: str, field: str, *needles: str) -> Callable[[], str]:
    from rageval.config.load import load_config
    from rageval.errors import ConfigError

    def run() -> str:
        os.environ.setdefault(TOKEN_VAR, SECRET)
        observed = refused(lambda: load_config(BM25, [override]), field, *needles, error=ConfigError)
        return observed

    return run


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def echoes(secret: str) -> dict[str, str]:
    """The secret as a careless service repeats it."""
    token = secret.split()[-1]

    def b64(text: str, prefix: str = "") -> str:
        return base64.b64encode((prefix + text).encode()).decode()

    return {
        "exact": f"denied for {secret}",
        "token only": f"bad token {token}!",
        "JSON-escaped (\\/)": json.dumps({"auth": secret}).replace("/", "\\/"),
        "URL-encoded": f"GET /login?next={quote(secret, safe='')}",
        "URL-encoded, lower-case hex": re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(secret, safe="")),
        "URL-encoded with +": f"q={quote_plus(secret)}",
        "base64": f"Basic {b64(secret)}",
        "base64 inside a longer text (offset 1)": b64(secret, "u:"),
        "base64 inside a longer text (offset 2)": b64(token, "user:"),
        "base64 URL-safe": base64.urlsafe_b64encode(("x" + token).encode()).decode(),
        "base64 wrapped at 8 columns": "\n".join(textwrap.wrap(b64(secret), 8)),
        "re-wrapped text": "\n  ".join(textwrap.wrap(secret, 6)),
        "folded by spaces inside JSON": json.dumps(" ".join(textwrap.wrap(token, 5))),
        "HTML-escaped": f"<p>{html.escape(secret)}</p>",
    }


def leaked(text: str, token: str = TOKEN) -> list[str]:
    flat = "".join(text.split()).replace("\\n", "")
    probes = {"token": token, "json": token.replace("/", "\\/"), "url": quote(token, safe="")}
    for offset in range(3):
        probes[f"base64+{offset}"] = base64.b64encode(("\0" * offset + token).encode()).decode()[3:-3]
        probes[f"base64url+{offset}"] = base64.urlsafe_b64encode(("\0" * offset + token).encode()).decode()[3:-3]
    return [name for name, probe in probes.items() if probe.lower() in flat.lower()]


def redacted(form: str) -> Callable[[], str]:
    def run() -> str:
        from rageval.safety import Redactor

        text = echoes(SECRET)[form]
        if not leaked(text):
            raise Mishandled("the probe does not see the form")
        out = Redactor([SECRET])(text)
        if leaked(out):
            raise Lost(f"the secret is still there: {out[:120]}")
        return f"redacted: {one_line(out, 60)!r}"

    return run


# --------------------------------------------------------------------------- faults


def environment_entry(damage: Callable[[Path, str], None]) -> Callable[[], str]:
    def run() -> str:
        from rageval.tracking.environment import environment

        with tempfile.TemporaryDirectory() as tmp:
            old = os.environ.get("RAGEVAL_CACHE")
            os.environ["RAGEVAL_CACHE"] = tmp
            try:
                full = environment()
                (entry,) = (Path(tmp) / "environment").glob("*.txt")
                damage(entry, full)
                again = environment()
            finally:
                if old is None:
                    os.environ.pop("RAGEVAL_CACHE", None)
                else:
                    os.environ["RAGEVAL_CACHE"] = old
        if again != full:
            raise Lost(f"environment list read as {len(again.splitlines())} of {len(full.splitlines())} packages")
        return f"rebuilt: {len(again.splitlines())} of {len(full.splitlines())} packages"

    return run


def cache_entry(damage: Callable[[Path], None]) -> Callable[[], str]:
    def run() -> str:
        from rageval.retrieval.cache import Cache

        with tempfile.TemporaryDirectory() as tmp:
            cache = Cache(tmp)
            builds = []

            def build(folder: Path) -> None:
                builds.append(1)
                (folder / "index.bin").write_bytes(b"index" * 1000)

            first = cache.get_or_build("bm25", {"k": 1}, build)
            damage(first.path)
            again = cache.get_or_build("bm25", {"k": 1}, build)
            data = (again.path / "index.bin").read_bytes()
        if again.hit or data != b"index" * 1000:
            raise Lost("the damaged entry was used")
        return f"rebuilt (builds: {len(builds)}), never used"

    return run


def concurrent_cache_builds() -> str:
    from rageval.retrieval.cache import Cache

    with tempfile.TemporaryDirectory() as tmp:
        builds = []

        def build(folder: Path) -> None:
            builds.append(1)
            time.sleep(0.3)
            (folder / "index.bin").write_bytes(b"x" * 100)

        results = []
        threads = [
            threading.Thread(target=lambda: results.append(Cache(tmp).get_or_build("bm25", {"k": 2}, build)))
            for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if len(builds) != 1 or len(results) != 4:
        raise Mishandled(f"{len(builds)} builds for 4 readers")
    return f"built once, {sum(r.hit for r in results)} of 4 read it"


def concurrent_environment() -> str:
    from rageval.tracking.environment import environment

    with tempfile.TemporaryDirectory() as tmp:
        old = os.environ.get("RAGEVAL_CACHE")
        os.environ["RAGEVAL_CACHE"] = tmp
        try:
            full = environment()
            (entry,) = (Path(tmp) / "environment").glob("*.txt")
            entry.write_text("sha256 0\npip==1\n")
            seen: list[str] = []
            threads = [threading.Thread(target=lambda: seen.append(environment())) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            if old is None:
                os.environ.pop("RAGEVAL_CACHE", None)
            else:
                os.environ["RAGEVAL_CACHE"] = old
    if seen != [full] * 4:
        raise Lost("a reader got a damaged list")
    return "4 parallel readers of a damaged entry: each got the whole list"


def dead_service_run(budget: str | None) -> Callable[[], str]:
    def run() -> str:
        from rageval.config.load import load_config
        from rageval.errors import EvaluationError
        from rageval.experiment.run import run_experiment

        os.environ.setdefault(TOKEN_VAR, SECRET)
        overrides = [f"retrieval.stages.0.url=http://127.0.0.1:{free_port()}/search", "retrieval.stages.0.retries=0"]
        if budget is None:
            config = load_config(HTTP, overrides)
            return refused(
                lambda: run_experiment(config, cache=False),
                "queries failed (100%)",
                "failures.max_fraction",
                error=EvaluationError,
            )
        result = run_experiment(load_config(HTTP, [*overrides, f"failures.max_fraction={budget}"]), cache=False)
        warning = [w for w in result.warnings if "failed" in w]
        if not warning or result.counts()["queries_failed"] == 0:
            raise WrongExit0("failed queries without a warning")
        return f"recorded with the warning: {one_line(warning[0], 110)}"

    return run


def failed_side_compared() -> str:
    from rageval.analysis.comparison import refuse_failed_queries
    from rageval.analysis.records import RunInfo
    from rageval.errors import ComparisonError

    info = RunInfo("r1", "broken", "0", "FINISHED", True, {}, {"queries_failed": 8.0}, {}, "")
    return refused(lambda: refuse_failed_queries([("baseline", info, None)]), "8 failed", error=ComparisonError)


def pool_depth(depth: int) -> Callable[[], str]:
    def run() -> str:
        import pandas as pd

        from rageval.benchmark.loading import load_benchmark
        from rageval.errors import BenchmarkError
        from rageval.judging.pooling import pool

        bench = load_benchmark(ROOT / "rageval" / "demo")
        frame = pd.DataFrame({"query_id": ["q"], "rank": [1], "chunk_id": ["c"], "parent_id": ["d"]})
        return refused(lambda: pool({"r": frame}, bench, "dev", depth), "from 1 to 1000", error=BenchmarkError)

    return run


def registry_left(sealed: bool) -> Callable[[], str]:
    """A store whose registry holds the intent a killed rollback leaves (its run sealed or not)."""

    def run() -> str:
        from rageval.errors import TrackingError
        from rageval.tracking.registry import CHAMPION, INTENT_TAG, Registry
        from rageval.tracking.store import Tracker

        with tempfile.TemporaryDirectory() as tmp:
            tracker = Tracker(f"sqlite:///{Path(tmp) / 'mlflow.db'}")
            registry = Registry(tracker)
            registry.ensure_model("fam", "cases")
            for n in (1, 2):
                evaluation = tracker.create_run("cases", f"eval {n}", params={}, tags={})
                tracker.seal(evaluation)
                registry.register("fam", evaluation, {})
            registry.set_champions("fam", ["1", "2"])
            record = tracker.create_run("cases", "rollback", params={}, tags={})
            intent = {"run": record, "history": ["1"], "model_tags": {}, "version_tags": {}}
            registry.client.set_registered_model_tag("fam", INTENT_TAG, json.dumps(intent))
            if sealed:
                tracker.seal(record)
                registry.client.set_registered_model_tag("fam", "rageval.champion.history", '["1"]')  # half moved
            observed = refused(lambda: registry.settle("fam"), record, error=TrackingError)
            champion = registry.alias("fam", CHAMPION)
            history = registry.history("fam")
            want = ("1", ["1"]) if sealed else ("2", ["1", "2"])
            if (champion.version if champion else None, history) != want:
                raise Lost(f"champion {champion}, history {history}")
            registry.settle("fam")  # settled now
        return observed

    return run


def url_refused(url: str, *needles: str) -> Callable[[], str]:
    def run() -> str:
        from rageval.config.load import load_config
        from rageval.errors import ConfigError

        os.environ.setdefault(TOKEN_VAR, SECRET)
        observed = refused(lambda: load_config(HTTP, [f"retrieval.stages.0.url={url}"]), *needles, error=ConfigError)
        if "hunter2" in observed or "sk-live" in observed:
            raise Lost("the credential is in the error")
        return observed

    return run


def judge_url(url: str, found: str) -> Callable[[], str]:
    def run() -> str:
        from rageval.safety import url_credentials

        got = url_credentials(url)
        if got != found:
            raise WrongExit0(f"found {got!r}")
        return f"refused as carrying credentials ({got}); the value is never named"

    return run


def header_injection() -> str:
    from rageval.config.load import load_config
    from rageval.errors import ConfigError

    old = os.environ.get(TOKEN_VAR)
    os.environ[TOKEN_VAR] = "Bearer x\r\nX-Injected: 1"
    try:
        return refused(lambda: load_config(HTTP), "holds a line break or control character", error=ConfigError)
    finally:
        if old is None:
            os.environ.pop(TOKEN_VAR, None)
        else:
            os.environ[TOKEN_VAR] = old


# --------------------------------------------------------------------------- the cases


def _truncate(entry: Path, full: str) -> None:
    head = entry.read_text().partition("\n")[0]
    entry.write_text(head + "\n" + "\n".join(full.splitlines()[:3]) + "\n")


def cases() -> list[Case]:
    out: list[Case] = []
    bounds = [
        ("final_k=0", "final_k", "greater than 0"),
        ("final_k=10001", "final_k", "less than or equal to 10000"),
        ("final_k=1.5", "final_k", "valid integer"),
        ("final_k=ten", "final_k", "valid integer"),
        ("evaluation.depth=0", "evaluation.depth", "greater than or equal to 1"),
        ("evaluation.depth=1000000", "evaluation.depth", "less than or equal to 10000"),
        ("context.max_tokens=-5", "context.max_tokens", "greater than 0"),
        ("context.max_tokens=1000000000000", "context.max_tokens", "less than or equal to 10000000"),
        ("chunking.size=0", "chunking.size", "greater than 0"),
        ("chunking.size=1000000000", "chunking.size", "less than or equal to 100000"),
        ("chunking.overlap=150", "chunking.overlap", "at most half of size"),
        ("failures.max_fraction=-0.1", "failures.max_fraction", "greater than or equal to 0"),
        ("failures.max_fraction=1.01", "failures.max_fraction", "less than or equal to 1"),
        ("failures.max_fraction=all", "failures.max_fraction", "valid number"),
        ("failures.budget=1", "failures.budget", "unknown key 'budget' (allowed keys here: max_fraction)"),
        ("evaluation.measures=[P@0]", "evaluation.measures", "not a positive integer"),
        ("evaluation.measures=[nDCG@1.5]", "evaluation.measures", "not a positive integer"),
        ("name=a/b", "name", "path separator"),
        ("name=a\u200bb", "name", "invisible"),
        ("retrieval.stages.0.k1=-1", "retrieval.stages[0].k1", "greater than or equal to 0"),
        ("finalk=5", "finalk", "unknown key 'finalk'"),
    ]
    for override, field, needle in bounds:
        out.append(
            Case("inputs", f"`--set {override}`", f"refused naming `{field}`", config_refused(override, field, needle))
        )
    for depth in (0, 1001):
        out.append(Case("inputs", f"`judge pool --depth {depth}`", "refused with the limit", pool_depth(depth)))
    for form in echoes(SECRET):
        out.append(Case("secrets", f"a service echoes the token {form}", "redacted (`***`)", redacted(form)))
    out += [
        Case("security", "http stage URL `user:hunter2@`", "refused with the fix, value not echoed",
             url_refused("https://me:hunter2@search.example/q", "carries credentials")),
        Case("security", "http stage URL `?api_key=sk-live-1`", "refused with the fix, value not echoed",
             url_refused("https://search.example/q?api_key=sk-live-1", "api_key", "headers_from_env")),
        Case("security", "http stage URL `?X-Amz-Signature=…`", "refused, value not echoed",
             url_refused("https://search.example/q?X-Amz-Signature=sk-live-2", "X-Amz-Signature")),
        Case("security", "judge `base_url` with `user:pass@`", "refused (backend.base_url)",
             judge_url("http://me:sk-live@127.0.0.1:8000/v1", "user:password@")),
        Case("security", "judge `base_url` with `?token=`", "refused (backend.base_url)",
             judge_url("http://127.0.0.1:8000/v1?token=sk-live", "token")),
        Case("security", "header variable holding CR LF + a header", "refused, value not echoed", header_injection),
        Case("faults", "environment cache entry truncated to 3 packages", "rebuilt, never sealed",
             environment_entry(_truncate)),
        Case("faults", "environment cache entry of the old format (no digest)", "rebuilt",
             environment_entry(lambda e, f: e.write_text("pip==1\n"))),
        Case("faults", "environment cache entry not UTF-8", "rebuilt",
             environment_entry(lambda e, f: e.write_bytes(b"\xff\xfe"))),
        Case("faults", "environment cache entry emptied", "rebuilt", environment_entry(lambda e, f: e.write_text(""))),
        Case("faults", "BM25 cache payload truncated", "rebuilt, never used",
             cache_entry(lambda p: (p / "index.bin").write_bytes(b"index"))),
        Case("faults", "BM25 cache payload deleted", "rebuilt", cache_entry(lambda p: (p / "index.bin").unlink())),
        Case("faults", "cache entry.json deleted", "rebuilt", cache_entry(lambda p: (p / "entry.json").unlink())),
        Case("faults", "cache entry.json not JSON", "rebuilt", cache_entry(lambda p: (p / "entry.json").write_text("{"))),
        Case("faults", "http stage service down, default budget", "refused: run not a result, names the failures",
             dead_service_run(None)),
        Case("faults", "http stage service down, `failures.max_fraction=1.0`", "recorded with a warning",
             dead_service_run("1.0")),
        Case("faults", "gate/compare given a run with 8 failed queries", "refused, naming the run",
             failed_side_compared),
        Case("concurrency", "4 parallel builds of one cache entry", "built once", concurrent_cache_builds),
        Case("concurrency", "4 parallel readers of a damaged environment entry", "each gets the whole list",
             concurrent_environment),
        Case("concurrency", "rollback killed after its record was sealed (aliases half moved)",
             "next command completes it and says so", registry_left(True)),
        Case("concurrency", "rollback killed before its record was sealed", "next command drops it, aliases as before",
             registry_left(False)),
    ]  # fmt: skip
    return out


def run_case(case: Case) -> tuple[str, str]:
    """(outcome, observed) of one case."""
    try:
        return "handled", case.run()
    except Mishandled as exc:
        return "mishandled", str(exc)
    except WrongExit0 as exc:
        return "wrong-exit-0", str(exc)
    except Lost as exc:
        return "lost", str(exc)
    except Exception as exc:  # noqa: BLE001 - a crash of the case is mishandled too
        return "mishandled", f"{type(exc).__name__}: {exc}"


def main() -> int:
    rows = []
    for case in cases():
        outcome, observed = run_case(case)
        rows.append((case, outcome, observed))
    print("| family | case | expected | observed | outcome |")
    print("|---|---|---|---|---|")
    for case, outcome, observed in rows:
        cell = observed.replace("|", "\\|")
        print(f"| {case.family} | {case.name} | {case.expected} | {cell} | {outcome} |")
    counts = {k: sum(o == k for _, o, _ in rows) for k in ("handled", "mishandled", "wrong-exit-0", "lost")}
    print(f"\n{len(rows)} cases: " + ", ".join(f"{v} {k}" for k, v in counts.items()), file=sys.stderr)
    return 0 if counts["handled"] == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
