"""The chat pages: sessions, sending a message (saved first, stored once), and who may see what."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import LoginSession, User
from coach.models import ChatSession, Message
from coach.services import message_post
from coach.tasks import summarise_ended_sessions
from memory.models import Memory
from tests.coach.factories import make_session
from tests.conftest import make_user
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_of(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def send(client: Client, session: ChatSession, text: str, *, client_id: str | None = None, htmx: bool = True):
    headers = {"HX-Request": "true"} if htmx else {}
    return client.post(
        f"/chat/{session.pk}/messages", {"text": text, "client_id": client_id or str(uuid.uuid4())}, headers=headers
    )


def test_a_first_visit_before_onboarding_goes_to_the_welcome_form(client: Client) -> None:
    newcomer = make_user("new@example.com", onboarded=False)
    client.force_login(newcomer)

    response = client.get("/")

    assert response.status_code == 302 and response.url == "/welcome/"


def test_the_chat_opens_the_latest_open_session(client_of: Client, user: User) -> None:
    make_session(user, "older")
    newest = make_session(user, "newer")

    response = client_of.get("/")

    assert response.status_code == 302 and response.url == f"/chat/{newest.pk}/"


def test_sessions_are_listed_newest_first_with_their_titles(client_of: Client, user: User) -> None:
    make_session(user, "How do I start running again?", "Slowly.")
    newest = make_session(user, "Plan my week of training", "Sure.")

    html = client_of.get(f"/chat/{newest.pk}/").content.decode()

    assert html.index("Plan my week of training") < html.index("How do I start running again?")


def test_reopening_a_session_shows_its_history(client_of: Client, user: User) -> None:
    session = make_session(user, "My knee hurts after runs", "Let's look at your **cadence**.")

    html = client_of.get(f"/chat/{session.pk}/").content.decode()

    assert "My knee hurts after runs" in html
    assert "<strong>cadence</strong>" in html


def test_each_finished_exchange_shows_what_it_left_in_memory_as_it_reads_now(
    client_of: Client, user: User, other_user: User
) -> None:
    session = make_session(
        user, "My left knee hurts", "Sorry.", "I gave the talk", "Well done.", "I run on Sundays", "Good."
    )
    knee_said, talk_said, sundays_said = session.messages.filter(role="user").order_by("pk")
    knee = make_memory(user, "knee", category="injury", source="user", summary="Left knee <b>hurts</b>")
    runs = make_memory(user, "runs", summary="Runs on Sundays", updated_at=knee_said.created_at - timedelta(days=9))
    talk = make_memory(user, "talk", summary="Giving a talk in June")
    strangers = make_memory(other_user, "secret", summary="Someone else's secret")
    Memory.objects.filter(pk=knee.pk).update(message_id=knee_said.pk)
    Memory.objects.filter(pk__in=[talk.pk, strangers.pk]).update(message_id=talk_said.pk)
    Memory.objects.filter(pk=runs.pk).update(message_id=sundays_said.pk)
    talk.delete()

    html = client_of.get(f"/chat/{session.pk}/").content.decode()

    def cues_of(message: Message) -> list[str]:
        exchange = html.split(f'id="exchange-{message.pk}"')[1].split("</article>")[0]
        return re.findall(r'<p class="memory-cue">(.*?)</p>', exchange)

    # The summary as text: the person's words never become markup.
    knee_cue = (
        f'Saved to memory: Left knee &lt;b&gt;hurts&lt;/b&gt; · <a href="/memories/{knee.pk}/">View</a>'
        f' · <button type="submit" class="link" form="undo-memory-{knee.pk}">Undo</button>'
    )
    assert cues_of(knee_said) == [knee_cue]
    assert cues_of(talk_said) == [], "a memory since deleted is not named; another person's never"
    assert cues_of(sundays_said) == [f'Updated in memory: Runs on Sundays · <a href="/memories/{runs.pk}/">View</a>']
    assert "Someone else" not in html and "Giving a talk" not in html
    other_tab = client_of.get(f"/chat/{session.pk}/messages/{knee_said.pk}/").content.decode()
    assert knee_cue in other_tab


def test_a_memory_saved_by_an_earlier_answer_is_shown_as_saved_by_the_exchange_with_its_undo(
    client_of: Client, user: User
) -> None:
    session = make_session(user, "I run on Sundays", "Good.")
    said = session.messages.get(role="user")
    # Saved by an answer that failed (or was replaced), before this one was answered again.
    runs = make_memory(user, "runs", summary="Runs on Sundays")
    Message.objects.filter(pk=said.pk).update(claimed_at=timezone.now())
    Memory.objects.filter(pk=runs.pk).update(message_id=said.pk)

    html = client_of.get(f"/chat/{session.pk}/").content.decode()

    assert f'Saved to memory: Runs on Sundays · <a href="/memories/{runs.pk}/">View</a>' in html
    assert (
        f'<form id="undo-memory-{runs.pk}" class="cue-undo" method="post" action="/memories/{runs.pk}/delete"' in html
    )


def test_a_memory_kept_before_the_message_was_sent_is_shown_as_updated_by_it(client_of: Client, user: User) -> None:
    session = make_session(user, "I run on Sundays", "Good.")
    said = session.messages.get(role="user")
    runs = make_memory(user, "runs", summary="Runs on Sundays", updated_at=said.created_at - timedelta(days=2))
    Memory.objects.filter(pk=runs.pk).update(message_id=said.pk)

    html = client_of.get(f"/chat/{session.pk}/").content.decode()

    assert f'Updated in memory: Runs on Sundays · <a href="/memories/{runs.pk}/">View</a></p>' in html
    assert "undo-memory" not in html, "an update is not undone by deleting the memory"


def test_a_retry_another_tab_already_answered_shows_the_reply_and_its_cues(client_of: Client, user: User) -> None:
    session = make_session(user, "I run on Sundays", "Good, keep it easy.")
    said = session.messages.get(role="user")
    runs = make_memory(user, "runs", summary="Runs on Sundays")
    Memory.objects.filter(pk=runs.pk).update(message_id=said.pk)

    response = client_of.post(f"/chat/{session.pk}/messages/{said.pk}/retry", headers={"HX-Request": "true"})

    html = response.content.decode()
    assert "Good, keep it easy." in html and "data-stream-url" not in html
    assert f'Saved to memory: Runs on Sundays · <a href="/memories/{runs.pk}/">View</a>' in html


def test_an_exchange_still_being_answered_leaves_its_cues_to_the_reply_stream(client_of: Client, user: User) -> None:
    session = make_session(user)
    message = message_post(session=session, text="I'm giving a talk in June", client_id=None)
    Message.objects.filter(pk=message.pk).update(status="answering")
    talk = make_memory(user, "talk", summary="Giving a talk in June")
    Memory.objects.filter(pk=talk.pk).update(message_id=message.pk)

    html = client_of.get(f"/chat/{session.pk}/").content.decode()

    assert "data-stream-url" in html
    assert '<div class="memory-cues" role="status"></div>' in html, "the stream replays the cue: shown once"


def test_starting_a_session_with_a_first_message(client_of: Client, user: User) -> None:
    response = client_of.post("/chat/new", {"text": "Hello coach", "client_id": str(uuid.uuid4())})

    session = ChatSession.objects.get(user=user)
    assert response.status_code == 302 and response.url == f"/chat/{session.pk}/"
    assert [(m.role, m.content, m.status) for m in session.messages.all()] == [("user", "Hello coach", "pending")]
    assert session.title == "Hello coach"


def test_a_message_is_saved_before_the_model_is_called(client_of: Client, user: User, model_server) -> None:
    session = make_session(user)

    response = send(client_of, session, "I have a bad left shoulder")

    assert response.status_code == 200
    message = Message.objects.get(session=session)
    assert (message.content, message.status) == ("I have a bad left shoulder", "pending")
    assert model_server.chat_requests() == []
    assert f'data-stream-url="/chat/{session.pk}/messages/{message.pk}/reply"' in response.content.decode()


def test_the_htmx_send_gets_the_exchange_partial_only(client_of: Client, user: User) -> None:
    session = make_session(user)

    html = send(client_of, session, "Hello").content.decode()

    assert html.strip().startswith('<article class="exchange"')
    assert "<html" not in html


def test_without_htmx_a_send_returns_to_the_session_page(client_of: Client, user: User) -> None:
    session = make_session(user)

    response = send(client_of, session, "Hello", htmx=False)

    assert response.status_code == 302 and response.url == f"/chat/{session.pk}/"


@pytest.mark.parametrize("text", ["", "   \n  "])
def test_an_empty_message_is_refused(client_of: Client, user: User, text: str) -> None:
    session = make_session(user)

    response = send(client_of, session, text)

    assert response.status_code == 422
    assert "the message is empty" in response.content.decode()
    assert response["HX-Retarget"] == "#composer-error"
    assert not Message.objects.filter(session=session).exists()


def test_a_message_over_the_limit_gets_a_clear_error(client_of: Client, user: User, settings) -> None:
    settings.COACH_MAX_MESSAGE_CHARS = 100
    session = make_session(user)

    response = send(client_of, session, "x" * 101)

    assert response.status_code == 422
    assert "That message is 101 characters; the most is 100" in response.content.decode()
    assert not Message.objects.filter(session=session).exists()


def test_a_too_long_first_message_creates_no_session(client_of: Client, user: User, settings) -> None:
    settings.COACH_MAX_MESSAGE_CHARS = 10

    response = client_of.post("/chat/new", {"text": "x" * 11}, headers={"HX-Request": "true"})

    assert response.status_code == 422
    assert not ChatSession.objects.filter(user=user).exists()


def test_a_double_click_stores_the_message_once(client_of: Client, user: User) -> None:
    session = make_session(user)
    client_id = str(uuid.uuid4())

    first = send(client_of, session, "Hello", client_id=client_id)
    second = send(client_of, session, "Hello", client_id=client_id)

    assert first.status_code == second.status_code == 200
    assert Message.objects.filter(session=session).count() == 1


def test_the_same_message_from_two_tabs_is_stored_once(client_of: Client, user: User) -> None:
    session = make_session(user)

    send(client_of, session, "Plan my week")
    send(client_of, session, "Plan my week")

    assert Message.objects.filter(session=session).count() == 1


def test_the_same_words_later_on_are_a_new_message(client_of: Client, user: User) -> None:
    session = make_session(user, "Thanks", "You're welcome.")

    send(client_of, session, "Thanks")

    assert Message.objects.filter(session=session, role="user").count() == 2


def test_ending_a_session_summarises_it(
    client_of: Client, user: User, model_server, celery_eager: None, django_capture_on_commit_callbacks
) -> None:
    session = make_session(user, "I ran 5 km today", "Great work.")

    response = client_of.post(f"/chat/{session.pk}/end")
    summarise_ended_sessions()

    # The person stays on the conversation, which says it ended.
    assert response.status_code == 302 and response.url == f"/chat/{session.pk}/"
    session.refresh_from_db()
    assert session.ended_at is not None
    assert session.summary and session.summarised_at is not None


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/chat/{pk}/"),
        ("post", "/chat/{pk}/messages"),
        ("get", "/chat/{pk}/messages/{message}/reply"),
        ("post", "/chat/{pk}/messages/{message}/retry"),
        ("post", "/chat/{pk}/end"),
    ],
)
def test_another_persons_session_is_a_404_everywhere(client: Client, user: User, method: str, path: str) -> None:
    session = make_session(user, "private words", "reply")
    message = session.messages.filter(role="user").first()
    stranger = make_user("stranger@example.com")
    client.force_login(stranger)

    response = getattr(client, method)(path.format(pk=session.pk, message=message.pk), {"text": "hi"})

    assert response.status_code == 404


@pytest.mark.parametrize("text", ["", "x" * 100_000, "hi"])
def test_a_message_to_another_persons_session_is_a_404_whatever_else_is_wrong(
    client: Client, user: User, settings, text: str
) -> None:
    # Past the person's rate limit, with an empty or an overlong text: the conversation is
    # not theirs is what they learn, and nothing is stored.
    settings.COACH_MESSAGES_PER_MINUTE = 0 if text == "hi" else 100
    session = make_session(user, "private words", "reply")
    client.force_login(make_user("stranger@example.com"))

    response = client.post(f"/chat/{session.pk}/messages", {"text": text}, headers={"HX-Request": "true"})

    assert response.status_code == 404
    assert Message.objects.filter(session=session).count() == 2


def test_a_sent_message_costs_four_queries_in_one_transaction(
    transactional_db: None, client_of: Client, user: User
) -> None:
    # Outside a test's transaction, as in production: no savepoints among the queries.
    session = make_session(user, "hi", "hello")

    with CaptureQueriesContext(connection) as captured:
        response = client_of.post(
            f"/chat/{session.pk}/messages", {"text": "Plan my week"}, headers={"HX-Request": "true"}
        )

    # The login with its person; then the person's turns locked, the conversation locked
    # with their running turns (counted after that lock), and the message with the
    # conversation's new state and the duplicate lookup.
    statements = [query["sql"].split()[0] for query in captured.captured_queries]
    assert statements == ["SELECT", "BEGIN", "SELECT", "SELECT", "WITH", "COMMIT"]
    assert response.status_code == 200
    assert [(m.content, m.status) for m in session.messages.order_by("pk")][-1] == ("Plan my week", "pending")


def test_a_reader_is_signed_in_with_their_message_in_one_query(
    transactional_db: None, client_of: Client, user: User
) -> None:
    session = make_session(user, "hi", "hello")
    message = session.messages.filter(role="user").first()

    with CaptureQueriesContext(connection) as captured:
        response = client_of.get(f"/chat/{session.pk}/messages/{message.pk}/reply")

    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    assert len(captured.captured_queries) == 1


def test_a_reader_whose_login_has_no_owner_recorded_still_follows_their_message(client_of: Client, user: User) -> None:
    session = make_session(user, "hi", "hello")
    message = session.messages.filter(role="user").first()
    LoginSession.objects.filter(user=user).update(user=None)

    assert client_of.get(f"/chat/{session.pk}/messages/{message.pk}/reply").status_code == 200


def test_a_reader_is_not_handed_a_message_of_theirs_from_another_conversation(client_of: Client, user: User) -> None:
    first, second = make_session(user, "hi", "hello"), make_session(user, "again", "hello again")
    message = first.messages.filter(role="user").first()

    assert client_of.get(f"/chat/{second.pk}/messages/{message.pk}/reply").status_code == 404
    assert client_of.get(f"/chat/{first.pk}/messages/{message.pk}/reply").status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/chat/1/"),
        ("post", "/chat/new"),
        ("post", "/chat/1/messages"),
        ("get", "/chat/1/messages/1/reply"),
        ("post", "/chat/1/end"),
        ("get", "/welcome/"),
    ],
)
def test_anonymous_visitors_are_sent_to_log_in(client: Client, method: str, path: str) -> None:
    response = getattr(client, method)(path)

    assert response.status_code == 302 and response.url.startswith("/accounts/login/")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/chat/{pk}/"),
        ("get", "/chat/{pk}/messages"),
        ("post", "/chat/{pk}/messages/{message}/reply"),
        ("get", "/chat/{pk}/messages/{message}/retry"),
        ("get", "/chat/{pk}/end"),
        ("get", "/chat/{pk}/messages/{message}/stop"),
        ("post", "/chat/{pk}/messages/{message}/"),
        ("post", "/chat/{pk}/events"),
        ("put", "/chat/new"),
    ],
)
def test_wrong_methods_are_refused(client_of: Client, user: User, method: str, path: str) -> None:
    session = make_session(user, "hi", "hello")
    message = session.messages.filter(role="user").first()

    response = getattr(client_of, method)(path.format(pk=session.pk, message=message.pk))

    assert response.status_code == 405


def test_sending_needs_the_csrf_token(user: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    session = make_session(user)

    response = send(client, session, "Hello")

    assert response.status_code == 403
    assert not Message.objects.filter(session=session).exists()
