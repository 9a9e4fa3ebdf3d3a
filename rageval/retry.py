"""Retrying a call to a service: one helper, over tenacity, for every caller that talks to one (the
``http`` retrieval stage, the judge's chat backend). Each caller says which errors are worth another
attempt; the schedule is the same for all: ``backoff_s`` before the first retry, doubling after."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

T = TypeVar("T")


def call_with_retries(
    call: Callable[[], T],
    *,
    retries: int,
    backoff_s: float,
    retry_if: Callable[[BaseException], bool],
    max_backoff_s: float | None = None,
) -> T:
    """What ``call()`` returns, calling it at most ``retries + 1`` times: an exception that
    ``retry_if`` accepts is retried after a wait of ``backoff_s`` that doubles each retry (at most
    ``max_backoff_s``); any other exception, or the last attempt's, is raised as it was."""
    wait = (
        wait_exponential(multiplier=backoff_s)
        if max_backoff_s is None
        else wait_exponential(multiplier=backoff_s, max=max_backoff_s)
    )
    retrying = Retrying(
        stop=stop_after_attempt(retries + 1), wait=wait, retry=retry_if_exception(retry_if), reraise=True
    )
    return retrying(call)
