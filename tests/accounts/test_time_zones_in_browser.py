"""Time, as a person lives it, in Chromium: the zone their browser gives is kept whatever
they skip, every date and time they are shown is on their clock and says so, the zone
menu can be searched, and nobody is emailed before they chose to be."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone
from playwright.sync_api import Page, expect

from accounts.models import User
from coach.models import ChatSession
from emails.models import Email
from emails.outbox import mail_send_due
from emails.planning import check_ins_plan, emails_dispatch_due, nudges_plan, session_recaps_plan
from memory.models import Memory, MemoryEvent, MemoryProposal, PrivateTextViewing
from memory.proposals import proposal_make
from tests.coach.factories import make_session
from tests.conftest import PASSWORD, make_user
from tests.emails.factories import make_email, prefer, settled
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db(transaction=True)

CHATHAM = "Pacific/Chatham"


def sign_in(page: Page, base_url: str, user: User) -> None:
    """`user` signed in in the browser (their session cookie, set on the page)."""
    client = Client()
    client.force_login(user)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base_url}])


def next_local_afternoon(zone: str) -> datetime:
    """The next instant it is 14:00 on the person's clock: inside every sending window."""
    local = timezone.now().astimezone(ZoneInfo(zone))
    afternoon = local.replace(hour=14, minute=0, second=0, microsecond=0)
    return afternoon if afternoon > local else afternoon + timedelta(days=1)


def run_every_email_planner(now: datetime, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Everything beat runs that can plan an email, at `now`; the ids handed to send tasks."""
    from emails.tasks import send_email

    handed: list[int] = []
    monkeypatch.setattr(send_email, "delay", handed.append)
    check_ins_plan(now=now)
    nudges_plan(now=now)
    session_recaps_plan(now=now)
    emails_dispatch_due(now=now)
    return handed


@pytest.mark.browser_context_args(timezone_id="America/Sao_Paulo")
def test_a_visitor_signs_up_skips_every_question_keeps_their_zone_and_is_sent_nothing(
    page: Page, live_app: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    page.goto(live_app + "/")
    page.get_by_role("link", name="Sign up", exact=True).click()
    page.get_by_label(re.compile(r"^e-?mail", re.IGNORECASE)).fill("new@example.com")
    page.get_by_label(re.compile(r"^password:?$", re.IGNORECASE)).fill(PASSWORD)
    page.get_by_label(re.compile(r"^password \(again\)", re.IGNORECASE)).fill(PASSWORD)
    page.get_by_role("button", name=re.compile(r"^sign up$", re.IGNORECASE)).click()
    expect(page.get_by_role("heading", name=re.compile("verify", re.IGNORECASE))).to_be_visible()

    mail_send_due()
    link = re.search(r"https?://[^/\s]+(/accounts/confirm-email/\S+/)", mail.outbox[-1].body).group(1)
    page.goto(live_app + link)
    page.get_by_role("button", name="Confirm").click()
    expect(page.get_by_role("heading", name="Welcome")).to_be_visible()
    # The menu shows the zone this browser is in, before the person does anything.
    expect(page.get_by_label("Your time zone")).to_have_value("America/Sao_Paulo")
    page.get_by_role("button", name="Skip for now").click()
    expect(page.get_by_role("heading", name="Your coach")).to_be_visible()

    person = User.objects.get(email="new@example.com")
    assert person.time_zone == "America/Sao_Paulo" and person.onboarded_at is not None
    confirmation_mails = len(mail.outbox)

    # Due everything, were they asking for email: they have chatted, a recap's session was
    # just summarised, and something they plan is two days away.
    now = next_local_afternoon(person.time_zone)
    session = make_session(person, "I ran 5 km today", "Well done!")
    ChatSession.objects.filter(pk=session.pk).update(summary="Ran 5 km.", summarised_at=now - timedelta(minutes=5))
    make_memory(person, "race", tier="prospective", category="goal", due_at=now + timedelta(days=2))

    assert run_every_email_planner(now, monkeypatch) == []
    assert not Email.objects.filter(user=person).exists()
    assert len(mail.outbox) == confirmation_mails

    # The account page says so; once they choose, the same planners write to them.
    page.goto(live_app + "/account/")
    expect(page.locator("#next-note")).to_contain_text("You have not chosen how often your coach may email you yet")
    page.get_by_label("Once a week").check()
    page.get_by_role("button", name="Save preferences").click()
    expect(page.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
    # Once their first day and their last message are behind them: no follow-up comes sooner.
    settled(person)
    assert [e.kind for e in Email.objects.filter(pk__in=run_every_email_planner(now, monkeypatch))] == ["check_in"]


@pytest.mark.browser_context_args(timezone_id=CHATHAM)
def test_every_date_and_time_on_the_memory_and_account_pages_is_on_the_persons_clock_and_labelled(
    page: Page, live_app: str
) -> None:
    person = make_user("ada@example.com")
    User.objects.filter(pk=person.pk).update(time_zone=CHATHAM, date_joined=datetime(2026, 1, 14, 11, 0, tzinfo=UTC))
    person.refresh_from_db()
    prefer(person, frequency="weekly")
    # Instants whose day or hour differ between UTC and Chatham (+13:45 in its summer,
    # +12:45 in its winter).
    memory = make_memory(person, "oats", tier="profile", category="habit", summary="Oats every morning")
    Memory.objects.filter(pk=memory.pk).update(
        created_at=datetime(2026, 1, 14, 23, 30, tzinfo=UTC), updated_at=datetime(2026, 3, 1, 10, 30, tzinfo=UTC)
    )
    make_memory(person, "talk", tier="prospective", category="project", due_at=datetime(2031, 7, 1, 20, 0, tzinfo=UTC))
    make_email(
        person,
        period_key="earlier",
        status="sent",
        subject="How did the run go?",
        body="Hi Ada,\n\nHow did the run go?",
        sent_at=datetime(2026, 1, 15, 0, 0, tzinfo=UTC),
    )
    MemoryEvent.objects.create(
        user=person,
        memory_id=memory.pk,
        key=memory.key,
        actor="user",
        action="updated",
        reason="",
        before=memory.snapshot(),
        after=memory.snapshot(),
        created_at=datetime(2026, 6, 30, 23, 0, tzinfo=UTC),
    )
    proposal = proposal_make(user=person, memory=memory, kind="delete", draft=None, reason="no longer true")
    MemoryProposal.objects.filter(pk=proposal.pk).update(created_at=datetime(2026, 2, 10, 12, 0, tzinfo=UTC))
    forgotten = make_memory(person, "old-note", summary="An old note")
    eviction = MemoryEvent.objects.create(
        user=person,
        memory_id=forgotten.pk,
        key=forgotten.key,
        actor="system",
        action="evicted",
        reason="the oldest unprotected memory",
        before=forgotten.snapshot(),
    )
    forgotten.delete()
    evicted_at = timezone.now().replace(hour=11, minute=20, second=0, microsecond=0) - timedelta(days=1)
    MemoryEvent.objects.filter(pk=eviction.pk).update(created_at=evicted_at)
    PrivateTextViewing.objects.create(
        viewer_email="staff@example.com",
        person=person,
        what="a memory",
        reason="a support request",
        viewed_at=datetime(2026, 1, 31, 12, 0, tzinfo=UTC),
    )
    session = make_session(person, "Hello", "Hi!")
    ChatSession.objects.filter(pk=session.pk).update(last_message_at=datetime(2026, 1, 14, 12, 0, tzinfo=UTC))
    sign_in(page, live_app, person)

    page.goto(live_app + "/memories/")
    main = page.locator("main")
    # In UTC these would read 15 Jan 2026, 00:00; added 14 Jan 2026; changed 1 Mar 2026...
    expect(main).to_contain_text("15 Jan 2026, 13:45 Chatham time")
    expect(main).to_contain_text("added 15 Jan 2026")
    expect(main).to_contain_text("changed 2 Mar 2026")
    expect(main).to_contain_text("Due 2 Jul 2031")
    expect(main).to_contain_text("Suggested by your coach on 11 Feb 2026")
    expect(main).to_contain_text("on 1 February")
    assert_every_time_is_in_the_zone(page, CHATHAM)
    assert_no_clock_time_without_its_zone(main.inner_text())

    page.goto(live_app + f"/memories/{memory.pk}/")
    expect(page.locator("main")).to_contain_text("1 Jul 2026, 11:45 Chatham time")
    assert_every_time_is_in_the_zone(page, CHATHAM)
    assert_no_clock_time_without_its_zone(page.locator("main").inner_text())

    page.goto(live_app + "/memories/forgotten/")
    local_eviction = evicted_at.astimezone(ZoneInfo(CHATHAM))
    expect(page.locator("main")).to_contain_text(f"Forgotten on {local_eviction:%-d %b %Y}")
    assert_every_time_is_in_the_zone(page, CHATHAM)

    page.goto(live_app + "/account/")
    main = page.locator("main")
    expect(page.locator("dt:text-is('Member since') + dd")).to_have_text("15 January 2026")
    expect(main).to_contain_text("Chatham time (Pacific/Chatham)")
    expect(page.get_by_role("group", name="Quiet hours, Chatham time")).to_be_visible()
    expect(main).to_contain_text(
        re.compile(r"Your next note from your coach: \w+ \d+ \w+, \d\d:\d\d your time \(Pacific/Chatham\)")
    )
    assert_every_time_is_in_the_zone(page, CHATHAM)

    page.goto(live_app + "/")
    expect(page.get_by_role("complementary", name="Conversations")).to_contain_text("15 Jan")
    assert_every_time_is_in_the_zone(page, CHATHAM)


def assert_every_time_is_in_the_zone(page: Page, zone: str) -> None:
    """Each <time> on the page shows its instant on `zone`'s clock, and names the zone:
    beside a clock time, or in the title of a day."""
    shown = page.eval_on_selector_all("time", "times => times.map(t => [t.dateTime, t.textContent, t.title])")
    assert shown, "no dates on the page"
    label = f"{zone.rsplit('/', 1)[-1]} time"
    for instant, text, title in shown:
        local = datetime.fromisoformat(instant).astimezone(ZoneInfo(zone))
        assert re.search(rf"\b{local.day} ({local:%b}|{local:%B})\b", text), (instant, text)
        if re.search(r"\d\d:\d\d", text):
            assert f"{local:%H:%M} {label}" in " ".join(text.split()), (instant, text)
        else:
            assert f"{local:%H:%M}, {label}" in title, (instant, title)


def assert_no_clock_time_without_its_zone(text: str) -> None:
    for match in re.finditer(r"\b\d{1,2}:\d{2}\b", text):
        assert re.match(r"\s*Chatham time", text[match.end() :]), text[max(0, match.start() - 40) : match.end() + 40]


def test_the_zone_menu_is_searched_by_city_or_country_and_works_as_a_plain_menu(page: Page, live_app: str) -> None:
    person = make_user("ada@example.com")
    sign_in(page, live_app, person)
    page.goto(live_app + "/account/")
    menu = page.get_by_label("Time zone", exact=True)
    search = page.get_by_role("searchbox", name="Search time zones")

    search.fill("norway")
    expect(menu).to_have_value("Europe/Oslo")
    visible = menu.evaluate("select => Array.from(select.options).filter(o => !o.hidden).map(o => o.value)")
    assert visible == ["Europe/Oslo"]
    search.fill("sao paulo")
    expect(menu).to_have_value("America/Sao_Paulo")
    search.fill("nowhere at all")
    expect(page.get_by_role("status").filter(has_text="No time zone matches")).to_be_attached()
    expect(menu).to_have_value("America/Sao_Paulo")
    search.fill("chatham")
    search.press("Enter")
    expect(menu).to_be_focused()
    page.get_by_label("Once a week").check()
    page.get_by_role("button", name="Save preferences").click()
    expect(page.get_by_role("status").filter(has_text="Saved.")).to_be_visible()

    person.refresh_from_db()
    assert person.time_zone == CHATHAM
    # The saved form comes back from htmx with its search box again.
    expect(page.get_by_role("searchbox", name="Search time zones")).to_have_count(1)


def test_the_welcome_form_s_help_is_each_field_s_description(page: Page, live_app: str) -> None:
    person = make_user("new@example.com", onboarded=False)
    sign_in(page, live_app, person)
    page.goto(live_app + "/welcome/")

    expect(page.get_by_label("What would you like to get out of coaching?")).to_have_accessible_description(
        "Your goals, big or small; one a line."
    )
    expect(
        page.get_by_label("Injuries, medical conditions or allergies your coach must know about")
    ).to_have_accessible_description(re.compile(r"^One a line, or separated by semicolons"))
    expect(page.get_by_role("group", name="May your coach email you between sessions?")).to_have_accessible_description(
        re.compile(r"^A short note now and then")
    )
    expect(page.get_by_label("Your time zone")).to_have_accessible_description(re.compile(r"^Found from this device"))
