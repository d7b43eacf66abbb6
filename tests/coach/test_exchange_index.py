"""The look-back's index: exchanges and summaries embedded after the fact, by the memories'
model, in batches; never what is not remembered; gone with the conversation."""

from __future__ import annotations

import io

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts.forgetting import account_delete
from accounts.models import User
from coach.exchange_index import exchanges_index
from coach.models import ChatSession, ConversationEmbedding, Message
from coach.services import session_start, session_summary_save
from coach.tasks import index_exchanges, reindex_exchanges
from offline_coach import ModelServer
from tests.coach.factories import make_session

pytestmark = pytest.mark.django_db


def exchanges(count: int) -> list[str]:
    return [text for n in range(count) for text in (f"person says {n}", f"coach answers {n}")]


def embedded(user: User, kind: str = "exchange") -> list[ConversationEmbedding]:
    return list(ConversationEmbedding.objects.filter(user=user, kind=kind).order_by("pk"))


def test_each_exchange_is_embedded_once_in_one_request_by_the_memories_model(
    user: User, model_server: ModelServer
) -> None:
    session = make_session(user, "My knee hurts on stairs", "Let's go easy on lunges.", "I sleep badly", "Noted.")

    assert exchanges_index(user_id=user.pk) == 2

    (request,) = model_server.embedding_requests()
    assert request["model"] == settings.EMBEDDING_MODEL
    assert request["input"] == ["My knee hurts on stairs\nLet's go easy on lunges.", "I sleep badly\nNoted."]
    rows = embedded(user)
    assert [row.embedding_model for row in rows] == [settings.EMBEDDING_MODEL] * 2
    person = list(session.messages.filter(role="user").order_by("pk"))
    assert [row.message_id for row in rows] == [m.pk for m in person]
    assert all(row.reply_id is not None and row.session_id == session.pk for row in rows)

    assert exchanges_index(user_id=user.pk) == 0
    assert len(model_server.embedding_requests()) == 1


def test_a_long_conversation_is_embedded_a_hundred_exchanges_to_a_request(
    user: User, model_server: ModelServer
) -> None:
    make_session(user, *exchanges(250))

    assert exchanges_index(user_id=user.pk) == 250

    assert [len(r["input"]) for r in model_server.embedding_requests()] == [100, 100, 50]


def test_a_reply_the_person_stopped_leaves_only_their_words_to_search(user: User, model_server: ModelServer) -> None:
    session = session_start(user=user, first_message="Tell me about tempo runs")
    message = session.messages.get()
    Message.objects.create(
        session=session, role="assistant", content="Tempo runs are", status="stopped", reply_to=message
    )
    Message.objects.filter(pk=message.pk).update(status="answered")

    exchanges_index(user_id=user.pk)

    assert model_server.embedding_requests()[0]["input"] == ["Tell me about tempo runs"]
    assert embedded(user)[0].reply_id is None


def test_an_embedding_failure_leaves_the_exchange_unindexed_until_the_next_try(
    user: User, model_server: ModelServer
) -> None:
    make_session(user, "I want to run a marathon", "Exciting!")
    model_server.queue_embedding_error(503)

    assert index_exchanges(user.pk) == 0
    assert embedded(user) == []

    assert reindex_exchanges() == 1
    assert len(embedded(user)) == 1


def test_a_change_of_embedding_model_has_every_exchange_embedded_again(user: User, model_server: ModelServer) -> None:
    make_session(user, "I swim on Fridays", "Lovely.", "I cycle to work", "Great.")
    exchanges_index(user_id=user.pk)
    ConversationEmbedding.objects.filter(user=user).update(embedding_model="an-older-model")

    assert reindex_exchanges() == 2

    assert [row.embedding_model for row in embedded(user)] == [settings.EMBEDDING_MODEL] * 2


def test_the_hourly_job_reaches_everyone_with_something_left_to_embed(
    user: User, other_user: User, model_server: ModelServer
) -> None:
    make_session(user, "Ada's words", "Reply to Ada")
    make_session(other_user, "Grace's words", "Reply to Grace", "More of Grace", "Again")

    assert reindex_exchanges() == 3
    assert reindex_exchanges() == 0

    assert len(embedded(user)) == 1 and len(embedded(other_user)) == 2


def test_a_conversation_that_is_not_remembered_is_never_embedded(user: User, model_server: ModelServer) -> None:
    session = make_session(user, "Something private", "I hear you.")
    ChatSession.objects.filter(pk=session.pk).update(remembered=False)

    assert exchanges_index(user_id=user.pk) == 0
    assert reindex_exchanges() == 0

    assert model_server.embedding_requests() == []


def test_nothing_is_embedded_while_memory_is_off(user: User, model_server: ModelServer) -> None:
    make_session(user, "I lift on Mondays", "Good.")
    User.objects.filter(pk=user.pk).update(memory_enabled=False)

    assert exchanges_index(user_id=user.pk) == 0
    assert reindex_exchanges() == 0

    assert model_server.embedding_requests() == []


def test_a_summary_is_embedded_and_embedded_again_once_rewritten(user: User, model_server: ModelServer) -> None:
    session = make_session(user, "I ran 5 km", "Well done.")
    ChatSession.objects.filter(pk=session.pk).update(summary="Ran 5 km, felt good", summarised_at=timezone.now())

    assert exchanges_index(user_id=user.pk) == 2
    assert model_server.embedding_requests()[-1]["input"] == ["Ran 5 km, felt good"]
    (summary,) = embedded(user, "summary")
    assert summary.message_id is None and summary.session_id == session.pk

    # The conversation went on (reopened), and ended again with a new summary.
    ChatSession.objects.filter(pk=session.pk).update(summarised_at=None)
    session_summary_save(session=session, summary="Ran 5 km, then 8")
    assert exchanges_index(user_id=user.pk) == 1

    assert model_server.embedding_requests()[-1]["input"] == ["Ran 5 km, then 8"]
    assert len(embedded(user, "summary")) == 1


def test_an_empty_summary_is_walked_past_with_nothing_to_embed(user: User, model_server: ModelServer) -> None:
    session = make_session(user)
    ChatSession.objects.filter(pk=session.pk).update(summary="", summarised_at=timezone.now())

    assert exchanges_index(user_id=user.pk) == 0

    assert model_server.embedding_requests() == []


def test_a_deleted_conversation_takes_its_embeddings_with_it(user: User, model_server: ModelServer) -> None:
    kept = make_session(user, "Keep this", "Kept.")
    gone = make_session(user, "Forget this", "Forgotten.")
    ChatSession.objects.filter(pk=gone.pk).update(summary="About forgetting", summarised_at=timezone.now())
    exchanges_index(user_id=user.pk)

    ChatSession.objects.filter(pk=gone.pk).delete()

    assert {row.session_id for row in ConversationEmbedding.objects.all()} == {kept.pk}


def test_an_erased_account_leaves_no_embedding_behind(user: User, other_user: User, model_server: ModelServer) -> None:
    make_session(user, "Ada's words", "Reply to Ada")
    make_session(other_user, "Grace's words", "Reply to Grace")
    exchanges_index(user_id=user.pk)
    exchanges_index(user_id=other_user.pk)

    account_delete(user=user)

    assert {row.user_id for row in ConversationEmbedding.objects.all()} == {other_user.pk}


def test_the_command_embeds_what_is_left_at_once_and_says_how_many(user: User, model_server: ModelServer) -> None:
    make_session(user, "I swim on Fridays", "Lovely.")
    out = io.StringIO()

    call_command("index_conversations", stdout=out)

    assert out.getvalue().strip() == f"1 exchanges and summaries embedded with {settings.EMBEDDING_MODEL}"
    assert len(embedded(user)) == 1


def test_the_command_stops_clearly_when_the_model_fails(user: User, model_server: ModelServer) -> None:
    make_session(user, "I swim on Fridays", "Lovely.")
    model_server.queue_embedding_error(503)

    with pytest.raises(CommandError, match="run it again"):
        call_command("index_conversations")


def test_an_exchange_is_compared_by_the_persons_words_and_by_the_reply_only_where_theirs_say_too_little() -> None:
    from coach.exchange_index import exchange_text

    assert exchange_text(said="I ran my first ten kilometres today", answered="Well done!") == (
        "I ran my first ten kilometres today"
    )
    assert exchange_text(said="Yes, that one", answered="Then Thursday's run moves to Friday.") == (
        "Yes, that one\nThen Thursday's run moves to Friday."
    )
    assert exchange_text(said="Yes", answered="") == "Yes"
