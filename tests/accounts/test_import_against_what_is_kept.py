"""An import read against what the person keeps: a fact already kept is offered unticked
with the kept one shown; one that says otherwise (another job, another month) is shown
beside the memory it differs from, and the person chooses which stands; a line that cannot
be imported is named at the top and the rest goes on; what is saved says where it came
from. Every form is sent back as the page rendered it, with only a person's choices
changed."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client

from accounts.models import User
from memory.drafts import MemoryDraft
from memory.models import Memory, MemoryEvent
from memory.services import memory_edit_by_user
from tests.accounts.test_memory_import import paste, review_form, save
from tests.conftest import make_user
from tests.memory.factories import make_memory
from tests.memory.test_imports import CHATGPT_ANSWER

pytestmark = pytest.mark.django_db

CLIMBER_ANSWER = """Here's what I know about you:

- You teach chemistry at a secondary school
- You're going on a climbing trip to Kalymnos in June
- You're allergic to shellfish
"""


@pytest.fixture
def client(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


@pytest.fixture
def climber(user: User) -> dict[str, Memory]:
    """What the person keeps: a job, a trip in May, an allergy."""
    return {
        "job": make_memory(user, "job", tier="profile", category="background", summary="You're a pharmacist"),
        "trip": make_memory(
            user,
            "trip",
            tier="prospective",
            category="project",
            summary="You're going on a climbing trip to Kalymnos in May",
        ),
        "allergy": make_memory(
            user, "allergy-1", source="user", tier="profile", category="allergy", summary="You're allergic to shellfish"
        ),
    }


def proposal_html(response, place: int) -> str:
    """The page's markup of one proposal, from its fieldset to the next one's."""
    page = response.content.decode()
    start = page.index(f'id="proposal-{place}"')
    end = page.find('id="proposal-', start + 1)
    return page[start : end if end > 0 else len(page)]


def text_of(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def test_a_fact_already_kept_is_offered_unticked_with_the_kept_one_shown(
    client: Client, user: User, climber: dict[str, Memory]
) -> None:
    response = paste(client, CLIMBER_ANSWER)

    fields = review_form(response).fields
    assert "fact-2-keep" not in fields, "offered unticked"
    shown = text_of(proposal_html(response, 2))
    assert "Already kept" in shown
    assert "You keep this already, so it is not ticked: You're allergic to shellfish" in shown


def test_a_fact_that_differs_from_what_is_kept_shows_both_and_asks_which_stands(
    client: Client, user: User, climber: dict[str, Memory]
) -> None:
    response = paste(client, CLIMBER_ANSWER)

    fields = review_form(response).fields
    for place, kept, differs_in in ((0, "You're a pharmacist", "your work"), (1, "in May", "the month")):
        shown = text_of(proposal_html(response, place))
        assert f"Differs from what is kept This says otherwise than a memory you keep ({differs_in})" in shown
        assert "You keep now" in shown and kept in shown and "This import says" in shown
        assert "Which stands? What you keep now This, in its place Both: they are different things" in shown
        # Nothing changes unless the person says so.
        assert fields[f"fact-{place}-stands"] == "kept"


def test_choosing_the_import_to_stand_replaces_the_kept_memory_and_keeps_its_old_words_in_its_history(
    client: Client, user: User, climber: dict[str, Memory]
) -> None:
    fields = review_form(paste(client, CLIMBER_ANSWER)).fields
    fields |= {"fact-0-stands": "new", "fact-1-stands": "kept"}

    response = save(client, fields)

    assert response.status_code == 302
    job = Memory.objects.get(pk=climber["job"].pk)
    assert (job.summary, job.source, job.imported_from) == (
        "You teach chemistry at a secondary school",
        "user",
        "chatgpt",
    )
    [event] = MemoryEvent.objects.filter(memory_id=job.pk, action="updated")
    assert event.actor == "user" and event.reason == "replaced by what you imported from ChatGPT"
    assert "pharmacist" in event.before and "chemistry" in event.after
    # The trip stands as kept, and the allergy was not ticked: nothing else was written.
    assert Memory.objects.get(pk=climber["trip"].pk).summary.endswith("in May")
    assert Memory.objects.filter(user=user).count() == 3
    assert not any("pharmacist" in m.summary for m in Memory.objects.filter(user=user))


def test_choosing_both_keeps_the_kept_memory_and_saves_the_import_beside_it(
    client: Client, user: User, climber: dict[str, Memory]
) -> None:
    fields = review_form(paste(client, CLIMBER_ANSWER)).fields
    fields |= {"fact-1-stands": "both"}

    save(client, fields)

    summaries = sorted(m.summary for m in Memory.objects.filter(user=user))
    assert "You're going on a climbing trip to Kalymnos in May" in summaries
    assert "You're going on a climbing trip to Kalymnos in June" in summaries
    assert len(summaries) == 4


def test_another_persons_memory_named_in_a_tampered_form_is_neither_shown_nor_replaced(
    client: Client, user: User, climber: dict[str, Memory]
) -> None:
    other = make_user("other-importer@example.com")
    theirs = make_memory(other, "job", tier="profile", category="background", summary="You're a stonemason")
    fields = review_form(paste(client, CLIMBER_ANSWER)).fields
    fields |= {"fact-0-kept": str(theirs.pk), "fact-0-kept_version": str(theirs.version), "fact-0-stands": "new"}

    response = save(client, fields)

    assert response.status_code == 200
    page = response.content.decode()
    assert "stonemason" not in page
    assert "The memory of yours this was to replace changed or was deleted after this list was made" in page
    assert Memory.objects.get(pk=theirs.pk).summary == "You're a stonemason"
    assert Memory.objects.filter(user=user).count() == 3


def test_a_kept_memory_changed_since_the_review_is_not_replaced_and_nothing_is_saved(
    client: Client, user: User, climber: dict[str, Memory], model_server
) -> None:
    fields = review_form(paste(client, CLIMBER_ANSWER)).fields
    fields |= {"fact-0-stands": "new"}
    memory_edit_by_user(
        user=user,
        memory_id=climber["job"].pk,
        draft=MemoryDraft(
            key="", tier="profile", category="background", summary="You're a pharmacist in Leeds", content=""
        ),
    )

    response = save(client, fields)

    assert "changed or was deleted after this list was made" in text_of(proposal_html(response, 0))
    assert Memory.objects.get(pk=climber["job"].pk).summary == "You're a pharmacist in Leeds"
    assert Memory.objects.filter(user=user).count() == 3


def test_a_line_of_html_is_named_at_the_top_and_the_rest_is_offered(client: Client, user: User) -> None:
    line = "<li>You drink coffee only before noon</li>"
    pasted = CHATGPT_ANSWER.replace("- You drink coffee only before noon", line)

    response = paste(client, pasted)

    page = response.content.decode()
    assert len(review_form(response).fieldsets) == 11
    notice = page[page.index('id="import-left-out"') : page.index('class="import-proposals"')]
    assert "One line of what you pasted could not be imported, so it was left out; the rest is below." in text_of(
        notice
    )
    number = pasted.splitlines().index(line) + 1
    assert f"Line {number} (“{line}”): it has HTML in it" in text_of(notice)
    assert page.index('id="import-left-out"') < page.index('id="proposal-0"')


def test_a_fact_under_a_health_heading_is_filed_by_its_own_words(client: Client, user: User) -> None:
    response = paste(client, "## Health & fitness\n- Prefers metric units\n- You have mild asthma")

    fields = review_form(response).fields
    assert (fields["fact-0-category"], fields["fact-1-category"]) == ("preference", "medical")


def test_imported_memories_say_where_they_came_from_on_the_memory_page(client: Client, user: User) -> None:
    fields = review_form(paste(client, CHATGPT_ANSWER, source="claude")).fields
    assert fields["source"] == "claude"

    save(client, fields)

    page = client.get("/memories/").content.decode()
    assert page.count('<span class="author">Imported from Claude</span>') == 12
    assert "Written by you" not in page
