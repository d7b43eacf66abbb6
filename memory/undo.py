"""Undoing a person's deletion without the server keeping what they deleted.

A deletion by the person erases the memory and its history's text at once (DESIGN.md
section 8), so an undo cannot be served from anything stored. Instead the deletion hands
back an undo token: the memory as it was, embedding included (so bringing it back calls no
model), encrypted under the field keys and signed with the person's id, the memory's id
and the time of the deletion. The page holds it for the Undo button; the server holds
nothing. Only the person who deleted may use it, and only for MEMORY_UNDO_SECONDS.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import numpy
from django.conf import settings
from django.core import signing
from django.utils.dateparse import parse_datetime

from infra.encryption import DecryptionError, decrypt, encrypt
from memory.drafts import MemoryNotRestorable
from memory.models import Memory

SALT = "memory.undo-delete"
# pgvector keeps float32: packed as such, an embedding comes back bit for bit.
EMBEDDING_DTYPE = "<f4"


def undo_minutes() -> int:
    """How long a deletion can be undone, in whole minutes, as a person is told it."""
    return max(1, settings.MEMORY_UNDO_SECONDS // 60)


class UndoRefused(MemoryNotRestorable):
    """An undo that cannot be applied; the message says why, to the person."""


@dataclass(frozen=True)
class DeletedMemory:
    """Everything a deleted memory was, for its undo: every column of its row."""

    memory_id: int
    user_id: int
    key: str
    tier: str
    category: str
    source: str
    summary: str
    content: str
    due_at: str | None
    status: str
    raised_at: str | None
    session_id: int | None
    message_id: int | None
    version: int
    created_at: str
    updated_at: str
    embedding: str | None
    embedding_model: str
    deleted_at: str
    # Last, with defaults: an undo token sealed before these columns existed still opens.
    due_month_only: bool = False
    asked_at: str | None = None

    @classmethod
    def of(cls, memory: Memory, *, deleted_at: datetime) -> DeletedMemory:
        """The memory as it is now; its row must have been read with its embedding."""
        embedding = None
        if memory.embedding is not None:
            packed = numpy.asarray(memory.embedding, dtype=EMBEDDING_DTYPE).tobytes()
            embedding = base64.b64encode(packed).decode()
        return cls(
            memory_id=memory.pk,
            user_id=memory.user_id,
            key=memory.key,
            tier=memory.tier,
            category=memory.category,
            source=memory.source,
            summary=memory.summary,
            content=memory.content,
            due_at=_iso(memory.due_at),
            status=memory.status,
            raised_at=_iso(memory.raised_at),
            session_id=memory.session_id,
            message_id=memory.message_id,
            version=memory.version,
            created_at=memory.created_at.isoformat(),
            updated_at=memory.updated_at.isoformat(),
            embedding=embedding,
            embedding_model=memory.embedding_model,
            deleted_at=deleted_at.isoformat(),
            due_month_only=memory.due_month_only,
            asked_at=_iso(memory.asked_at),
        )

    @property
    def deleted_on(self) -> datetime:
        return _datetime(self.deleted_at)

    def row(self) -> Memory:
        """The memory's row as it was, unsaved, under its old id."""
        return Memory(
            pk=self.memory_id,
            user_id=self.user_id,
            key=self.key,
            tier=self.tier,
            category=self.category,
            source=self.source,
            summary=self.summary,
            content=self.content,
            due_at=_datetime(self.due_at) if self.due_at else None,
            due_month_only=self.due_month_only,
            status=self.status,
            raised_at=_datetime(self.raised_at) if self.raised_at else None,
            asked_at=_datetime(self.asked_at) if self.asked_at else None,
            session_id=self.session_id,
            message_id=self.message_id,
            version=self.version,
            created_at=_datetime(self.created_at),
            updated_at=_datetime(self.updated_at),
            embedding=_vector(self.embedding),
            embedding_model=self.embedding_model,
        )


def undo_token(deleted: DeletedMemory) -> str:
    """The undo token of a deletion: for the page, never for the server to keep."""
    sealed = encrypt(json.dumps(asdict(deleted), ensure_ascii=False))
    # The ids and the time stay readable (signed, not secret), so a refusal can say why.
    moment = int(deleted.deleted_on.timestamp())
    return signing.Signer(salt=SALT).sign(f"{deleted.user_id}.{deleted.memory_id}.{moment}.{sealed}")


def deleted_memory_from_token(token: str, *, user_id: int, now: datetime) -> DeletedMemory:
    """What `token` says was deleted, if the person `user_id` may still undo it (UndoRefused
    otherwise, with the reason in words)."""
    try:
        value = signing.Signer(salt=SALT).unsign(token.strip())
        owner, memory_id, moment, sealed = value.split(".", 3)
        owner_id, moment_seconds = int(owner), int(moment)
        int(memory_id)
    except (signing.BadSignature, ValueError):
        raise UndoRefused(
            "This undo is damaged, so nothing was restored. Reload the page to see your memories."
        ) from None
    if owner_id != user_id:
        raise UndoRefused("This undo belongs to another account, so nothing was restored.")
    minutes = undo_minutes()
    if now.timestamp() - moment_seconds > settings.MEMORY_UNDO_SECONDS:
        raise UndoRefused(
            f"Too late to undo: a deletion can be undone for {minutes} minute{'s' if minutes != 1 else ''}, "
            "and this memory is gone for good."
        )
    try:
        fields: dict[str, Any] = json.loads(decrypt(sealed))
        deleted = DeletedMemory(**fields)
    except (DecryptionError, ValueError, TypeError):
        raise UndoRefused("This undo can no longer be read, so nothing was restored.") from None
    if deleted.user_id != owner_id or str(deleted.memory_id) != memory_id:
        raise UndoRefused("This undo is damaged, so nothing was restored. Reload the page to see your memories.")
    return deleted


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _datetime(value: str) -> datetime:
    parsed = parse_datetime(value)
    if parsed is None:
        raise ValueError(value)
    return parsed


def _vector(packed: str | None) -> numpy.ndarray | None:
    if packed is None:
        return None
    return numpy.frombuffer(base64.b64decode(packed), dtype=EMBEDDING_DTYPE).astype(numpy.float32)
