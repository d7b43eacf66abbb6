"""Everything about a person leaves with the export, and nothing about them stays after
they delete their account: checked model by model, over every model Django knows."""

from __future__ import annotations

import html
import io
import json
import zipfile
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from allauth.account.models import EmailAddress, EmailConfirmation
from django.apps import apps
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import models
from django.test import Client
from django.utils import timezone

from accounts.export import EXPORTED, NOT_EXPORTED
from accounts.models import LoginSession, User
from coach.models import ChatSession, ConversationEmbedding, LookBack, Message
from emails.models import Email, WeeklyEpisodeRequest
from memory.drafts import MemoryDraft
from memory.models import Memory, MemoryOverlap, PrivateTextViewing
from memory.proposals import proposal_make
from memory.services import memory_delete, memory_save
from tests.accounts.staff import signed_in_just_now, with_authenticator
from tests.conftest import PASSWORD, make_user
from tests.emails.factories import prefer
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db


def paths_to_the_user() -> dict[str, list[str]]:
    """Every model whose rows reference a user, directly or through other such models
    (a message through its session), with the lookups that lead from it to the user."""
    user_model = get_user_model()
    paths: dict[type[models.Model], list[str]] = {user_model: ["pk"]}
    changed = True
    while changed:
        changed = False
        for model in apps.get_models(include_auto_created=True):
            for field in model._meta.concrete_fields:
                target = field.related_model if field.is_relation else None
                if target is None or target is model or target not in paths:
                    continue
                via = [field.name if p == "pk" else f"{field.name}__{p}" for p in paths[target]]
                known = paths.setdefault(model, [])
                for path in via:
                    if path not in known and path.count("__") < 3:
                        known.append(path)
                        changed = True
    return {model._meta.label_lower: found for model, found in paths.items()}


def rows_about(user_id: int) -> Iterator[tuple[str, type[models.Model], models.QuerySet]]:
    by_label = {m._meta.label_lower: m for m in apps.get_models(include_auto_created=True)}
    for label, paths in paths_to_the_user().items():
        model = by_label[label]
        for path in paths:
            yield label, model, model._default_manager.filter(**{path: user_id})


# Where each exported model's rows are in the document.
LOCATE: dict[str, Callable[[dict[str, Any]], list[dict[str, Any]]]] = {
    "accounts.user": lambda d: [d["profile"]],
    "account.emailaddress": lambda d: d["email_addresses"],
    "emails.emailpreference": lambda d: [d["email_preferences"]] if d["email_preferences"] else [],
    "memory.memory": lambda d: d["memories"],
    "memory.memoryevent": lambda d: (
        [e for m in d["memories"] for e in m["history"]]
        + [e for gone in d["history_of_memories_no_longer_kept"] for e in gone["history"]]
    ),
    "memory.memoryproposal": lambda d: d["proposals"],
    "coach.chatsession": lambda d: d["chat_sessions"],
    "coach.message": lambda d: [m for s in d["chat_sessions"] for m in s["messages"]],
    "emails.email": lambda d: d["emails"],
    "memory.privatetextviewing": lambda d: d["staff_readings"],
}


def coach_saves(user: User, key: str, summary: str, **provenance: int) -> Memory:
    draft = MemoryDraft(key=key, tier="episodic", category="habit", summary=summary, content=summary)
    return memory_save(user=user, draft=draft, source="coach", actor="coach", **provenance).memory


def a_whole_life(user: User, *, words: str) -> None:
    """A row of every kind the app keeps about a person."""
    session = ChatSession.objects.create(user=user, title=f"{words} session")
    question = Message.objects.create(session=session, role="user", content=f"{words}: my shoulder", status="answered")
    Message.objects.create(
        session=session, role="assistant", content=f"{words}: noted", status="complete", reply_to=question
    )
    shoulder = make_memory(user, "shoulder", source="user", category="injury", summary=f"{words} shoulder")
    coach_saves(user, "oats", f"{words} oats", session_id=session.pk, message_id=question.pk)
    gone = coach_saves(user, "gone", f"{words} gone")
    memory_delete(user=user, memory_id=gone.pk, actor="coach", reason="no longer true")
    proposal_make(
        user=user,
        memory=shoulder,
        kind="update",
        draft=MemoryDraft(key="shoulder", tier="profile", category="injury", summary=f"{words} healed", content=""),
        reason="you said it healed",
    )
    for status in ("sent", "queued"):
        Email.objects.create(
            user=user,
            kind="nudge",
            period_key=f"week-{status}",
            status=status,
            subject=f"{words} {status} email",
            body_text="Hello",
            memory=shoulder,
            session=session,
            sent_at=timezone.now() if status == "sent" else None,
        )
    prefer(user, frequency="off", time_zone="Europe/Helsinki")
    PrivateTextViewing.objects.create(
        person=user, viewer_email="support@example.com", what="memory 1", reason=f"{words} asked for help"
    )


def the_rest(user: User) -> None:
    """Rows about the person that are erased with them but, by review, not exported."""
    address = EmailAddress.objects.get(user=user)
    EmailConfirmation.create(address)
    LogEntry.objects.log_actions(
        user_id=user.pk,
        queryset=[user],
        action_flag=ADDITION,
        change_message="test",
        single_object=True,
    )
    user.groups.add(Group.objects.create(name="staff"))
    user.user_permissions.add(Permission.objects.get(codename="view_memory"))
    WeeklyEpisodeRequest.objects.create(user=user, week_key="week-2026-48")
    first, second = Memory.objects.filter(user=user)[:2]
    MemoryOverlap.objects.create(user=user, memory=first, other=second, similarity=0.9)
    session = ChatSession.objects.filter(user=user).first()
    message = Message.objects.filter(session=session, role="user").first()
    ConversationEmbedding.objects.create(
        user=user, session=session, kind="exchange", message=message, embedding=[1.0, 0.0], embedding_model="m"
    )
    LookBack.objects.create(user=user, message=message, looked_at=session)
    with_authenticator(user)


def keys_in(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {key for item in value.values() for key in keys_in(item)}
    if isinstance(value, list):
        return {key for item in value for key in keys_in(item)}
    return set()


def export(client: Client) -> dict[str, Any]:
    response = client.get("/account/export")
    assert response.status_code == 200
    return json.loads(files_of(response.content)["your-data.json"])


def files_of(download: bytes) -> dict[str, str]:
    """The files of an export's zip by name, each in the one folder the zip holds."""
    with zipfile.ZipFile(io.BytesIO(download)) as archive:
        folders = {name.split("/")[0] for name in archive.namelist()}
        assert len(folders) == 1, folders
        return {name.split("/", 1)[1]: archive.read(name).decode() for name in archive.namelist()}


def test_every_model_about_a_person_is_exported_or_excluded_for_a_stated_reason() -> None:
    found = set(paths_to_the_user())

    neither = found - set(EXPORTED) - set(NOT_EXPORTED)
    assert not neither, f"add these to accounts.export (EXPORTED, or NOT_EXPORTED with a reason): {sorted(neither)}"
    assert not set(EXPORTED) & set(NOT_EXPORTED)
    assert set(EXPORTED) | set(NOT_EXPORTED) <= found, "accounts.export lists models that no longer reference a user"
    assert all(len(reason) > 20 for reason in NOT_EXPORTED.values())
    assert set(LOCATE) == set(EXPORTED)


def test_export_then_delete_the_account_the_export_holds_everything_and_nothing_stays(
    user: User, other_user: User
) -> None:
    a_whole_life(user, words="Ada")
    a_whole_life(other_user, words="Grace")
    the_rest(user)
    client = Client()
    signed_in_just_now(client, user)

    data = export(client)

    rows_before: dict[str, set[int]] = {}
    for label, _model, queryset in rows_about(user.pk):
        rows_before.setdefault(label, set()).update(queryset.values_list("pk", flat=True))
    assert all(rows_before.values()), "the test should hold a row of every model about a person"
    for label in EXPORTED:
        assert {row["id"] for row in LOCATE[label](data)} == rows_before[label], label
    assert "Grace" not in json.dumps(data)

    client.post("/accounts/reauthenticate/", {"password": PASSWORD})
    response = client.post("/account/delete")

    assert response.status_code == 302
    for label, model, queryset in rows_about(user.pk):
        assert not queryset.exists(), f"{label} still references the deleted user"
        assert not model._default_manager.filter(pk__in=rows_before[label]).exists(), label
    assert not any(s.get_decoded().get("_auth_user_id") == str(user.pk) for s in LoginSession.objects.all())
    assert Memory.objects.filter(user=other_user).count() == 2
    assert Message.objects.filter(session__user=other_user).count() == 2
    assert Email.objects.filter(user=other_user).count() == 2


def test_the_export_reads_as_text_with_provenance_and_history(user: User) -> None:
    a_whole_life(user, words="Ada")
    client = Client()
    signed_in_just_now(client, user)

    data = export(client)

    assert data["format"] == "coach-account-export" and data["version"] == 1
    assert "password" not in data["profile"] and data["profile"]["email"] == user.email
    assert "embedding" not in keys_in(data)
    oats = next(m for m in data["memories"] if m["key"] == "oats")
    assert oats["summary"] == "Ada oats" and oats["written_by"] == "your coach wrote this"
    assert oats["session_id"] and oats["message_id"]
    assert [e["action"] for e in oats["history"]] == ["created"]
    assert oats["history"][0]["after"]["summary"] == "Ada oats"
    shoulder = next(m for m in data["memories"] if m["key"] == "shoulder")
    assert shoulder["kept_because"] == "you wrote it"
    gone = data["history_of_memories_no_longer_kept"]
    assert len(gone) == 1 and gone[0]["memory_id"] not in {m["id"] for m in data["memories"]}
    assert [(e["action"], e["key"], e["memory_id"]) for e in gone[0]["history"]] == [
        ("created", "gone", gone[0]["memory_id"]),
        ("deleted", "gone", gone[0]["memory_id"]),
    ]
    assert data["proposals"][0]["memory_key"] == "shoulder"
    assert data["proposals"][0]["proposed"]["summary"] == "Ada healed"
    messages = data["chat_sessions"][0]["messages"]
    assert [m["content"] for m in messages] == ["Ada: my shoulder", "Ada: noted"]
    assert {e["subject"] for e in data["emails"]} == {"Ada sent email", "Ada queued email"}
    assert data["email_preferences"]["frequency"] == "off"
    assert data["profile"]["time_zone"] == "Europe/Helsinki"
    assert data["email_addresses"][0]["email"] == user.email


def test_a_memory_the_person_deleted_leaves_no_text_in_the_export(user: User) -> None:
    memory = make_memory(user, "secret-plan", source="user", summary="Something private")
    client = Client()
    signed_in_just_now(client, user)
    client.post(f"/memories/{memory.pk}/delete")

    data = export(client)

    assert "Something private" not in json.dumps(data) and "secret-plan" not in json.dumps(data)
    [gone] = data["history_of_memories_no_longer_kept"]
    assert gone["memory_id"] == memory.pk
    assert [(e["action"], e["key"], e["before"], e["after"]) for e in gone["history"]] == [
        ("deleted", None, None, None)
    ]


def test_the_export_is_a_fixed_number_of_queries(user: User, django_assert_max_num_queries) -> None:
    for number in range(3):
        a_whole_life(make_user(f"person{number}@example.com"), words=f"Person {number}")
    a_whole_life(user, words="Ada")
    for number in range(20):
        make_memory(user, f"note-{number}", updated_at=timezone.now() - timedelta(minutes=number))
    client = Client()
    signed_in_just_now(client, user)

    with django_assert_max_num_queries(15):
        export(client)


def test_the_download_is_one_zip_of_the_documented_json_and_a_page_of_the_same_data_to_read(user: User) -> None:
    a_whole_life(user, words="Ada")
    make_memory(user, "trip-may", tier="prospective", summary="You're going to Kalymnos in May")
    client = Client()
    signed_in_just_now(client, user)

    response = client.get("/account/export")

    assert response["Content-Type"] == "application/zip"
    files = files_of(response.content)
    assert set(files) == {"README.txt", "your-data.html", "your-data.json"}
    data = json.loads(files["your-data.json"])
    data_sections = set(data) - {"format", "version", "exported_at", "not_included", "sections"}
    assert set(data["sections"]) == data_sections and all(data["sections"].values())
    assert all(f"- {section}: " in files["README.txt"] for section in data_sections)
    page = html.unescape(files["your-data.html"])
    for said in ("Ada shoulder", "Ada oats", "Ada: my shoulder", "Ada: noted", "Ada sent email", "Ada healed"):
        assert said in page, said
    assert "Ada asked for help" in page and "Europe/Helsinki" in page
    assert "You're going to Kalymnos in May" in page and data["memories"][-1]["key"] == "trip-may"
    # A memory's key and the app's field names are the program's, not the person's.
    assert "trip-may" not in page and "session_id" not in page and "claimed_by" not in page


def test_the_page_of_the_export_shows_what_the_person_wrote_as_text_never_as_markup(user: User) -> None:
    session = ChatSession.objects.create(user=user, title="<b>bold</b> title")
    Message.objects.create(session=session, role="user", content="<script>alert(1)</script> & more", status="answered")
    client = Client()
    signed_in_just_now(client, user)

    page = files_of(client.get("/account/export").content)["your-data.html"]

    assert "<script" not in page and "<b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in page and "&lt;b&gt;bold&lt;/b&gt; title" in page
