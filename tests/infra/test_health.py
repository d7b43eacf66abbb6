"""A service that hangs is the only one blamed, however often the app is asked how it is
(infra/health.py): each service is checked on a thread of its own, and a check still
stuck is waited on again, never started again behind itself."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from infra.health import problems_within

# Long enough that a check which answers at once does so even on a loaded machine.
DEADLINE_SECONDS = 0.5


@pytest.fixture
def hanging() -> Iterator[tuple[Callable[[], str | None], list[int]]]:
    """A check that does not answer until the test ends, and a count of its starts."""
    release, started = threading.Event(), []

    def check() -> str | None:
        started.append(1)
        release.wait(timeout=60)
        return None

    yield check, started
    release.set()


def test_a_hanging_service_is_named_alone_on_every_call_and_asked_only_once(hanging) -> None:
    check, started = hanging

    answers = [
        problems_within({"hangs-every-time": check, "answers": lambda: None}, DEADLINE_SECONDS) for _ in range(8)
    ]

    assert [list(answer) for answer in answers] == [["hangs-every-time"]] * 8
    assert answers[0]["hangs-every-time"] == "no answer within 0.5 s"
    assert all(answer["hangs-every-time"].startswith("still no answer, ") for answer in answers[1:])
    assert len(started) == 1


def test_a_service_is_asked_again_once_its_stuck_check_has_answered() -> None:
    release, started = threading.Event(), []

    def check() -> str | None:
        started.append(1)
        release.wait(timeout=60)
        return "it said no" if len(started) > 1 else None

    assert problems_within({"slow-then-no": check}, DEADLINE_SECONDS) == {"slow-then-no": "no answer within 0.5 s"}
    release.set()
    # The next call may still find the first check finishing (and wait for it); the one
    # after asks afresh.
    answers = [problems_within({"slow-then-no": check}, DEADLINE_SECONDS) for _ in range(2)]

    assert answers[-1] == {"slow-then-no": "it said no"}
