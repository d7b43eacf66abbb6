"""The run command starts the offline coach only where the app talks to it: never on the
port of a real server the person named."""

from __future__ import annotations

import pytest

from coach.wiring.supervisor import offline_coach_wanted

OFFLINE = "http://127.0.0.1:8001/v1"
LLAMA = "http://127.0.0.1:8080/v1"


@pytest.mark.parametrize(
    ("env", "wanted"),
    [
        ({}, OFFLINE),
        ({"OPENAI_API_KEY": "sk-test"}, None),
        # A local server that needs no key: the offline coach must not take its port.
        ({"OPENAI_BASE_URL": LLAMA}, None),
        # ... unless it serves the embeddings the chat server does not.
        ({"OPENAI_BASE_URL": LLAMA, "EMBEDDING_BASE_URL": OFFLINE}, OFFLINE),
        ({"OPENAI_API_KEY": "sk-test", "EMBEDDING_BASE_URL": OFFLINE}, OFFLINE),
        ({"OFFLINE_COACH_URL": "http://127.0.0.1:9001/v1"}, "http://127.0.0.1:9001/v1"),
        ({"OPENAI_BASE_URL": OFFLINE}, OFFLINE),
    ],
)
def test_the_offline_coach_is_started_only_where_the_app_talks_to_it(env: dict[str, str], wanted: str | None) -> None:
    assert offline_coach_wanted(env) == wanted
