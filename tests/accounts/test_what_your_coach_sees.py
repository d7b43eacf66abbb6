"""What your coach sees: the memory block of the next turn, readable by the person it is
about (sections in the coach's order, each memory's form, sources in plain words), with the
exact text the model receives folded away below it."""

from __future__ import annotations

import html as html_text
import re
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.utils import timezone

from accounts.models import User
from coach.services import message_post, session_start
from coach.turn import turn_run
from emails.models import Email
from memory.context import TOPIC_ORDER, assemble_memory_context
from memory.notes import kept_block_budget
from offline_coach import ModelServer
from tests.memory.factories import make_memories, make_memory

HTMX = {"HX-Request": "true"}
NONCE = re.compile(r"(<<(?:END )?MEMORIES )[0-9a-f]{16}>>")


def coach_sees(user: User) -> str:
    client = Client()
    client.force_login(user)
    response = client.get("/memories/context", headers=HTMX)
    assert response.status_code == 200
    return response.content.decode()


def readable_part(page: str) -> str:
    return page.split('<details class="exact-text">', 1)[0]


def exact_part(page: str) -> str:
    match = re.search(r'<pre class="context-text"[^>]*>(.*?)</pre>', page, re.S)
    assert match, "no exact text"
    return html_text.unescape(match.group(1))


def entries(page: str) -> dict[int, tuple[str, str]]:
    """Each memory shown, by id: (its form, the whole entry's text)."""
    found = re.findall(
        r'<li class="context-entry form-([a-z-]+)" data-memory-id="(\d+)">(.*?)</li>', readable_part(page), re.S
    )
    return {
        int(pk): (form, html_text.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text))))
        for form, pk, text in found
    }


def source_of(page: str, memory_id: int) -> str:
    match = re.search(
        rf'data-memory-id="{memory_id}">.*?<span class="context-source">([^<]*)</span>', readable_part(page), re.S
    )
    assert match, memory_id
    return html_text.unescape(match.group(1))


@pytest.mark.django_db
def test_sources_are_named_in_plain_words_and_the_coachs_own_notes_are_never_you(user: User) -> None:
    typed = make_memory(user, "typed", source="user", summary="Vegetarian since March")
    onboarded = make_memory(user, "onboarded", source="onboarding", category="goal", summary="Run a half marathon")
    edited = make_memory(user, "edited", source="manual", summary="Oats every morning")
    noted = make_memory(user, "noted", source="coach", summary="Sleeps badly before races")
    supported = make_memory(user, "supported", source="admin", summary="Prefers email in English")

    page = coach_sees(user)

    assert source_of(page, typed.pk) == "You told your coach"
    assert source_of(page, onboarded.pk) == "From onboarding"
    assert source_of(page, edited.pk) == "You edited or kept it"
    assert source_of(page, noted.pk) == "Your coach's note"
    assert source_of(page, supported.pk) == "Added by our support team"
    # The model is told its own notes are by "you"; the person never reads that.
    coach_entry = entries(page)[noted.pk][1]
    assert not re.search(r"\byou\b", coach_entry, re.I), coach_entry
    assert '"source"' not in readable_part(page)
    # The block marks who wrote what only where it is not the coach itself.
    exact = exact_part(page)
    assert "- typed (by them, " in exact and "- supported (by support, " in exact
    assert re.search(r"- noted \(\d+ \w+\): Sleeps badly before races", exact), exact


@pytest.mark.django_db
def test_sections_follow_the_order_the_coach_reads_them_and_say_each_memorys_form(user: User, settings) -> None:
    # A conversation's block is assembled within 300 of these, the rest kept for its notes.
    settings.MEMORY_CONTEXT_BUDGET_TOKENS = 334
    make_memory(user, "oats", category="habit", summary="Oats every morning")
    shoulder = make_memory(user, "shoulder", source="user", category="injury", summary="Bad left shoulder")
    make_memory(user, "peanuts", source="user", category="allergy", summary="Allergic to peanuts")
    make_memories(user, 30)

    page = coach_sees(user)

    sections = re.findall(r'<li class="context-section" id="context-([a-z]+)">', page)
    assert sections == [topic for topic in TOPIC_ORDER if topic in sections]
    assert sections[:2] == ["injury", "allergy"]
    readable = readable_part(page)
    assert readable.index("How well your coach knows you") < readable.index("<h3>Injuries</h3>")
    assert (
        readable.index("<h3>Injuries</h3>") < readable.index("<h3>Allergies</h3>") < readable.index("<h3>Habits</h3>")
    )
    # Each memory's form on the page is the one it took in the block a conversation keeps.
    budget = kept_block_budget(settings.MEMORY_CONTEXT_BUDGET_TOKENS)
    context = assemble_memory_context(user=user, now=timezone.now(), budget_tokens=budget)
    shown = entries(page)
    forms = {"whole": "whole", "one line": "one-line", "left out": "left-out"}
    assert {pk: form for pk, (form, _) in shown.items()} == {
        item.memory_id: forms[item.form] for item in context.items if item.memory_id is not None
    }
    assert "left-out" in {form for form, _ in shown.values()}
    assert shown[shoulder.pk][0] != "left-out", "safety stays in"
    assert any("Left out for lack of room" in text for form, text in shown.values() if form == "left-out")


@pytest.mark.django_db
def test_a_memory_in_full_shows_its_details_and_one_line_only_its_summary(user: User, settings) -> None:
    # Room for every line, and for some notes in full: safety first.
    settings.MEMORY_CONTEXT_BUDGET_TOKENS = 800
    shoulder = make_memory(
        user, "shoulder", source="user", category="injury", summary="Bad left shoulder", content="No overhead pressing"
    )
    # Notes whose details say more than their line: in full only while there is room.
    notes = [
        make_memory(user, f"note-{n}", summary=f"note number {n}", content=f"note number {n}, " + "in detail " * 12)
        for n in range(30)
    ]

    shown = entries(coach_sees(user))

    assert shown[shoulder.pk][0] == "whole"
    assert "Bad left shoulder" in shown[shoulder.pk][1] and "No overhead pressing" in shown[shoulder.pk][1]
    assert "In full" in shown[shoulder.pk][1]
    one_line = [pk for pk, (form, _) in shown.items() if form == "one-line"]
    assert one_line and set(one_line) <= {note.pk for note in notes}
    for pk in one_line:
        assert "One line" in shown[pk][1]


@pytest.mark.django_db
def test_the_exact_text_is_folded_away_and_can_be_reached_by_keyboard(user: User) -> None:
    make_memory(user, "oats", summary="Oats every morning")

    page = coach_sees(user)

    assert re.search(
        r'<details class="exact-text">\s*<summary>The exact text your coach receives</summary>.*?'
        r'<pre class="context-text" tabindex="0" role="region" aria-label="The exact text your coach receives">',
        page,
        re.S,
    )


@pytest.mark.django_db
def test_nothing_remembered_yet_says_so(user: User) -> None:
    page = coach_sees(user)

    assert "Nothing yet: your coach has no memories of you to read." in page
    assert "How well your coach knows you" in page and "getting to know you" in page


def test_the_exact_text_is_what_the_turn_sends_the_model(
    transactional_db: None, user: User, model_server: ModelServer
) -> None:
    make_memory(user, "shoulder", source="user", category="injury", summary="Bad left shoulder")
    make_memory(user, "oats", category="habit", summary="Oats every morning", content="Oats every morning\nwith honey")
    make_memory(
        user,
        "talk",
        tier="prospective",
        category="project",
        summary="Giving a talk in June",
        due_at=timezone.now() + timedelta(days=10),
    )
    Email.objects.create(
        user=user,
        kind="nudge",
        period_key="week-1",
        status="sent",
        subject="How did the run go?",
        body_text="Hi Ada,\nhow did it go?",
        sent_at=timezone.now() - timedelta(days=1),
    )
    page = coach_sees(user)
    model_server.queue_text("Hello again.")

    message = message_post(session=session_start(user=user), text="Hi", client_id=None)
    async_to_sync(turn_run)(user_id=user.pk, message_id=message.pk)

    prompt = ModelServer.system_prompt(model_server.chat_requests()[-1])
    sent = re.search(r"Relationship stage:.*?<<END MEMORIES [0-9a-f]{16}>>", prompt, re.S)
    assert sent, prompt
    shown = exact_part(page)
    assert "How did the run go?" in shown and "with honey" in shown
    # Each block is sealed with a fresh random marker; everything else is the same text.
    assert NONCE.sub(r"\1…>>", shown) == NONCE.sub(r"\1…>>", sent.group(0))


@pytest.mark.django_db
def test_with_memory_off_the_page_says_the_coach_reads_none_of_it(user: User) -> None:
    make_memory(user, "oats", summary="Oats every morning")
    User.objects.filter(pk=user.pk).update(memory_enabled=False)

    page = coach_sees(user)

    assert "Your memory is off, so your coach reads none of your memories" in page
    assert "Oats every morning" not in page and '<pre class="context-text"' not in page


def test_the_page_says_the_coach_can_look_back_through_past_conversations_and_that_it_shows_it(
    user: User,
) -> None:
    make_memory(user, key="knee", summary="Left knee clicks on stairs")

    page = readable_part(coach_sees(user))

    (said,) = re.findall(r'<p class="section-note" id="look-back">(.*?)</p>', page, re.S)
    assert "look back through your past conversations" in said
    assert "not remembered" in said and "memory is off" in said
    assert "a line under its reply says which conversation" in said
