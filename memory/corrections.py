"""One fact, one text: when a memory's one line changes, its details must not go on saying
the old fact, since the coach reads both (the line in the index, the two in the full note).

Pure: no database. Two writers, two rules:
1. The person corrects the line and leaves details that said something else: they are
   asked whether the details still hold (their words; not ours to drop unasked).
2. The coach changes the line and leaves the old details in place, untouched or with its
   new words appended below them: the old details go, since the change is the fact now.
   What they said stays in the memory's history.
Details that only repeat the old line follow the new line, whoever writes.
"""

from __future__ import annotations

import enum
from dataclasses import replace

from memory.drafts import MemoryDraft, MemoryWriteError


class OldDetails(enum.StrEnum):
    """What a person's correction of the line does with details that said something else."""

    ASK = "ask"
    KEEP = "keep"
    DROP = "drop"


class DetailsMayBeStale(MemoryWriteError):
    """The person gave the memory a new line over details that still say the old one."""

    def __init__(self, details: str) -> None:
        super().__init__("Your details still say what the old line said. Keep them, or drop them?")
        self.details = details


def corrected_by_person(current: MemoryDraft, draft: MemoryDraft, *, old_details: OldDetails) -> MemoryDraft:
    """The person's edit, with the details settled: unchanged details under a new line are
    asked about (DetailsMayBeStale), kept or dropped as they answered."""
    if not _line_changed(current, draft) or _text(draft.content) != _text(current.content):
        return draft
    if _text(current.content) == _text(current.summary) or old_details == OldDetails.DROP:
        return replace(draft, content="")
    if old_details == OldDetails.KEEP:
        return draft
    raise DetailsMayBeStale(current.content)


def changed_by_coach(current: MemoryDraft, draft: MemoryDraft) -> MemoryDraft:
    """The coach's change of the line without its old details: kept, or appended to, they
    would contradict it; only what the coach added stays as details."""
    if not _line_changed(current, draft):
        return draft
    old, new = _text(current.content), _text(draft.content)
    if new == old:
        return replace(draft, content="")
    if old and new.startswith(old):
        return replace(draft, content=new[len(old) :].strip())
    return draft


def _line_changed(current: MemoryDraft, draft: MemoryDraft) -> bool:
    return " ".join(draft.summary.split()) != " ".join(current.summary.split())


def _text(value: str) -> str:
    # Browsers send a textarea's lines with CRLF: the same words must compare equal.
    return value.replace("\r\n", "\n").strip()
