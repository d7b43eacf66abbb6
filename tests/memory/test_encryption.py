"""Memory text is encrypted at rest, rotates to new keys, and never comes back as ciphertext."""

from __future__ import annotations

import io

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import FieldError
from django.core.management import call_command
from django.db import connection

from accounts.models import User
from coach.look_back import conversations_search, exchanges_index
from infra.encryption import DecryptionError
from memory.models import Memory, MemoryEvent
from memory.selectors import memories_by_similarity
from tests.coach.factories import make_session
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db


def raw_row(memory: Memory) -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT summary, content FROM memory_memory WHERE id = %s", [memory.pk])
        return cursor.fetchone()


def test_raw_sql_shows_no_plaintext(user: User) -> None:
    memory = make_memory(user, "left-shoulder", summary="Bad left shoulder", content="No overhead pressing")

    summary, content = raw_row(memory)

    assert "shoulder" not in summary and "pressing" not in content
    assert Memory.objects.get(pk=memory.pk).content == "No overhead pressing"


def test_the_same_text_encrypts_differently_each_time(user: User) -> None:
    first = make_memory(user, "a", summary="Same words", content="Same words")
    second = make_memory(user, "b", summary="Same words", content="Same words")

    assert raw_row(first) != raw_row(second)


def test_a_value_no_key_can_decrypt_raises_instead_of_showing_ciphertext(user: User, settings) -> None:
    memory = make_memory(user, "left-shoulder")
    settings.FIELD_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]

    with pytest.raises(DecryptionError):
        Memory.objects.get(pk=memory.pk)


def test_text_cannot_be_looked_up_in_sql(user: User) -> None:
    with pytest.raises(FieldError):
        list(Memory.objects.filter(content="No overhead pressing"))
    assert list(Memory.objects.filter(content__isnull=True)) == []


def test_rotation_re_encrypts_everything_under_the_new_key(user: User, settings) -> None:
    old_key = settings.FIELD_ENCRYPTION_KEYS[0]
    memory = make_memory(user, "left-shoulder", summary="Bad left shoulder", content="No overhead pressing")
    MemoryEvent.objects.create(
        user=user, memory_id=memory.pk, key=memory.key, actor="user", action="created", after="{}"
    )
    new_key = Fernet.generate_key().decode()
    settings.FIELD_ENCRYPTION_KEYS = [new_key, old_key]

    call_command("rotate_encryption_keys", "--batch-size", "1", stdout=io.StringIO())

    settings.FIELD_ENCRYPTION_KEYS = [new_key]
    assert Memory.objects.get(pk=memory.pk).content == "No overhead pressing"
    # Keys are encrypted too, and still found by their digest.
    assert Memory.objects.keyed(user.pk, "left-shoulder").get().pk == memory.pk
    event = MemoryEvent.objects.get(memory_id=memory.pk)
    assert (event.after, event.key) == ("{}", "left-shoulder")


def test_rotation_stops_with_a_clear_error_when_an_old_key_is_missing(user: User, settings) -> None:
    make_memory(user, "left-shoulder")
    settings.FIELD_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]

    with pytest.raises(Exception, match="is an old key missing"):
        call_command("rotate_encryption_keys")


def test_a_new_lookup_key_hashes_every_word_again_so_searches_by_words_still_find(
    user: User, model_server, settings
) -> None:
    make_memory(user, "finger", summary="A2 pulley injury, no max hangs")
    session = make_session(user, "I strained my A2 pulley on the fingerboard", "No max hangs for now.")
    exchanges_index(user_id=user.pk)
    settings.FIELD_LOOKUP_KEY = "a-new-lookup-key-for-this-test-" + "z" * 20

    def found_by_words() -> tuple[bool, bool]:
        memories = memories_by_similarity(user=user, vector=None, model="", text="pulley", limit=5)
        memory = any(m.why.by_words for m in memories)
        looked = conversations_search(user=user, query="pulley", limit=None, current_session_id=None, by="words")
        return memory, any(item.session_id == session.pk for item in looked)

    # Hashed under the old key, the words no longer match a query hashed under the new one.
    assert found_by_words() == (False, False)

    printed = io.StringIO()
    call_command("rotate_encryption_keys", "--batch-size", "1", stdout=printed)

    assert found_by_words() == (True, True)
    assert "1 memories' words hashed again" in printed.getvalue()
    assert "1 exchanges' and summaries' words hashed again" in printed.getvalue()
