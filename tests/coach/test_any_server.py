"""The coach against servers that are not OpenAI's, as real ones behave (DESIGN.md section 4):
the tools offered with an explicit automatic choice, a refused streamed tool choice asked
again unstreamed, and a server that never reads the system prompt said in the log."""

from __future__ import annotations

import json
import logging

import pytest
from django.test import Client

from accounts.models import User
from coach.models import Message
from coach.services import message_post, session_start
from memory.models import Memory
from offline_coach import ModelServer
from offline_coach.quirks import DROPS_SYSTEM_PROMPT, REFUSES_STREAMED_AUTO_TOOL_CHOICE
from tests.coach.sse import events, session_cookie
from tests.providers.replay import FIXTURES


@pytest.fixture
def person(live_app: str, user: User, client: Client) -> Client:
    client.force_login(user)
    return client


def answered(live_app: str, person: Client, user: User, text: str) -> list[tuple[str, dict]]:
    message = message_post(session=session_start(user=user), text=text, client_id=None)
    url = f"{live_app}/chat/{message.session_id}/messages/{message.pk}/reply"
    return list(events(url, cookie=session_cookie(person)))


def test_a_turn_offers_its_tools_with_the_automatic_choice_said_outright(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    answered(live_app, person, user, "Plan my week")

    first = model_server.chat_requests()[0]
    assert first["tools"] and first["tool_choice"] == "auto"


def test_the_recorded_refusal_of_a_streamed_automatic_tool_choice_has_the_round_asked_again_unstreamed(
    live_app: str, person: Client, user: User, model_server: ModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    refusal = json.loads((FIXTURES / "llama_cpp_python" / "chat_streamed_auto_tool_choice_refused.json").read_text())
    # The refusal as llama-cpp-python's server sends it; the rule-based coach answers after.
    model_server.queue_error(refusal["status"], refusal["body"]["error"]["message"])
    with caplog.at_level(logging.WARNING, logger="infra.llm_fallbacks"):
        received = answered(live_app, person, user, "I'm allergic to peanuts.")
        again = answered(live_app, person, user, "I work night shifts, Monday to Thursday.")

    sent = model_server.chat_requests()
    assert received[-1][0] == "done" and again[-1][0] == "done"
    assert Memory.objects.filter(user=user).count() == 2
    assert [body.get("stream") for body in sent[:2]] == [True, False]
    # Learned once, for the process: every later round that offers tools goes unstreamed.
    assert all(body.get("stream") is False for body in sent[1:] if body.get("tools"))
    said = [record.getMessage() for record in caplog.records if "unstreamed" in record.getMessage()]
    assert len(said) == 1
    assert Message.objects.filter(role="assistant", status="complete").count() == 2


def test_a_server_that_refuses_every_streamed_automatic_tool_choice_still_saves_what_is_said_in_chat(
    live_app: str, person: Client, user: User, settings
) -> None:
    with ModelServer(quirks=[REFUSES_STREAMED_AUTO_TOOL_CHOICE]) as server:
        settings.OPENAI_BASE_URL = server.base_url
        received = answered(live_app, person, user, "I'm allergic to peanuts.")

    assert received[-1][0] == "done"
    assert [name for name, _ in received].count("memory") == 1
    assert Memory.objects.get(user=user).category == "allergy"


def test_a_server_that_never_reads_the_system_prompt_is_said_in_the_log_once(
    live_app: str, person: Client, user: User, settings, caplog: pytest.LogCaptureFixture
) -> None:
    with ModelServer(quirks=[DROPS_SYSTEM_PROMPT]) as server:
        settings.OPENAI_BASE_URL = server.base_url
        with caplog.at_level(logging.WARNING, logger="infra.llm_fallbacks"):
            answered(live_app, person, user, "Plan my week")
            answered(live_app, person, user, "And the week after?")

    said = [
        record.getMessage() for record in caplog.records if "does not read the system message" in record.getMessage()
    ]
    assert len(said) == 1
    assert "the coach does not see its memory" in said[0]


def test_a_server_that_reads_the_system_prompt_is_never_said_to_drop_it(
    live_app: str, person: Client, user: User, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="infra.llm_fallbacks"):
        answered(live_app, person, user, "Plan my week")

    assert not [record for record in caplog.records if "system message" in record.getMessage()]
