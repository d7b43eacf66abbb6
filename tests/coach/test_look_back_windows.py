"""What a look-back returns for an exchange it finds: the person's turn with the turns around
it, under the date it was said on the person's calendar, each line naming who said it, as
many as fit in the token budget, each saying why it was found; never a turn held while
memory was off, and whatever the query holds, only the person's own words."""

from __future__ import annotations

import json

import pytest

from accounts.models import User
from coach.exchange_index import exchange_keep_out
from coach.look_back import LOOK_BACK_TOOL, conversations_search, exchanges_index
from coach.models import ChatSession, Message
from infra.tokens import estimate_tokens
from memory.tools import ToolContext, run_tool
from offline_coach import ModelServer
from tests.coach.factories import make_session
from tests.memory.test_retrieval import BAD_QUERIES

pytestmark = pytest.mark.django_db

CLIMBING = (
    "Hello again",
    "Good to see you. How was the week?",
    "I strained my A2 pulley on the fingerboard",
    "Then no max hangs until the physio clears it.",
    "The physio said six weeks",
    "Six weeks it is; we keep the legs strong meanwhile.",
    "What about my trip?",
    "Kalymnos in May still works if the finger heals.",
)


def look_back(user: User, **arguments: object) -> dict:
    context = ToolContext(user=user, time_zone=user.time_zone, tools_from_above={LOOK_BACK_TOOL.name: LOOK_BACK_TOOL})
    return json.loads(run_tool(context, "search_conversations", json.dumps({"limit": None} | arguments)))


def indexed(user: User, *texts: str) -> ChatSession:
    session = make_session(user, *texts)
    exchanges_index(user_id=user.pk)
    return session


def test_an_exchange_found_comes_with_the_turn_before_and_the_turns_after_each_naming_who_said_it(
    user: User, model_server: ModelServer
) -> None:
    indexed(user, *CLIMBING)

    (first, *_) = conversations_search(user=user, query="fingerboard pulley", limit=1, current_session_id=None)

    assert [(line.speaker, line.words) for line in first.lines] == [
        ("coach", "Good to see you. How was the week?"),
        ("person", "I strained my A2 pulley on the fingerboard"),
        ("coach", "Then no max hangs until the physio clears it."),
        ("person", "The physio said six weeks"),
    ]
    assert "the words fingerboard, pulley" in first.why.says()
    text = look_back(user, query="fingerboard pulley", limit=1)["text"]
    assert "Found by the words fingerboard, pulley" in text
    assert text.index("You (the coach): Good to see you") < text.index("The person: I strained my A2 pulley")


def test_a_turn_two_windows_share_is_shown_once(user: User, model_server: ModelServer) -> None:
    indexed(user, *CLIMBING)

    text = look_back(user, query="physio fingerboard pulley weeks")["text"]

    for said in CLIMBING[2:6]:
        assert text.count(said) == 1, said


def test_as_many_exchanges_as_fit_in_the_budget_not_a_fixed_five(user: User, model_server: ModelServer) -> None:
    indexed(user, *[text for n in range(12) for text in (f"Knee day {n}: it clicked on the stairs", "Noted.")])

    result = look_back(user, query="knee clicked stairs")

    assert result["exchanges"] > 5
    assert estimate_tokens(result["text"]) <= 1500


def test_a_turn_held_while_memory_was_off_never_shows_in_a_neighbouring_window(
    user: User, model_server: ModelServer
) -> None:
    session = make_session(user, *CLIMBING)
    private = next(m for m in Message.objects.filter(session=session) if m.content == "The physio said six weeks")
    exchange_keep_out(user_id=user.pk, message_id=private.pk)
    exchanges_index(user_id=user.pk)

    text = look_back(user, query="fingerboard pulley physio weeks trip")["text"]

    assert "I strained my A2 pulley" in text
    assert "six weeks" not in text.lower()


def test_the_words_still_find_when_the_embedding_model_fails(user: User, model_server: ModelServer) -> None:
    indexed(user, *CLIMBING)
    model_server.queue_embedding_error(500)

    result = look_back(user, query="fingerboard pulley")

    assert result["status"] == "found"
    assert "I strained my A2 pulley on the fingerboard" in result["text"]


@pytest.mark.parametrize("query", BAD_QUERIES)
def test_any_query_looks_back_only_through_the_persons_own_conversations_or_gets_a_clear_error(
    user: User, other_user: User, model_server: ModelServer, query: str
) -> None:
    indexed(user, "I swim on Fridays", "Lovely.")
    indexed(other_user, *CLIMBING, "hangs % _ ' \" & | ! :* 膝盖受伤了吗 هل يمكنني الركض", "Noted.")

    result = look_back(user, query=query)

    if result["status"] == "error":
        assert "too long" in result["error"]
        return
    assert result["status"] == "found"
    assert estimate_tokens(result["text"]) <= 1500
    for theirs in (*CLIMBING, "膝盖"):
        assert theirs not in result["text"]
