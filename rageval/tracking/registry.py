"""The MLflow Model Registry as rageval uses it: one registered model per retriever family (the
configurations' ``name``), one version per configuration, the aliases ``champion`` and ``previous``.

A version's ``source`` is ``runs:/<evaluation run>/config.yaml`` with ``run_id`` the same run: an
MLflow server accepts a ``runs:/`` source only when its run ID is the version's ``run_id``, and the
sqlite store stores it as given. What serving needs beyond the configuration (the BM25 index,
the embeddings) is in a sealed bundle run, named by the version's :data:`BUNDLE_TAG`.

Which versions were champion, oldest first, is a JSON list in the registered model's
:data:`HISTORY_TAG`: a promotion pushes, a rollback pops, and ``previous`` is always the entry
below the top (no alias when there is none).

Moving the aliases takes several writes (the history, ``champion``, ``previous``, the tags), and a
process can be killed between any two. So a move is an intent first (:data:`INTENT_TAG` on the
registered model, naming the run that records it), then that run sealed, then the writes, then
the intent cleared: aliases never move without a sealed record, and the next promote or
rollback finds an intent left behind and finishes it (its run sealed) or drops it (never sealed:
nothing had moved) — :meth:`Registry.resume`.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass

from rageval.errors import TrackingError
from rageval.tracking.store import Tracker

CHAMPION = "champion"
PREVIOUS = "previous"
EVALUATION_TAG = "rageval.evaluation"
BUNDLE_TAG = "rageval.bundle"
BUNDLE_SEAL_TAG = "rageval.bundle.seal"
CONFIG_SHA_TAG = "rageval.config.sha256"
HISTORY_TAG = "rageval.champion.history"
INTENT_TAG = "rageval.registry.intent"
# A test hook, read when a step is reached (never at import): the process kills itself with SIGKILL
# at the named step of a move (intent, sealed, history, champion, previous, tags). Inert when unset.
CRASH_AT_VARIABLE = "RAGEVAL_TEST_CRASH_AT"


def crash_point(step: str) -> None:
    """Die here, as a power cut would, when the test hook names ``step``."""
    if os.environ.get(CRASH_AT_VARIABLE) == step:
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class Version:
    model: str
    version: str
    evaluation_run: str
    bundle_run: str
    tags: dict[str, str]


class Registry:
    """The registry of a tracking store (the same URI: MLflow's registry URI defaults to it)."""

    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker
        self.client = tracker.client

    def ensure_model(self, name: str, description: str) -> None:
        from mlflow.exceptions import MlflowException

        try:
            self.client.get_registered_model(name)
        except MlflowException:
            self.client.create_registered_model(name, tags={HISTORY_TAG: "[]"}, description=description)

    def version_of(self, name: str, evaluation_run: str) -> Version | None:
        """The version registered for ``evaluation_run``, if any."""
        found = self.client.search_model_versions(f"name = '{name}' and run_id = '{evaluation_run}'")
        return self._version(found[0]) if found else None

    def register(self, name: str, evaluation_run: str, tags: dict[str, str], description: str = "") -> Version:
        made = self.client.create_model_version(
            name,
            f"runs:/{evaluation_run}/config.yaml",
            run_id=evaluation_run,
            tags={EVALUATION_TAG: evaluation_run, **tags},
            description=description or None,
            await_creation_for=0,
        )
        return self._version(made)

    def describe(self, name: str, version: str, description: str) -> None:
        self.client.update_model_version(name, version, description=description)

    def tag_model(self, name: str, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            self.client.set_registered_model_tag(name, key, value)

    def get(self, name: str, version: str) -> Version:
        from mlflow.exceptions import MlflowException

        try:
            return self._version(self.client.get_model_version(name, version))
        except MlflowException:
            raise TrackingError(f"no version {version} of registered model {name!r} in {self.tracker.uri}") from None

    def alias(self, name: str, alias: str) -> Version | None:
        from mlflow.exceptions import MlflowException

        try:
            return self._version(self.client.get_model_version_by_alias(name, alias))
        except MlflowException:
            return None

    def history(self, name: str) -> list[str]:
        from mlflow.exceptions import MlflowException

        try:
            model = self.client.get_registered_model(name)
        except MlflowException:
            raise TrackingError(
                f"no registered model {name!r} in {self.tracker.uri}: promote a release of that family first "
                "(`rageval promote RELEASE_RUN`)"
            ) from None
        return list(json.loads(model.tags.get(HISTORY_TAG, "[]")))

    def move_champions(
        self,
        name: str,
        history: list[str],
        record_run: str,
        *,
        model_tags: dict[str, str] | None = None,
        version_tags: dict[str, dict[str, str]] | None = None,
    ) -> None:
        """Set the champion ``history`` (and tags) as the unsealed run ``record_run`` records it:
        the intent, the run sealed, the writes, the intent cleared (see the module docstring)."""
        intent = {
            "run": record_run,
            "history": history,
            "model_tags": model_tags or {},
            "version_tags": version_tags or {},
        }
        self.client.set_registered_model_tag(name, INTENT_TAG, json.dumps(intent))
        crash_point("intent")
        self.tracker.seal(record_run)
        crash_point("sealed")
        self._apply(name, intent)

    def resume(self, name: str) -> str | None:
        """Finish a move a killed process left half done (its run sealed), or drop one whose run was
        never sealed (no alias had moved then); say which, or None when there was none."""
        from mlflow.exceptions import MlflowException

        try:
            tags = self.client.get_registered_model(name).tags
        except MlflowException:
            return None
        if INTENT_TAG not in tags:
            return None
        intent = json.loads(tags[INTENT_TAG])
        run = intent["run"]
        if self.tracker.run(run).sealed:
            self._apply(name, intent)
            return (
                f"registered model {name!r}: a move of its aliases recorded by sealed run {run} was interrupted; "
                f"it is completed now (champion v{intent['history'][-1]}, history {intent['history']})"
            )
        self.client.delete_registered_model_tag(name, INTENT_TAG)
        return (
            f"registered model {name!r}: a move of its aliases was interrupted before its record (run {run}) "
            "was sealed; no alias had moved, and the unsealed run records nothing"
        )

    def settle(self, name: str) -> None:
        """Before a promote or rollback: a move left half done is finished or dropped (:meth:`resume`)
        and said so, and the command stops there, so that it never acts twice."""
        done = self.resume(name)
        if done:
            raise TrackingError(f"{done}. Nothing else was done; run the command again")

    def fail_unsealed(self, run_id: str, error: str) -> None:
        """A move that failed half way: before the seal its run ends FAILED; after it, the record
        stands and the next promote or rollback completes the move (:meth:`settle`)."""
        if not self.tracker.run(run_id).sealed:
            self.tracker.fail(run_id, error)

    def _apply(self, name: str, intent: dict) -> None:
        self.set_champions(name, intent["history"])
        crash_point("tags")
        self.tag_model(name, intent["model_tags"])
        for version, tags in intent["version_tags"].items():
            self.tag_version(name, version, tags)
        self.client.delete_registered_model_tag(name, INTENT_TAG)

    def set_champions(self, name: str, history: list[str]) -> None:
        """Record the champion history and point ``champion`` at its top, ``previous`` below it."""
        self.client.set_registered_model_tag(name, HISTORY_TAG, json.dumps(history))
        crash_point("history")
        self.client.set_registered_model_alias(name, CHAMPION, history[-1])
        crash_point("champion")
        if len(history) > 1:
            self.client.set_registered_model_alias(name, PREVIOUS, history[-2])
        elif self.alias(name, PREVIOUS) is not None:
            self.client.delete_registered_model_alias(name, PREVIOUS)

    def tag_version(self, name: str, version: str, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            self.client.set_model_version_tag(name, version, key, value)

    @staticmethod
    def _version(found) -> Version:  # noqa: ANN001 - an mlflow ModelVersion
        tags = dict(found.tags)
        return Version(
            found.name, str(found.version), tags.get(EVALUATION_TAG, found.run_id or ""), tags.get(BUNDLE_TAG, ""), tags
        )
