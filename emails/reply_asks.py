"""What in a drafted email asks the person to answer it by email: nobody reads the replies,
so such a sentence is taken out, and the email links to the chat instead, where the coach
does read what they say (emails/drafting.py)."""

from __future__ import annotations

import re

# Where one sentence ends and the next begins, in the model's plain text.
SENTENCE_END = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)]*\s+")
ASKS_FOR_A_REPLY = re.compile(
    r"^(?:(?:please|just|simply|do|feel free to|go ahead and)[, ]+)*"
    r"(?:reply|respond|write back|answer me|answer this)\b"
    r"|\b(?:hit|send me a|drop me a|shoot me a|a (?:quick |short |brief |one-line |one line )?)reply\b"
    r"|\b(?:reply|respond|write back|answer) (?:to this|to me|with|by email|here|and (?:let|tell))\b"
    r"|\b(?:email|e-mail|write to) me\b|\bdrop me a (?:line|note)\b|\blet me know by (?:email|replying)\b"
    r"|\b(?:my|the) inbox\b",
    re.IGNORECASE,
)


def asks_for_a_reply(sentence: str) -> bool:
    """Whether the sentence asks the person to answer by email."""
    return bool(ASKS_FOR_A_REPLY.search(sentence.strip()))


def without_reply_asks(body: str) -> str:
    """The body with every sentence that asks for an email reply taken out, paragraphs kept;
    a paragraph left empty goes."""
    paragraphs = []
    for paragraph in re.split(r"\n\s*\n", body):
        lines = []
        for line in paragraph.split("\n"):
            kept = [part for part in SENTENCE_END.split(line) if part.strip() and not asks_for_a_reply(part)]
            if kept or not line.strip():
                lines.append(" ".join(part.strip() for part in kept))
        if any(line.strip() for line in lines):
            paragraphs.append("\n".join(line for line in lines if line.strip()))
    return "\n\n".join(paragraphs)
