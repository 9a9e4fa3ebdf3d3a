"""The one retry helper: how many attempts, which errors, and the waits between them."""

from __future__ import annotations

import time

import pytest

from rageval.retry import call_with_retries


class Flaky:
    """Raises each of ``errors`` in turn, then returns ``"done"``; counts its calls."""

    def __init__(self, *errors: Exception) -> None:
        self.errors, self.calls = list(errors), 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def retry_timeouts(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError)


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept


def test_a_retryable_error_is_tried_again_until_the_call_returns(waits: list[float]) -> None:
    call = Flaky(TimeoutError("1"), TimeoutError("2"))
    assert call_with_retries(call, retries=2, backoff_s=0.5, retry_if=retry_timeouts) == "done"
    assert call.calls == 3
    assert waits == [0.5, 1.0]  # backoff_s before the first retry, doubled before the next


def test_the_last_attempts_error_is_raised_when_retries_run_out(waits: list[float]) -> None:
    call = Flaky(TimeoutError("1"), TimeoutError("2"), TimeoutError("3"), TimeoutError("4"))
    with pytest.raises(TimeoutError, match="^3$"):
        call_with_retries(call, retries=2, backoff_s=0.1, retry_if=retry_timeouts)
    assert call.calls == 3
    assert waits == [0.1, 0.2]


def test_an_error_not_worth_retrying_is_raised_at_once(waits: list[float]) -> None:
    call = Flaky(TimeoutError("1"), KeyError("bad request"))
    with pytest.raises(KeyError, match="bad request"):
        call_with_retries(call, retries=5, backoff_s=0.1, retry_if=retry_timeouts)
    assert call.calls == 2
    assert waits == [0.1]


def test_the_wait_stops_growing_at_max_backoff(waits: list[float]) -> None:
    call = Flaky(*(TimeoutError(str(n)) for n in range(4)))
    assert call_with_retries(call, retries=4, backoff_s=1.0, max_backoff_s=3.0, retry_if=retry_timeouts) == "done"
    assert call.calls == 5
    assert waits == [1.0, 2.0, 3.0, 3.0]


def test_no_retries_means_one_attempt(waits: list[float]) -> None:
    call = Flaky(TimeoutError("only"))
    with pytest.raises(TimeoutError, match="only"):
        call_with_retries(call, retries=0, backoff_s=1.0, retry_if=retry_timeouts)
    assert (call.calls, waits) == (1, [])
