"""The memory page: every memory grouped by tier, with who wrote it and why it is kept; the
emails sent; what the coach suggests, forgot lately and would forget next; filters and search."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import User
from coach.services import session_end, session_summary_save
from emails.models import Email
from infra.llm import Embedding
from memory.drafts import MemoryDraft
from memory.models import Memory, MemoryEvent
from memory.proposals import proposal_make
from memory.services import memory_save
from offline_coach import bag_of_words_embedding
from tests.coach.factories import make_session
from tests.memory.factories import make_memories, make_memory

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@pytest.fixture
def client(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def page(client: Client, query: str = "", **headers: str) -> str:
    response = client.get(f"/memories/{query}", headers=headers)
    assert response.status_code == 200
    return response.content.decode()


def section(html: str, element_id: str) -> str:
    match = re.search(rf'<(section|div|details) [^>]*id="{element_id}".*?</\1>', html, re.S)
    assert match, element_id
    return match.group(0)


def row(html: str, memory: Memory) -> str:
    match = re.search(rf'<article [^>]*id="memory-{memory.pk}".*?</article>', html, re.S)
    assert match, memory.key
    return match.group(0)


def send_email(user: User, subject: str, *, status: str = "sent", days_ago: int = 0, body: str = "Hello") -> Email:
    at = timezone.now() - timedelta(days=days_ago)
    return Email.objects.create(
        user=user,
        kind="nudge",
        period_key=f"{subject}-{days_ago}",
        status=status,
        subject=subject,
        body_text=body,
        sent_at=at if status == "sent" else None,
    )


def forget(user: User, key: str, summary: str) -> MemoryEvent:
    memory = make_memory(user, key, summary=summary)
    event = MemoryEvent.objects.create(
        user=user,
        memory_id=memory.pk,
        key=key,
        actor="system",
        action="evicted",
        reason="the oldest unprotected memory when more than 60 were stored",
        before=memory.snapshot(),
    )
    memory.delete()
    return event


def test_memories_are_grouped_by_tier(client: Client, user: User) -> None:
    make_memory(user, "photographer", tier="profile", category="background", summary="A photographer")
    make_memory(user, "stuck", tier="episodic", summary="Stuck on chapter three")
    talk = make_memory(user, "talk", tier="prospective", category="project", due_at=timezone.now() + timedelta(days=40))

    html = page(client)

    assert "A photographer" in section(html, "tier-profile")
    assert "Stuck on chapter three" in section(html, "tier-episodic")
    assert f'id="memory-{talk.pk}"' in section(html, "tier-prospective")
    assert 'id="tier-communication"' in html


def test_each_memory_says_who_wrote_it_in_plain_words(client: Client, user: User) -> None:
    typed = make_memory(user, "typed", source="user")
    onboarded = make_memory(user, "onboarded", source="onboarding")
    edited = make_memory(user, "edited", source="manual")
    noted = make_memory(user, "noted", source="coach")

    html = page(client)

    assert "Written by you" in row(html, typed)
    assert "From your onboarding" in row(html, onboarded)
    assert "You edited it" in row(html, edited)
    assert "Your coach wrote this" in row(html, noted)


def test_a_protected_memory_shows_why_it_is_kept(client: Client, user: User) -> None:
    typed = make_memory(user, "typed", source="user")
    shoulder = make_memory(user, "shoulder", source="coach", category="injury", summary="Bad left shoulder")
    oats = make_memory(user, "oats", source="coach")

    html = page(client)

    assert "Kept: you wrote it" in row(html, typed)
    assert "Kept: it is about your injury" in row(html, shoulder)
    assert "Kept:" not in row(html, oats)


def test_each_memory_shows_its_text_category_and_dates(client: Client, user: User) -> None:
    breakfast = make_memory(
        user,
        "breakfast",
        category="habit",
        summary="Oats every morning",
        content="Oats every morning\nwith honey",
        updated_at=timezone.now() - timedelta(days=3),
    )

    html = row(page(client), breakfast)

    assert "Oats every morning" in html and "with honey" in html
    assert "Habit" in html
    assert "added <time" in html


def test_a_prospective_memory_shows_its_due_date_and_status(client: Client, user: User) -> None:
    due = timezone.now() + timedelta(days=40)
    talk = make_memory(user, "talk", tier="prospective", category="project", due_at=due, status="raised")

    html = row(page(client), talk)

    # The date is a <time> on the person's clock (UTC here): read as the person sees it.
    assert f"Due {due:%-d %b %Y}" in re.sub(r"<[^>]+>", "", html)
    assert "Raised" in html


def test_communication_history_lists_sent_emails_newest_first_with_their_text(client: Client, user: User) -> None:
    send_email(user, "Older check-in", days_ago=7)
    send_email(user, "How did the talk go?", days_ago=1, body="Hi Ada,\nhow did it go?")
    send_email(user, "Not sent yet", status="queued")

    html = section(page(client), "tier-communication")

    assert html.index("How did the talk go?") < html.index("Older check-in")
    assert "Not sent yet" not in html
    assert re.search(
        r"<details>.*?How did the talk go\?.*?<pre class=\"email-body\">Hi Ada,\nhow did it go\?</pre>", html, re.S
    )
    assert "Nudge" in html


def test_only_the_owners_memories_and_emails_are_shown(client: Client, user: User, other_user: User) -> None:
    make_memory(other_user, "secret", summary="Someone else's secret")
    send_email(other_user, "Someone else's email")

    html = page(client)

    assert "Someone else" not in html


def test_empty_tiers_say_what_will_fill_them(client: Client) -> None:
    html = page(client)

    assert "Tell your coach about yourself" in section(html, "tier-profile")
    assert "No session notes yet" in section(html, "tier-episodic")
    assert "Nothing planned yet" in section(html, "tier-prospective")
    assert "Your coach has not emailed you yet" in section(html, "tier-communication")
    assert "Nothing has been forgotten lately" in section(html, "forgotten")


def test_filtering_by_tier_shows_only_that_tier(client: Client, user: User) -> None:
    make_memory(user, "photographer", tier="profile", summary="A photographer")
    make_memory(user, "stuck", tier="episodic", summary="Stuck on chapter three")
    send_email(user, "A nudge")

    groups = page(client, "?tier=episodic", **HTMX)

    assert "Stuck on chapter three" in groups and "A photographer" not in groups
    assert "A nudge" not in groups
    assert "A nudge" in page(client, "?tier=communication", **HTMX)


def test_filtering_by_category_shows_only_that_category(client: Client, user: User) -> None:
    make_memory(user, "shoulder", category="injury", summary="Bad left shoulder")
    make_memory(user, "oats", category="habit", summary="Oats every morning")
    send_email(user, "A nudge")

    groups = page(client, "?category=injury", **HTMX)

    assert "Bad left shoulder" in groups and "Oats every morning" not in groups
    assert "A nudge" not in groups


def test_search_finds_text_in_summary_or_content_whatever_the_case(client: Client, user: User) -> None:
    make_memory(user, "talk", summary="A talk in June", content="A talk in June at the PyCon meetup")
    make_memory(user, "oats", summary="Oats every morning")
    send_email(user, "Your PYCON talk")

    groups = page(client, "?q=pycon", **HTMX)

    assert "A talk in June" in groups and "Oats every morning" not in groups
    assert "Your PYCON talk" in groups
    assert "2 matches for “pycon”" in groups


def test_a_search_that_matches_nothing_says_so(client: Client, user: User) -> None:
    make_memory(user, "oats", tier="episodic", summary="Oats every morning")

    html = page(client, "?q=marathon", **HTMX)

    assert "0 matches" in html
    assert "None of these match." in section(html, "tier-episodic")


def test_unknown_filter_values_show_everything(client: Client, user: User) -> None:
    make_memory(user, "oats", summary="Oats every morning")

    groups = page(client, "?tier=secret&category=nonsense", **HTMX)

    assert "Oats every morning" in groups


def test_an_htmx_filter_gets_only_the_memory_groups(client: Client, user: User) -> None:
    make_memory(user, "oats", summary="Oats every morning")

    html = page(client, "?q=oats", **HTMX)

    assert html.lstrip().startswith('<div id="memory-groups"')
    assert "Oats every morning" in html and "Always remember this" not in html


def test_a_history_restore_gets_the_whole_page(client: Client) -> None:
    html = page(client, "?q=oats", **HTMX, **{"HX-History-Restore-Request": "true"})

    assert "<html" in html


def test_the_pending_proposals_show_the_memory_now_and_what_is_suggested(client: Client, user: User) -> None:
    memory = make_memory(user, "peanuts", source="user", category="allergy", summary="Allergic to peanuts")
    proposal_make(
        user=user,
        memory=memory,
        kind="update",
        draft=MemoryDraft(
            key="peanuts", tier="episodic", category="allergy", summary="Allergic to all nuts", content=""
        ),
        reason="You said cashews make you ill too",
    )

    html = section(page(client), "proposals")

    assert "Allergic to peanuts" in html and "Allergic to all nuts" in html
    assert "You said cashews make you ill too" in html
    assert "Yes, change it" in html and "No, keep it as it is" in html


def test_a_proposal_outdated_by_an_edit_offers_only_to_dismiss_it(client: Client, user: User) -> None:
    memory = make_memory(user, "peanuts", source="user", category="allergy")
    proposal_make(user=user, memory=memory, kind="delete", draft=None, reason="no longer true")
    memory.version += 1
    memory.save()

    html = section(page(client), "proposals")

    assert "no longer applies" in html
    assert "Yes, forget it" not in html and "Dismiss" in html


def test_no_proposals_no_proposal_section(client: Client) -> None:
    assert 'id="proposals"' not in page(client)


def test_recently_forgotten_memories_show_their_reason_and_a_restore_button(client: Client, user: User) -> None:
    event = forget(user, "rain", "Runs in the rain")

    html = section(page(client), "forgotten")

    assert "Runs in the rain" in html
    assert "the oldest unprotected memory when more than 60 were stored" in html
    assert f'action="/memories/forgotten/{event.pk}/restore"' in html


def test_the_reasons_the_page_gives_speak_of_your_coach(client: Client, user: User, settings) -> None:
    settings.MEMORY_MAX_STORED = 1
    make_memories(user, 1)
    memory_save(
        user=user,
        draft=MemoryDraft(key="newest", tier="episodic", category="habit", summary="Newest", content="Newest"),
        source="coach",
        actor="coach",
        embedding=Embedding(bag_of_words_embedding("Newest"), "bag-of-words"),
    )
    peanuts = make_memory(user, "peanuts", source="user", category="allergy", summary="Allergic to peanuts")
    proposal_make(user=user, memory=peanuts, kind="delete", draft=None, reason="the coach saved new text")

    html = unescape(page(client))

    assert "the oldest of your coach's session notes" in section(html, "forgotten")
    assert "Why</span> Your coach thinks this no longer holds, from what you said." in section(html, "proposals")
    assert "the coach" not in html.replace("Your memories", "")


def test_next_to_be_forgotten_lists_the_oldest_unprotected_notes_first(client: Client, user: User) -> None:
    notes = make_memories(user, 7)
    make_memory(user, "typed", source="user", updated_at=timezone.now() - timedelta(days=365))

    html = section(page(client), "next-to-forget")

    listed = re.findall(r'action="/memories/(\d+)/keep"', html)
    assert listed == [str(note.pk) for note in notes[:5]]
    assert "room for 52 more" in html


def test_when_everything_is_protected_nothing_is_next_to_be_forgotten(client: Client, user: User) -> None:
    make_memory(user, "typed", source="user")

    assert "none of it will be forgotten" in section(page(client), "next-to-forget")


def test_the_whole_page_loads_its_styles_and_script_with_the_nonce(client: Client) -> None:
    html = page(client)

    assert '<link rel="stylesheet" href="/static/css/memories.css">' in html
    assert re.search(r'<script src="/static/js/memories.js" nonce="[^"]+" defer>', html)
    assert " style=" not in html and " on" + "click=" not in html and "hx-on" not in html


@pytest.mark.parametrize("count", [5, 74])
def test_the_page_reads_a_fixed_number_of_queries(
    client: Client, user: User, count: int, django_assert_num_queries
) -> None:
    make_memories(user, count)
    for number in range(3):
        forget(user, f"gone-{number}", f"Gone {number}")
        send_email(user, f"Email {number}", days_ago=number)
        talk = make_session(user, f"Talk {number}", "Yes.")
        session_end(session=talk)
        session_summary_save(session=talk, summary=f"Summary {number}")
    memory = make_memory(user, "peanuts", source="user", category="allergy")
    proposal_make(user=user, memory=memory, kind="delete", draft=None, reason="no longer true")

    # The session with its user (one query), then: memories, emails, proposals, memories
    # that read alike, recently forgotten, the summaries of ended conversations.
    with django_assert_num_queries(8):
        html = page(client)

    assert html.count('class="memory') >= count
    assert all(f"Summary {number}" in html for number in range(3))
