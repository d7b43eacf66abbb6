"""What each reply cost in tokens, over all of its turn's model rounds, stored with it and
shown in the admin: the provider's counts when it sends them, an estimate, marked, when not."""

from __future__ import annotations

import json

from asgiref.sync import async_to_sync

from accounts.models import User
from coach.models import Message
from coach.services import session_start
from coach.turn import turn_run
from infra.tokens import CHARS_PER_TOKEN
from offline_coach import ModelServer
from offline_coach.prompt import text_of
from offline_coach.wire import count_tokens
from tests.accounts.staff import staff_client
from tests.coach.test_turn import SHOULDER_SAVE, ask


def answer(user: User, text: str, session=None) -> Message:
    message = ask(session or session_start(user=user), text)
    async_to_sync(turn_run)(user_id=user.pk, message_id=message.pk)
    return Message.objects.get(reply_to=message)


def prompt_tokens_counted_by(body: dict) -> int:
    """What the scripted server counts for a request (its own tokenizer: words and marks),
    the tool schemas included, as a provider counts them."""
    tools = count_tokens(json.dumps(body["tools"], sort_keys=True)) if body.get("tools") else 0
    return tools + sum(count_tokens(text_of(message)) for message in body["messages"])


def test_a_reply_stores_the_providers_tokens_summed_over_the_memory_round_and_the_words(
    transactional_db: None, user: User, model_server: ModelServer
) -> None:
    model_server.queue_tool_calls([("save_memory", SHOULDER_SAVE)])
    model_server.queue_text("Thanks for telling me. We'll work around it.")

    reply = answer(user, "I have a bad left shoulder, no overhead pressing")

    rounds = model_server.chat_requests()
    assert len(rounds) == 2
    assert reply.prompt_tokens == sum(prompt_tokens_counted_by(body) for body in rounds)
    assert reply.completion_tokens == count_tokens("save_memory" + json.dumps(SHOULDER_SAVE)) + count_tokens(
        "Thanks for telling me. We'll work around it."
    )
    assert reply.tokens_estimated is False


def test_without_usage_from_the_server_the_tokens_are_estimated_and_marked_so(
    transactional_db: None, user: User, model_server: ModelServer
) -> None:
    # A server that refuses stream_options sends no usage at all in its streams.
    model_server.queue_error(400, "Unrecognized request argument supplied: stream_options")
    model_server.queue_text("A reply of some length, to be counted by its characters.")

    reply = answer(user, "Plan my week")

    sent = model_server.chat_requests()[1]
    assert "stream_options" not in sent
    assert reply.tokens_estimated is True
    words = "A reply of some length, to be counted by its characters."
    assert reply.completion_tokens == -(-len(words) // CHARS_PER_TOKEN)
    # The estimate covers at least every message sent, the whole system prompt included.
    characters_sent = sum(len(text_of(message)) for message in sent["messages"])
    assert reply.prompt_tokens >= characters_sent // CHARS_PER_TOKEN
    assert reply.prompt_tokens > prompt_tokens_counted_by(sent) // 2


def test_the_admin_shows_each_replys_tokens_and_each_sessions_totals(
    transactional_db: None, user: User, model_server: ModelServer
) -> None:
    session = session_start(user=user)
    model_server.queue_text("First reply.")
    model_server.queue_text("Second reply.")
    first = answer(user, "Hello", session)
    second = answer(user, "And again", session)
    admin = staff_client(User.objects.create_superuser("admin@example.com", "admin-password"))

    sessions = admin.get("/admin/coach/chatsession/").content.decode()
    messages = admin.get(f"/admin/coach/message/?session__id__exact={session.pk}").content.decode()

    assert "Prompt tokens" in sessions and "Completion tokens" in sessions
    assert f'<td class="field-prompt_token_total">{first.prompt_tokens + second.prompt_tokens}</td>' in sessions
    assert (
        f'<td class="field-completion_token_total">{first.completion_tokens + second.completion_tokens}</td>'
        in sessions
    )
    assert f'<td class="field-prompt_tokens">{first.prompt_tokens}</td>' in messages
    assert f'<td class="field-completion_tokens">{second.completion_tokens}</td>' in messages
