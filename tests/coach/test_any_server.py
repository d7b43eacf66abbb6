"""The coach against servers that are not OpenAI's, as real ones behave (DESIGN.md section 4):
the tools offered with an explicit automatic choice, a refused streamed tool choice asked
again unstreamed, and a server that never reads the system prompt said in the log."""

from __future__ import annotations

import json
import logging
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from accounts.models import User
from coach.claims import REACHED_LENGTH
from coach.models import Message
from coach.services import message_post, session_start
from infra import llm
from memory.models import Memory
from offline_coach import ModelServer
from offline_coach.quirks import DROPS_SYSTEM_PROMPT, REFUSES_STREAMED_AUTO_TOOL_CHOICE
from tests.coach.sse import events, session_cookie
from tests.providers.replay import FIXTURES, stream_events


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


# A reply stopped at its length limit ---------------------------------------------------

CUT_WORDS = "Here is your week: Monday, an easy run of"


def test_a_reply_stopped_at_its_length_limit_is_kept_as_such_and_offered_to_continue_or_retry(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_raw_stream(stream_events("openai", "chat_cut_at_length.sse"))

    received = answered(live_app, person, user, "Plan my week")

    message = Message.objects.get(role="user")
    kind, data = received[-1]
    assert kind == "failed" and data["limited"] is True and data["message"] == REACHED_LENGTH
    assert data["exchange_url"] and data["retry_url"]
    assert message.status == "failed"
    assert list(Message.objects.filter(reply_to=message).values_list("status", "content")) == [("limited", CUT_WORDS)]
    page = person.get(f"/chat/{message.session_id}/").content.decode()
    assert "This reply reached its length limit." in page
    assert f"/chat/{message.session_id}/messages/{message.pk}/continue" in page
    assert f"/chat/{message.session_id}/messages/{message.pk}/retry" in page


def test_continue_asks_the_model_to_go_on_and_saves_one_reply_that_opens_with_the_words_so_far(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_raw_stream(stream_events("openai", "chat_cut_at_length.sse"))
    answered(live_app, person, user, "Plan my week")
    message = Message.objects.get(role="user")
    model_server.queue_text(" 30 minutes. Tuesday, rest.")

    person.post(f"/chat/{message.session_id}/messages/{message.pk}/continue")
    url = f"{live_app}/chat/{message.session_id}/messages/{message.pk}/reply"
    received = list(events(url, cookie=session_cookie(person)))

    assert received[-1][0] == "done"
    assert (
        "".join(data["text"] for kind, data in received if kind == "text") == CUT_WORDS + " 30 minutes. Tuesday, rest."
    )
    asked = model_server.chat_requests()[-1]["messages"]
    assert asked[-2] == {"role": "assistant", "content": CUT_WORDS}
    assert asked[-1]["role"] == "user" and "Go on from exactly where it stopped" in asked[-1]["content"]
    assert list(Message.objects.filter(reply_to=message).values_list("status", "content")) == [
        ("complete", CUT_WORDS + " 30 minutes. Tuesday, rest.")
    ]
    assert Message.objects.get(pk=message.pk).continues_reply_id is None


def test_retry_after_a_length_limit_starts_the_reply_again_without_the_words_so_far(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_raw_stream(stream_events("openai", "chat_cut_at_length.sse"))
    answered(live_app, person, user, "Plan my week")
    message = Message.objects.get(role="user")
    model_server.queue_text("A shorter plan: three easy runs.")

    person.post(f"/chat/{message.session_id}/messages/{message.pk}/retry")
    url = f"{live_app}/chat/{message.session_id}/messages/{message.pk}/reply"
    received = list(events(url, cookie=session_cookie(person)))

    assert received[-1][0] == "done"
    assert model_server.chat_requests()[-1]["messages"][-1]["content"] == "Plan my week"
    assert list(Message.objects.filter(reply_to=message).values_list("status", "content")) == [
        ("complete", "A shorter plan: three easy runs.")
    ]


def test_continue_on_a_reply_that_did_not_stop_at_its_limit_does_nothing(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_error(503, "busy")
    answered(live_app, person, user, "Plan my week")
    message = Message.objects.get(role="user")

    person.post(f"/chat/{message.session_id}/messages/{message.pk}/continue")

    assert Message.objects.get(pk=message.pk).status == "failed"
    assert len(model_server.chat_requests()) == 1


# Embeddings from a server of their own -------------------------------------------------


def test_embeddings_go_to_their_own_server_when_one_is_named_and_the_chat_stays_where_it_was(
    model_server: ModelServer, settings
) -> None:
    with ModelServer(scripted=True) as embeddings:
        settings.EMBEDDING_BASE_URL = embeddings.base_url
        settings.EMBEDDING_API_KEY = "embedding-key"
        vectors = llm.embed(["I have a bad left shoulder."])
        asked = embeddings.embedding_requests()

    assert len(vectors) == 1 and vectors[0].model == "bag-of-words"
    assert [body["input"] for body in asked] == [["I have a bad left shoulder."]]
    assert model_server.embedding_requests() == []


def test_check_model_names_the_embedding_server_when_it_is_not_the_chats(model_server: ModelServer, settings) -> None:
    with ModelServer() as embeddings:
        settings.EMBEDDING_BASE_URL = url = embeddings.base_url
        out = StringIO()
        call_command("check_model", stdout=out)

    assert f"Embedding server: {url}" in out.getvalue()
    assert "ok    embeddings: 2 vectors of" in out.getvalue()
    assert model_server.embedding_requests() == []
