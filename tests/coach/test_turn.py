"""The chat turn over real ASGI: context, tools, streaming, and every way it can fail."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest
from django.test import Client

from accounts.models import User
from coach.models import ChatSession, Message
from coach.services import message_post, session_start
from memory.models import Memory, MemoryEvent
from offline_coach import ModelServer, Pause
from tests.coach.factories import make_session
from tests.coach.sse import events, session_cookie
from tests.memory.factories import make_memory, memory_named
from tests.memory.test_tools import unit

SHOULDER_SAVE = {
    "key": "left-shoulder",
    "tier": "profile",
    "category": "injury",
    "summary": "Bad left shoulder: no overhead pressing",
    "content": "Bad left shoulder: no overhead pressing",
    "due_at": None,
    "keep_separate": None,
}


@pytest.fixture
def person(live_app: str, user: User, client: Client) -> Client:
    client.force_login(user)
    return client


def ask(session: ChatSession, text: str) -> Message:
    return message_post(session=session, text=text, client_id=None)


def stream(live_app: str, client: Client, message: Message) -> list[tuple[str, dict]]:
    url = f"{live_app}/chat/{message.session_id}/messages/{message.pk}/reply"
    return list(events(url, cookie=session_cookie(client)))


def words_of(received: list[tuple[str, dict]]) -> str:
    return "".join(data["text"] for name, data in received if name == "text")


def replies(message: Message) -> list[tuple[str, str]]:
    return list(Message.objects.filter(reply_to=message).values_list("status", "content"))


def wait_for(condition, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)


def test_the_reply_streams_word_by_word_before_it_is_saved_whole(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    # Held after its first words until they are read: mid-reply however slow the machine.
    writing = Pause(after_chunks=3)
    model_server.queue_text(
        "Let's keep overhead pressing out of this week's plan.", chunk_delay_seconds=0.05, pause=writing
    )
    message = ask(session_start(user=user), "Plan my week")
    url = f"{live_app}/chat/{message.session_id}/messages/{message.pk}/reply"

    received = []
    for name, data in events(url, cookie=session_cookie(person)):
        if not received:
            # The first words are on the wire while the reply is still being written.
            assert Message.objects.get(pk=message.pk).status == "answering"
            assert replies(message) == []
            writing.release.set()
        received.append((name, data))

    assert sum(1 for name, _ in received if name == "text") > 3
    assert words_of(received) == "Let's keep overhead pressing out of this week's plan."
    assert received[-1] == ("done", {"html": "<p>Let's keep overhead pressing out of this week's plan.</p>"})
    assert replies(message) == [("complete", "Let's keep overhead pressing out of this week's plan.")]
    assert Message.objects.get(pk=message.pk).status == "answered"


def test_the_system_prompt_carries_the_instructions_today_and_the_memories(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    make_memory(user, "left-shoulder", source="user", category="injury", summary="Bad left shoulder")
    model_server.queue_text("Noted.")

    stream(live_app, person, ask(session_start(user=user), "Hello"))

    prompt = ModelServer.system_prompt(model_server.chat_requests()[0])
    assert prompt.startswith("# Coach\n")
    assert "\nToday: " in prompt
    assert "\n## injury (kept for good)\n- left-shoulder (by them, " in prompt and "): Bad left shoulder" in prompt
    assert "Relationship stage: new (1 memories learned in conversation)" in prompt


def test_the_history_goes_along_with_the_latest_message_last(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    session = make_session(user, "My knee hurts", "Let's rest it a week.")
    model_server.queue_text("How is it now?")

    stream(live_app, person, ask(session, "It feels better"))

    sent = [(m["role"], m["content"]) for m in model_server.chat_requests()[0]["messages"][1:]]
    assert sent == [("user", "My knee hurts"), ("assistant", "Let's rest it a week."), ("user", "It feels better")]


def test_tool_calls_are_applied_in_order_and_their_results_sent_back_invisibly(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_tool_calls([("save_memory", SHOULDER_SAVE)])
    model_server.queue_text("Thanks for telling me. We'll work around it.")
    message = ask(session_start(user=user), "I have a bad left shoulder, no overhead pressing")

    received = stream(live_app, person, message)

    # An injury is kept under a neutral key, which the tool result tells the model.
    memory = memory_named(user, "injury-1")
    assert (memory.source, memory.session_id, memory.message_id) == ("coach", message.session_id, message.pk)
    assert not Memory.objects.keyed(user.pk, "left-shoulder").exists()
    second = model_server.chat_requests()[1]["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "save_memory"
    result = json.loads(second[-1]["content"])
    assert (result["status"], result["key"]) == ("saved", "injury-1")
    assert words_of(received) == "Thanks for telling me. We'll work around it."
    assert "save" not in words_of(received).lower() and "{" not in words_of(received)


def test_words_sent_with_a_save_that_succeeds_end_the_turn_without_another_model_call(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_tool_calls([("save_memory", SHOULDER_SAVE)], text="Noted: no overhead pressing.")
    message = ask(session_start(user=user), "I have a bad left shoulder, no overhead pressing")

    received = stream(live_app, person, message)

    assert words_of(received) == "Noted: no overhead pressing."
    assert replies(message) == [("complete", "Noted: no overhead pressing.")]
    assert memory_named(user, "injury-1").source == "coach"
    assert len(model_server.chat_requests()) == 1


def test_words_sent_with_a_save_refused_as_a_near_copy_go_back_to_the_model_for_its_choice(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    habit = {**SHOULDER_SAVE, "key": "runs", "tier": "profile", "category": "habit"}
    habit |= {"summary": "Runs with her club on Saturdays", "content": "Runs with her club on Saturdays"}
    model_server.queue_tool_calls([("save_memory", habit)], text="Good to know.")
    first = ask(session_start(user=user), "I run with my club on Saturdays")
    stream(live_app, person, first)
    # The same fact in a word's difference (the very same text would simply be unchanged).
    again = {**habit, "key": "saturday-runs", "summary": "Runs with the club on Saturdays"}
    model_server.queue_tool_calls([("save_memory", again)], text="Saturdays with the club, noted.")
    model_server.queue_text(" I'll keep that in mind.")
    second = ask(first.session, "Saturday mornings I run with my club")

    received = stream(live_app, person, second)

    requests = model_server.chat_requests()
    assert len(requests) == 3
    assert json.loads(requests[-1]["messages"][-1]["content"])["status"] == "not_saved"
    assert words_of(received) == "Saturdays with the club, noted.\n\nI'll keep that in mind."


def test_words_sent_with_a_search_go_back_to_the_model_with_what_it_found(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_tool_calls([("search_memories", {"query": "shoulder", "limit": None})], text="Let me look.")
    model_server.queue_text("Nothing on file about your shoulder yet.")
    message = ask(session_start(user=user), "What do you know about my shoulder?")

    stream(live_app, person, message)

    requests = model_server.chat_requests()
    assert len(requests) == 2
    assert json.loads(requests[-1]["messages"][-1]["content"])["status"] == "found"


def test_two_parallel_saves_about_one_event_leave_one_memory_and_a_merge(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    first = {
        **SHOULDER_SAVE,
        "key": "reading",
        "tier": "episodic",
        "category": "project",
        "summary": "The reading went well",
        "content": "The reading went well",
    }
    second = {
        **first,
        "key": "reading-confidence",
        "summary": "Felt confident at the reading",
        "content": "Felt confident at the reading",
    }
    model_server.set_embedding("The reading went well", unit(1.0, 0.02))
    model_server.set_embedding("Felt confident at the reading", unit(1.0, 0.1))
    model_server.queue_tool_calls([("save_memory", first), ("save_memory", second)])

    received = stream(live_app, person, ask(session_start(user=user), "The reading at Rönnells went so well!"))

    assert received[-1][0] == "done"
    assert [m.key for m in Memory.objects.filter(user=user)] == ["reading"]
    results = [json.loads(m["content"]) for m in model_server.chat_requests()[1]["messages"] if m["role"] == "tool"]
    assert [r["status"] for r in results] == ["saved", "not_saved"]
    assert results[1]["duplicates"][0]["key"] == "reading"
    third_round_calls = model_server.chat_requests()[2]["messages"][-2]["tool_calls"]
    assert [c["function"]["name"] for c in third_round_calls] == ["update_memory"]
    reading = memory_named(user, "reading")
    assert MemoryEvent.objects.filter(user=user, memory_id=reading.pk, action="merged").exists()
    assert "Felt confident at the reading" in reading.content


def test_a_save_claiming_to_be_the_persons_own_is_refused_by_the_schema(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_tool_calls([("save_memory", {**SHOULDER_SAVE, "source": "user"})])
    model_server.queue_text("Understood.")

    received = stream(live_app, person, ask(session_start(user=user), "Bad left shoulder"))

    result = json.loads(model_server.chat_requests()[1]["messages"][-1]["content"])
    assert result["status"] == "error" and "'source' was unexpected" in result["error"]
    assert not Memory.objects.filter(user=user).exists()
    assert received[-1][0] == "done"


def test_a_malformed_tool_call_is_answered_with_an_error_the_model_recovers_from(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_tool_calls([("save_memory", '{"key": "left-')])
    model_server.queue_text("All good.")

    received = stream(live_app, person, ask(session_start(user=user), "Hi"))

    result = json.loads(model_server.chat_requests()[1]["messages"][-1]["content"])
    assert "not valid JSON" in result["error"]
    assert received[-1][0] == "done"


@pytest.mark.parametrize(
    "failure",
    ["server error", "rate limit", "outage", "timeout", "stream drop", "endless malformed tool calls"],
)
def test_each_failure_shows_a_retry_and_keeps_the_message_once(
    live_app: str, person: Client, user: User, model_server: ModelServer, settings, failure: str
) -> None:
    if failure == "server error":
        model_server.queue_error(500)
    elif failure == "rate limit":
        model_server.queue_error(429)
    elif failure == "outage":
        model_server.queue_error(503)
    elif failure == "timeout":
        settings.LLM_TIMEOUT_SECONDS = 0.5
        model_server.queue_text("Too late", delay_seconds=3)
    elif failure == "stream drop":
        model_server.queue_stream_drop("You mentioned your")
    else:
        settings.COACH_MAX_TOOL_ROUNDS = 1
        model_server.queue_tool_calls([("save_memory", '{"key": ')])
        model_server.queue_tool_calls([("save_memory", '{"key": ')])
    session = session_start(user=user)
    message = ask(session, "Plan my week")

    received = stream(live_app, person, message)

    name, data = received[-1]
    assert name == "failed"
    assert "Your message is saved" in data["message"] or "It is saved" in data["message"]
    assert data["retry_url"] == f"/chat/{session.pk}/messages/{message.pk}/retry"
    assert list(Message.objects.filter(session=session, role="user").values_list("content", "status")) == [
        ("Plan my week", "failed")
    ]
    assert not Message.objects.filter(reply_to=message, status="complete").exists()


def test_a_dropped_stream_keeps_the_part_reply_marked_interrupted(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_stream_drop("You mentioned your left")
    message = ask(session_start(user=user), "Plan my week")

    stream(live_app, person, message)

    assert replies(message) == [("interrupted", "You mentioned your left")]


def test_retry_answers_without_sending_the_message_twice(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_stream_drop("Half a")
    session = session_start(user=user)
    message = ask(session, "Plan my week")
    stream(live_app, person, message)

    # Queued first: the retry's turn starts the moment it is posted.
    model_server.queue_text("Here is your week.")
    retried = person.post(f"/chat/{session.pk}/messages/{message.pk}/retry", headers={"HX-Request": "true"})
    received = stream(live_app, person, message)

    # The page shows the exchange as it is when it answers: the reply being written (with
    # its stream to follow) or, where the machine is busy and the retry's turn ran first
    # in its own thread, the reply written whole.
    shown = retried.content.decode()
    assert retried.status_code == 200
    assert "data-stream-url" in shown or "<p>Here is your week.</p>" in shown
    assert received[-1][0] == "done"
    assert Message.objects.filter(session=session, role="user").count() == 1
    assert replies(message) == [("complete", "Here is your week.")]
    assert model_server.chat_requests()[1]["messages"][-1] == {"role": "user", "content": "Plan my week"}


def test_a_second_stream_for_a_message_waits_for_the_first_instead_of_asking_again(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_text("One two three four five six", chunk_delay_seconds=0.1)
    message = ask(session_start(user=user), "Hello")
    first: list = []
    thread = threading.Thread(target=lambda: first.extend(stream(live_app, person, message)))
    thread.start()
    wait_for(lambda: Message.objects.get(pk=message.pk).status == "answering")

    second = stream(live_app, person, message)
    thread.join()

    assert first[-1] == second[-1] == ("done", {"html": "<p>One two three four five six</p>"})
    assert len(model_server.chat_requests()) == 1
    assert len(replies(message)) == 1


def test_the_reply_is_finished_and_saved_when_the_person_leaves_mid_reply(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_text("A long and thoughtful answer that takes its time", chunk_delay_seconds=0.1)
    message = ask(session_start(user=user), "Hello")
    url = f"{live_app}/chat/{message.session_id}/messages/{message.pk}/reply"

    request = urllib.request.Request(url, headers={"Cookie": session_cookie(person)})
    with urllib.request.urlopen(request, timeout=10) as response:
        response.readline()  # the first words arrive; then the tab is closed

    wait_for(lambda: Message.objects.get(pk=message.pk).status == "answered")
    assert replies(message) == [("complete", "A long and thoughtful answer that takes its time")]


def test_model_html_in_a_reply_arrives_inert(
    live_app: str, person: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_text(
        "Hi <img src=x onerror=alert(1)> <script>alert(1)</script> [x](javascript:alert(1)) "
        '<div hx-post="/x" hx-trigger="load">d</div> [site](https://example.com)'
    )

    html = stream(live_app, person, ask(session_start(user=user), "Hello"))[-1][1]["html"]

    assert "<img" not in html and "<script" not in html and "<div" not in html
    assert 'href="javascript' not in html
    assert '<a href="https://example.com" rel="noopener noreferrer nofollow">site</a>' in html


def test_a_turns_searches_and_recalls_stop_at_the_limit_with_a_result_the_model_can_act_on(
    live_app: str, person: Client, user: User, model_server: ModelServer, settings
) -> None:
    settings.MEMORY_MAX_READS_PER_TURN = 6
    for number in range(5):
        make_memory(user, f"note-{number}", summary=f"Note {number} " + "words " * 40, content="details " * 300)
    keys = [f"note-{number}" for number in range(5)]
    searches = [("search_memories", {"query": f"fan out {n}", "limit": None}) for n in range(40)]
    recalls = [("recall_memory", {"keys": keys}) for _ in range(40)]
    looks = [("search_conversations", {"query": f"look {n}", "limit": None}) for n in range(10)]
    model_server.queue_tool_calls([*searches[:20], *recalls[:20]])
    model_server.queue_tool_calls([*searches[20:], *recalls[20:], *looks])
    model_server.queue_text("Here is what I found.")
    message = ask(session_start(user=user), "Tell me everything you know.")

    received = stream(live_app, person, message)

    asked = [r for r in model_server.embedding_requests() if str(r["input"][0]).startswith(("fan out", "look"))]
    assert len(asked) <= 6, "each search embeds its query: no more than the limit"
    requests = model_server.chat_requests()
    # Both rounds' 90 calls, each with its result, as the last request carries them.
    results = [json.loads(m["content"]) for m in requests[-1]["messages"] if m["role"] == "tool"]
    assert len(results) == 90
    assert sum(1 for r in results if r["status"] != "read_limit") == 6
    assert "Answer now with what you found" in results[-1]["message"]
    # The request stays the size of six reads, not of ninety searches and recalls.
    assert len(json.dumps(requests[-1])) < 100_000
    assert words_of(received) == "Here is what I found."
