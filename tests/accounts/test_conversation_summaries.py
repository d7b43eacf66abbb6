"""What the coach keeps of each ended conversation is on the memory page, and the person
can delete it; an ended conversation says so where it was, with no message box."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from coach.models import ChatSession
from coach.services import session_end, session_summary_save
from tests.coach.factories import make_session

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
SUMMARY = "You ran 5 km and felt strong."


def summarised(user: User, summary: str = SUMMARY) -> ChatSession:
    session = make_session(user, "I ran 5 km today", "Great work.")
    session_end(session=session)
    session_summary_save(session=session, summary=summary)
    return session


def test_the_memory_page_lists_each_summary_with_its_conversation(client: Client, user: User) -> None:
    session = summarised(user)
    make_session(user, "Still talking", "Yes.")
    client.force_login(user)

    html = client.get("/memories/").content.decode()

    section = html[html.index('id="conversation-summaries"') :]
    assert SUMMARY in section and f'href="/chat/{session.pk}/"' in section


def test_an_ended_conversation_shows_its_summary_and_no_message_box(client: Client, user: User) -> None:
    session = summarised(user)
    client.force_login(user)

    html = client.get(f"/chat/{session.pk}/").content.decode()

    assert "This conversation has ended." in html and SUMMARY in html
    assert 'id="composer"' not in html


def test_deleting_a_summary_forgets_it_and_keeps_the_conversation(client: Client, user: User) -> None:
    session = summarised(user)
    client.force_login(user)

    response = client.post(f"/memories/conversations/{session.pk}/delete-summary", headers=HTMX)

    assert response.status_code == 200 and response.content == b""
    session.refresh_from_db()
    assert session.summary == "" and session.summarised_at is not None
    assert SUMMARY not in client.get("/memories/").content.decode()


def test_deleting_without_htmx_goes_back_to_the_list(client: Client, user: User) -> None:
    session = summarised(user)
    client.force_login(user)

    response = client.post(f"/memories/conversations/{session.pk}/delete-summary")

    assert response.status_code == 302 and response.url == "/memories/#conversation-summaries"


def test_another_persons_summary_is_not_found(client: Client, user: User, other_user: User) -> None:
    theirs = summarised(other_user)
    client.force_login(user)

    response = client.post(f"/memories/conversations/{theirs.pk}/delete-summary", headers=HTMX)

    assert response.status_code == 404
    assert ChatSession.objects.get(pk=theirs.pk).summary == SUMMARY


def test_a_visitor_is_sent_to_sign_in_and_a_get_is_refused(client: Client, user: User) -> None:
    session = summarised(user)

    anonymous = client.post(f"/memories/conversations/{session.pk}/delete-summary")
    client.force_login(user)
    wrong_method = client.get(f"/memories/conversations/{session.pk}/delete-summary")

    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous.url
    assert wrong_method.status_code == 405
    assert ChatSession.objects.get(pk=session.pk).summary == SUMMARY
