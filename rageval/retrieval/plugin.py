"""Bring your own stage: ``type: plugin`` with ``entrypoint: package.module:Class``.

The class is built as ``Class(corpus, **options)`` and called like every stage
(:mod:`rageval.retrieval.base`). A class attribute ``retriever = False`` makes it consume the
previous stage's ranking by default (a reranker); otherwise it is a retriever. Test it with
:class:`rageval.testing.RetrieverContract`.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from rageval.errors import CONFIG, ConfigError, Problem
from rageval.retrieval.base import Corpus, Stage
from rageval.retrieval.schema import PluginConfig


def import_named(entrypoint: str, field: str) -> tuple[ModuleType, Any]:
    """The module of a ``package.module:name`` entry and its attribute ``name`` (None when absent);
    a module that cannot be imported is a :class:`ConfigError` on ``field``."""
    module_name, _, attribute = entrypoint.partition(":")
    try:
        module = importlib.import_module(module_name)
    except (ImportError, TypeError, ValueError) as exc:  # TypeError/ValueError: a relative or empty name
        raise ConfigError(
            Problem(
                file=CONFIG,
                field=field,
                message=f"cannot import '{module_name}': {exc}",
                fix="install the package, or put the module on PYTHONPATH",
            )
        ) from None
    return module, getattr(module, attribute, None)


def load_entrypoint(entrypoint: str) -> type:
    module_name, _, attribute = entrypoint.partition(":")
    _, cls = import_named(entrypoint, "entrypoint")
    if not isinstance(cls, type):
        raise ConfigError(
            Problem(file=CONFIG, field="entrypoint", message=f"'{module_name}' has no class '{attribute}'")
        )
    return cls


def is_retriever(config: PluginConfig) -> bool:
    return bool(getattr(load_entrypoint(config.entrypoint), "retriever", True))


def build_plugin(config: PluginConfig, corpus: Corpus) -> Stage:
    cls = load_entrypoint(config.entrypoint)
    try:
        stage = cls(corpus, **config.options)
    except TypeError as exc:
        raise ConfigError(
            Problem(
                file=CONFIG,
                field="options",
                message=f"{config.entrypoint}(corpus, **options) failed: {exc}",
                fix="check the stage's options",
            )
        ) from None
    if not callable(stage):
        raise ConfigError(
            Problem(file=CONFIG, field="entrypoint", message=f"{config.entrypoint} instances are not callable")
        )
    stage.name = config.name
    return stage
