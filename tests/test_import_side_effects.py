"""Importing a rageval module changes nothing outside rageval: no ``None`` or replaced entry in
``sys.modules``, no garbage-collector setting, environment variable, logging handler or level,
or warnings filter. (What the CLI tunes for speed, it tunes in its own entry point.)

One fresh interpreter imports every module in turn and compares the process's state after each
import with the state the import before it left. Modules imported along the way are fine; what an
import must not do is change what was there. A change seen after a module's import may come from a
library it imported for the first time (numpy adds warnings filters when it is imported, by anyone):
each such module is imported again in a fresh interpreter after the libraries it brought, so a
change is named only where the rageval module itself makes it.
"""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

import rageval

# Runs in a fresh interpreter. argv[1]: {"first": libraries to import before the baseline,
# "modules": rageval modules to import in order}; prints {module: {"changes": [...], "brought": [...]}},
# "brought" being the modules its import added (itself included), in the order they were added.
PROBE = r"""
import gc, json, logging, os, sys, warnings


def loggers():
    found = {"": logging.getLogger()}
    found.update((name, lg) for name, lg in logging.root.manager.loggerDict.items() if isinstance(lg, logging.Logger))
    return {
        name: (lg.level, tuple(map(id, lg.handlers)), lg.propagate, lg.disabled) for name, lg in found.items()
    }


def state():
    return {
        "modules": {name: id(module) for name, module in sys.modules.items()},
        "none_modules": sorted(name for name, module in sys.modules.items() if module is None),
        "gc": (gc.get_threshold(), gc.isenabled(), gc.get_freeze_count()),
        "environ": dict(os.environ),
        "loggers": loggers(),
        "warnings_filters": [repr(entry) for entry in warnings.filters],
    }


def changes(before, after):
    found = []
    for name, ident in before["modules"].items():
        if name not in after["modules"]:
            found.append(f"sys.modules[{name!r}] removed")
        elif after["modules"][name] != ident:
            found.append(f"sys.modules[{name!r}] replaced")
    for name in sorted(set(after["none_modules"]) - set(before["none_modules"])):
        found.append(f"sys.modules[{name!r}] = None")
    if after["gc"] != before["gc"]:
        found.append(f"gc (threshold, enabled, frozen) {before['gc']} -> {after['gc']}")
    for key in sorted(set(before["environ"]) | set(after["environ"])):
        if before["environ"].get(key) != after["environ"].get(key):
            found.append(f"os.environ[{key!r}] {before['environ'].get(key)!r} -> {after['environ'].get(key)!r}")
    for name, old in before["loggers"].items():
        new = after["loggers"].get(name)
        if new != old:
            found.append(f"logger {name or 'root'!r} (level, handlers, propagate, disabled) {old} -> {new}")
    if after["warnings_filters"] != before["warnings_filters"]:
        added = [f for f in after["warnings_filters"] if f not in before["warnings_filters"]]
        found.append(f"warnings.filters changed (added {added})")
    return found


request = json.loads(sys.argv[1])
for library in request["first"]:
    try:
        __import__(library)
    except Exception:  # a private or aliased entry that cannot be imported by its name: its parent was
        continue
report = {}
previous = state()
for module in request["modules"]:
    try:
        __import__(module)
    except Exception as error:
        report[module] = {"changes": [f"import failed: {type(error).__name__}: {error}"], "brought": []}
        previous = state()
        continue
    current = state()
    found = changes(previous, current)
    if found:
        brought = [
            name for name in current["modules"] if name not in previous["modules"] and sys.modules.get(name) is not None
        ]
        report[module] = {"changes": found, "brought": brought}
    previous = current
print(json.dumps(report))
"""


def every_module() -> list[str]:
    """Every module of the package (``__main__`` modules run a program when imported: none here)."""
    names = [info.name for info in pkgutil.walk_packages(rageval.__path__, "rageval.")]
    return ["rageval", *sorted(name for name in names if not name.endswith(".__main__"))]


def test_the_walk_finds_every_package_and_module() -> None:
    modules = every_module()
    assert {"rageval.lazy", "rageval.cli.app", "rageval.tracking.store", "rageval.execution.preload"} <= set(modules)
    on_disk = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in (ROOT / "rageval").rglob("*.py")
    }
    assert set(modules) == on_disk


def clean_environment() -> dict[str, str]:
    """A child's environment built from a few named variables, not this process's: the tests import
    rageval here, and a variable an import set here would be inherited, so setting it again there
    would change nothing to see. MLflow's telemetry stays off through ``DO_NOT_TRACK``."""
    kept = {key: os.environ[key] for key in ("PATH", "HOME", "LANG", "TMPDIR") if key in os.environ}
    return {**kept, "PYTHONPATH": str(ROOT), "DO_NOT_TRACK": "true"}


def probe(modules: list[str], first: list[str] | None = None) -> dict[str, dict[str, list[str]]]:
    """Import ``modules`` in order in a fresh interpreter (``first`` imported before its baseline)."""
    env = clean_environment()
    request = json.dumps({"first": first or [], "modules": modules})
    done = subprocess.run(
        [sys.executable, "-c", PROBE, request], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_importing_any_module_changes_nothing_outside_rageval() -> None:
    own: dict[str, list[str]] = {}
    for seen in probe(every_module()).values():
        # Again, in a fresh interpreter: the libraries the import brought first, then its rageval
        # modules, each after those it imports (the order they finished in, which sys.modules keeps).
        ours = [name for name in seen["brought"] if name.partition(".")[0] == "rageval"]
        libraries = [name for name in seen["brought"] if name.partition(".")[0] != "rageval"]
        for module, again in probe(ours, first=libraries).items():
            own[module] = again["changes"]
    problems = "\n".join(f"{module}: {change}" for module, found in own.items() for change in found)
    assert own == {}, f"importing these modules changed the process:\n{problems}"


OPEN_A_STORE = r"""
import json, logging, os, sys
import mlflow  # what importing mlflow does is mlflow's
from rageval.tracking.store import Tracker

def state():
    loggers = {name: (lg.level, len(lg.handlers)) for name, lg in logging.root.manager.loggerDict.items()
               if isinstance(lg, logging.Logger)}
    return {"environ": dict(os.environ), "loggers": loggers}

before = state()
uri = "sqlite:///" + sys.argv[1]
Tracker(uri) if sys.argv[2] == "rageval" else mlflow.MlflowClient(tracking_uri=uri).search_experiments()
after = state()
print(json.dumps({
    "environ": sorted(k for k in set(before["environ"]) | set(after["environ"])
                      if before["environ"].get(k) != after["environ"].get(k)),
    "loggers": sorted(n for n, v in before["loggers"].items() if after["loggers"].get(n) != v),
    "tables": os.path.getsize(sys.argv[1]) > 0,
}))
"""


def open_a_store(folder: Path, opener: str) -> dict[str, object]:
    """What opening a new sqlite store with ``opener`` (``rageval``'s Tracker or a plain ``mlflow``
    client) changes in a fresh interpreter started without MLflow's variables."""
    env = clean_environment()
    (folder / opener).mkdir()
    database = folder / opener / "mlflow.db"
    done = subprocess.run(
        [sys.executable, "-c", OPEN_A_STORE, str(database), opener], cwd=folder, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_opening_a_store_changes_nothing_mlflow_itself_does_not(tmp_path: Path) -> None:
    """No environment variable, and no logger but those a plain MLflow client changes too (creating
    a store's tables adds a handler to ``alembic``'s logger)."""
    rageval_did = open_a_store(tmp_path, "rageval")
    assert rageval_did["environ"] == []
    assert rageval_did == open_a_store(tmp_path, "mlflow")
    assert rageval_did["tables"] is True


TUNE = r"""
import gc, json, os, sys
from rageval.execution.preload import tune_process

tune_process()
import jsonschema  # the IRI checks it would import rfc3987_syntax for are left out
print(json.dumps({
    "gc": list(gc.get_threshold()),
    "rfc3987_syntax": "rfc3987_syntax" in sys.modules and sys.modules["rfc3987_syntax"] is None,
    "environ": {key: os.environ.get(key) for key in ("MLFLOW_DISABLE_TELEMETRY", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR")},
}))
"""


def test_what_the_command_tunes_it_tunes_when_called() -> None:
    """``tune_process`` (called by ``rageval.cli:main``, the fork server and rageval's kernels) does
    what it says, keeping a variable the user set."""
    env = {**clean_environment(), "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "true"}
    done = subprocess.run([sys.executable, "-c", TUNE], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "gc": [50_000, 20, 10],
        "rfc3987_syntax": True,
        "environ": {"MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "true"},
    }
