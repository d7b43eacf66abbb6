"""The import pages: the prompt to ask another assistant with, its answer pasted and split
into proposals the person reviews, and the ticked ones saved as their own. Every form is
sent back as the page rendered it, with only what a person would change changed."""

from __future__ import annotations

import html
import json
from html.parser import HTMLParser

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from accounts.models import User
from memory.imports.review import NO_FACTS
from memory.imports.splitting import IMPORT_MAX_CHARS
from memory.models import Memory, MemoryEvent, MemoryProposal
from offline_coach import ModelServer
from tests.memory.factories import make_memories
from tests.memory.test_imports import CHATGPT_ANSWER, CHATGPT_FACTS, MODEL_FACTS, import_requests

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


class _Form(HTMLParser):
    """The fields of the page's review form, as a browser would send them."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}
        self.fieldsets: list[str] = []
        self._in_form = False
        self._textarea: str | None = None
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form" and "import-review" in (found.get("class") or ""):
            self._in_form = True
        if not self._in_form:
            return
        name = found.get("name") or ""
        if tag == "fieldset":
            self.fieldsets.append(found.get("id") or "")
        elif tag == "input" and found.get("type") in ("checkbox", "radio"):
            if "checked" in found:
                self.fields[name] = found.get("value") or "on"
        elif tag == "input" and name:
            self.fields[name] = found.get("value") or ""
        elif tag == "textarea":
            self._textarea, self.fields[name] = name, ""
        elif tag == "select":
            self._select = name
        elif tag == "option" and self._select and "selected" in found:
            self.fields[self._select] = found.get("value") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._in_form = False
        elif tag == "textarea":
            self._textarea = None
        elif tag == "select":
            self._select = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            # A browser drops the line break that opens a textarea's content.
            if not self.fields[self._textarea] and data.startswith("\n"):
                data = data[1:]
            self.fields[self._textarea] += data


def review_form(response) -> _Form:
    form = _Form()
    form.feed(response.content.decode())
    return form


def paste(client: Client, text: str, source: str = "chatgpt"):
    return client.post("/memories/import", {"text": text, "source": source})


def save(client: Client, fields: dict[str, str]):
    return client.post("/memories/import/save", fields)


def untick(fields: dict[str, str], *places: int) -> dict[str, str]:
    return {name: value for name, value in fields.items() if name not in {f"fact-{p}-keep" for p in places}}


def textarea_holds(response, text: str) -> bool:
    """Whether the page's paste box holds exactly `text` (escaped, as a browser reads it)."""
    page = response.content.decode()
    return f'id="import-text">\n{html.escape(text)}</textarea>' in page


def nothing_saved(user: User) -> bool:
    return not Memory.objects.filter(user=user).exists() and not MemoryEvent.objects.filter(user=user).exists()


# The page ---------------------------------------------------------------------------------


def test_the_memory_page_links_to_the_import(client: Client) -> None:
    page = client.get("/memories/").content.decode()

    assert '<a href="/memories/import">Import what ChatGPT, Claude or Gemini knows about you</a>' in page


def test_the_prompt_is_plain_text_on_the_page_and_the_copy_button_waits_for_the_script(client: Client) -> None:
    page = client.get("/memories/import").content.decode()

    assert '<pre class="import-prompt" id="import-prompt">I\'m moving to a new assistant' in page
    assert 'Write one fact per line, each line starting with "- "' in page
    assert '<button type="button" class="secondary" data-copy="#import-prompt" hidden>Copy the prompt</button>' in page
    assert f"up to {IMPORT_MAX_CHARS:,} characters" in page
    assert '<script src="/static/js/memory_import.js"' in page


def test_import_pages_need_a_login_and_the_right_method(client: Client, user: User) -> None:
    assert client.get("/memories/import/save").status_code == 405
    assert client.put("/memories/import").status_code == 405
    client.logout()
    for response in (client.get("/memories/import"), paste(client, CHATGPT_ANSWER), save(client, {})):
        assert response.status_code == 302 and response.url.startswith("/accounts/login/")
    assert nothing_saved(user)


# Pasting ------------------------------------------------------------------------------------


def test_a_pasted_chatgpt_list_of_twelve_facts_becomes_twelve_proposals(
    client: Client, user: User, model_server: ModelServer
) -> None:
    response = paste(client, CHATGPT_ANSWER)

    assert response.status_code == 200
    form = review_form(response)
    assert form.fieldsets == [f"proposal-{n}" for n in range(12)]
    assert [form.fields[f"fact-{n}-summary"] for n in range(12)] == list(CHATGPT_FACTS)
    assert all(form.fields[f"fact-{n}-keep"] == "on" for n in range(12))
    assert [form.fields[f"fact-{n}-category"] for n in (2, 3, 4)] == ["injury", "allergy", "medical"]
    assert form.fields["fact-5-details"].strip() == "You've never raced further than 10k"
    assert form.fields["text"].strip() == CHATGPT_ANSWER.strip()
    assert "12 facts found in what you pasted" in response.content.decode()
    # Split by the model (here the offline coach), and nothing saved before the person says so.
    assert len(import_requests(model_server)) == 1
    assert nothing_saved(user) and not MemoryProposal.objects.exists()


def test_ticking_ten_of_twelve_saves_ten_as_the_persons_own_and_the_other_two_leave_nothing(
    client: Client, user: User, model_server: ModelServer
) -> None:
    fields = review_form(paste(client, CHATGPT_ANSWER)).fields

    response = save(client, untick(fields, 1, 9))

    assert response.status_code == 302 and response.url == "/memories/#memory-groups"
    kept = [fact for n, fact in enumerate(CHATGPT_FACTS) if n not in (1, 9)]
    saved = list(Memory.objects.filter(user=user).order_by("pk"))
    assert [m.summary for m in saved] == kept
    assert {(m.source, m.is_protected) for m in saved} == {("user", True)}
    assert [m.category for m in saved][1:4] == ["injury", "allergy", "medical"]
    events = list(MemoryEvent.objects.filter(user=user))
    assert [(e.action, e.actor, e.reason) for e in events] == [("created", "user", "imported from ChatGPT")] * 10
    # The two unticked facts are nowhere: no memory, no event, no proposal.
    for dropped in (CHATGPT_FACTS[1], CHATGPT_FACTS[9]):
        assert not any(dropped in (m.summary, m.content) for m in saved)
        assert not any(dropped in (e.after or "") for e in events)
    assert not MemoryProposal.objects.exists()
    # One request to compare the twelve with the person's memories and one another, while
    # they were reviewed; one for the ten saved.
    reviewed, saving = model_server.embedding_requests()
    assert (len(reviewed["input"]), len(saving["input"])) == (12, 10)
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "Saved 10 memories from your import. They are yours: your coach will not forget them on its own."
    ]


def test_an_edited_proposal_is_saved_as_the_person_wrote_it(client: Client, user: User) -> None:
    fields = review_form(paste(client, CHATGPT_ANSWER)).fields
    fields |= {
        "fact-0-summary": "Ada, a night-shift nurse",
        "fact-0-details": "Works four nights on, three off",
        "fact-0-category": "schedule",
        "fact-0-tier": "profile",
    }

    save(client, untick(fields, *range(1, 12)))

    [memory] = Memory.objects.filter(user=user)
    assert (memory.summary, memory.content, memory.category, memory.key) == (
        "Ada, a night-shift nurse",
        "Works four nights on, three off",
        "schedule",
        "schedule-1",
    )


def test_the_same_paste_through_a_model_that_answers_with_structured_facts(
    client: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_text(json.dumps({"facts": MODEL_FACTS}))

    response = paste(client, CHATGPT_ANSWER)

    form = review_form(response)
    assert [form.fields[f"fact-{n}-summary"] for n in range(12)] == [f["summary"] for f in MODEL_FACTS]
    assert [form.fields[f"fact-{n}-category"] for n in range(12)] == [f["category"] for f in MODEL_FACTS]
    assert form.fields["fact-5-tier"] == "prospective"
    assert "without the help of your coach" not in response.content.decode()
    [request] = import_requests(model_server)
    assert request["messages"][-1]["content"] == CHATGPT_ANSWER.strip()

    save(client, untick(form.fields, 0, 1))

    saved = Memory.objects.filter(user=user).order_by("pk")
    assert [m.summary for m in saved] == [f["summary"] for f in MODEL_FACTS[2:]]
    assert saved[0].content == "Avoids deep squats and jumping" and saved[0].key == "injury-1"


def test_a_model_that_answers_garbage_falls_back_to_one_proposal_per_line(
    client: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_text("Sure! Here's a summary of everything I know about you, in prose.")

    response = paste(client, CHATGPT_ANSWER)

    form = review_form(response)
    assert [form.fields[f"fact-{n}-summary"] for n in range(12)] == list(CHATGPT_FACTS)
    assert "These were split one per line or sentence, without the help of your coach" in response.content.decode()
    save(client, untick(form.fields, 1, 9))
    assert Memory.objects.filter(user=user, source="user").count() == 10


# What cannot be imported ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pasted", "says"),
    [
        pytest.param("", "Paste the other assistant&#x27;s answer into the box first: it is empty.", id="empty"),
        pytest.param(
            "- Likes tea\n" * 2500,
            f"That is 29,999 characters; an import takes at most {IMPORT_MAX_CHARS:,} at a time.",
            id="over the limit",
        ),
        pytest.param(
            "<ul>\n<li>Allergic to peanuts</li>\n<li>Bad left knee</li>\n</ul>",
            "Every line of this has HTML in it, so it is a web page&#x27;s code",
            id="HTML on every line",
        ),
        pytest.param(
            "I don't have any memories saved about you yet. Would you like to tell me about yourself?",
            html.escape(NO_FACTS),
            id="prose without a fact",
        ),
    ],
)
def test_a_paste_that_cannot_be_imported_says_why_and_stays_in_the_box(
    client: Client, user: User, model_server: ModelServer, pasted: str, says: str
) -> None:
    response = paste(client, pasted)

    assert response.status_code == 200
    page = response.content.decode()
    assert f'<ul class="errorlist" id="import-text_error"><li>{says}' in page
    assert 'aria-describedby="import-text_helptext import-text_error"' in page
    # Said again at the top of the page, where the person looks after sending, with a way to the box.
    top = '<div class="form-alert" role="alert" id="import-problem" tabindex="-1" data-focus-on-load>'
    assert f"{top}\n  <p>{says}" in page
    assert page.index('id="import-problem"') < page.index('id="ask-title"')
    assert textarea_holds(response, pasted)
    assert "<li>Allergic to peanuts</li>" not in page
    assert nothing_saved(user)


def test_html_is_refused_before_the_model_sees_it(client: Client, model_server: ModelServer) -> None:
    paste(client, "<p>Allergic to peanuts</p><script>alert(1)</script>")

    assert import_requests(model_server) == []


def test_prose_is_proposed_one_sentence_at_a_time_and_says_so(
    client: Client, user: User, model_server: ModelServer
) -> None:
    model_server.queue_error(503)

    response = paste(client, "You are a nurse in Leeds. You have a bad left knee from skiing. You love jazz.")

    form = review_form(response)
    assert [form.fields[f"fact-{n}-summary"] for n in range(3)] == [
        "You are a nurse in Leeds.",
        "You have a bad left knee from skiing.",
        "You love jazz.",
    ]
    assert "What you pasted is not a list, so each sentence is proposed on its own." in response.content.decode()
    assert nothing_saved(user)


# Saving what cannot be saved -------------------------------------------------------------


def test_a_proposal_made_too_long_is_refused_beside_it_and_nothing_is_saved(client: Client, user: User) -> None:
    fields = review_form(paste(client, CHATGPT_ANSWER)).fields
    too_long = "You have a bad left knee " * 8
    fields["fact-2-summary"] = too_long

    response = save(client, fields)

    assert response.status_code == 200
    page = response.content.decode()
    assert "Some of these cannot be saved as they are: see below." in page
    assert '<ul class="errorlist" id="id_fact-2-summary_error"><li>This is 199 characters; at most 150.</li>' in page
    # Every choice and edit is still there to correct.
    form = review_form(response)
    assert form.fields["fact-2-summary"] == too_long
    assert all(form.fields.get(f"fact-{n}-keep") == "on" for n in range(12))
    assert nothing_saved(user)


def test_saving_with_nothing_ticked_says_so(client: Client, user: User) -> None:
    fields = review_form(paste(client, CHATGPT_ANSWER)).fields

    response = save(client, untick(fields, *range(12)))

    assert "Tick at least one memory to save, or start over." in response.content.decode()
    assert len(review_form(response).fieldsets) == 12
    assert nothing_saved(user)


def test_an_embedding_outage_saves_nothing_and_keeps_every_choice(
    client: Client, user: User, model_server: ModelServer
) -> None:
    fields = untick(review_form(paste(client, CHATGPT_ANSWER)).fields, 4)
    model_server.queue_embedding_error(503)

    response = save(client, fields)

    assert "Nothing was saved, and nothing you changed here is lost" in response.content.decode()
    token = "csrfmiddlewaretoken"
    assert {**review_form(response).fields, token: ""} == {**fields, token: ""}
    assert nothing_saved(user)


def test_a_tampered_form_with_more_proposals_than_an_import_takes_is_refused(client: Client, user: User) -> None:
    fields = {"fact-TOTAL_FORMS": "101", "fact-INITIAL_FORMS": "0"}
    for n in range(101):
        fields |= {f"fact-{n}-keep": "on", f"fact-{n}-summary": f"Fact {n}", f"fact-{n}-category": "other"}

    response = save(client, fields)

    assert response.status_code == 200
    assert "Please submit at most 100 forms." in response.content.decode()
    assert nothing_saved(user)


# The ceiling -------------------------------------------------------------------------------


def test_an_import_that_fills_the_store_says_what_the_coach_will_forget(client: Client, user: User, settings) -> None:
    settings.MEMORY_MAX_STORED = 14
    make_memories(user, 6)

    response = paste(client, CHATGPT_ANSWER)

    assert (
        "Saving all 12 of these makes it forget up to 4 of its own oldest notes to make room"
        in response.content.decode()
    )
    save(client, review_form(response).fields)
    page = client.get("/memories/").content.decode()
    assert (
        f"To make room, your coach forgot 4 of its own oldest notes. You can restore them under Recently "
        f"forgotten for {settings.MEMORY_FORGOTTEN_DAYS} days."
    ) in page
    assert Memory.objects.filter(user=user).count() == 14


def test_an_import_past_the_ceiling_keeps_every_fact_and_says_the_coach_cannot_note_more(
    client: Client, user: User, settings
) -> None:
    settings.MEMORY_MAX_STORED = 10

    response = paste(client, CHATGPT_ANSWER)

    assert "Saving all 12 of these would leave you past that" in response.content.decode()
    save(client, review_form(response).fields)
    page = client.get("/memories/").content.decode()
    assert (
        "You now have 12 memories kept for good, more than the 10 your coach holds. "
        "Until you delete some you no longer need, it cannot note anything new of its own."
    ) in page
    assert Memory.objects.filter(user=user, source="user").count() == 12
