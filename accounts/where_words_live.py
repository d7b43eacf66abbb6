"""Where a person's words live, and which way of forgetting reaches each place (DESIGN.md
section 8).

One list, read aloud: every column that holds what a person wrote or said, or something
derived from it (an embedding, a keyed hash, a summary the model wrote of it), and every
place outside a table where their words go (Redis, the export, what a search returns, the
next request the model receives). Each place names the ways of forgetting that reach it:
a deletion that takes the words out of it, or a rule that keeps them from ever getting
there (what is said while memory is off, a conversation not remembered).

A test compares COLUMNS and NO_WORDS with the database's own columns: a column added to
any table must be put on one list or the other. A test for each way of forgetting looks
for a unique phrase in every place below after it (tests/forgetting.py) and fails naming
the place it was found in, unless the way is not listed as reaching it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Way(StrEnum):
    """The ways a person's words are forgotten, or kept from being remembered."""

    MEMORY_DELETED = "the person deletes a memory (or confirms the coach's suggestion to)"
    MEMORIES_DELETED_ALL = "the person deletes all their memories"
    SUMMARY_DELETED = "the person deletes a conversation's summary"
    CONVERSATION_DELETED = "the person deletes a conversation"
    MESSAGE_EDITED = "the person edits their last message (its earlier words, and the answers to them)"
    SAID_WITH_MEMORY_OFF = "the person says something while their memory is off"
    NOT_REMEMBERED = "the person holds a temporary conversation (not remembered): deleted when they leave it or it ends"
    ACCOUNT_ERASED = "the person erases their account"
    UNDO_VOIDED = "an undo token is voided (delete all, or its minutes ran out)"


EVERY_WAY = frozenset(Way)
# A memory's words: deleting it, or all, or the account; a voided undo never brings them back.
_MEMORY = frozenset({Way.MEMORY_DELETED, Way.MEMORIES_DELETED_ALL, Way.ACCOUNT_ERASED, Way.UNDO_VOIDED})
# Words that never reach anything the coach keeps or makes of a conversation.
_NEVER_KEPT = frozenset({Way.SAID_WITH_MEMORY_OFF, Way.NOT_REMEMBERED})
# What the coach makes of a conversation (its summary, the look-back's vectors). An edit
# reaches them too: only a conversation under way is edited, never yet summarised.
_OF_A_CONVERSATION = (
    frozenset({Way.SUMMARY_DELETED, Way.CONVERSATION_DELETED, Way.ACCOUNT_ERASED, Way.MESSAGE_EDITED}) | _NEVER_KEPT
)
# What is drawn on both (the emails, the kept prompt that quotes them).
_DRAWN_ON_BOTH = _OF_A_CONVERSATION | {Way.MEMORIES_DELETED_ALL}
# The conversation itself, its words as said: deleting it (or the account) reaches it, an
# edit the words it replaces, and a temporary conversation is deleted when it is left or
# ends (coach/temporary.py).
_CONVERSATION = frozenset({Way.CONVERSATION_DELETED, Way.NOT_REMEMBERED, Way.ACCOUNT_ERASED, Way.MESSAGE_EDITED})
_ACCOUNT = frozenset({Way.ACCOUNT_ERASED})


@dataclass(frozen=True)
class Place:
    name: str
    holds: str
    reached_by: frozenset[Way]


# Every column (table.column) that holds a person's words or something derived from them.
_MEMORY_TEXT = _MEMORY | _NEVER_KEPT
COLUMNS = (
    Place("memory_memory.key", "the memory's name (a neutral one for what they wrote or anything protected)", _MEMORY),
    Place("memory_memory.key_digest", "a keyed hash of the memory's name, to find it", _MEMORY),
    Place("memory_memory.summary", "the memory's one line", _MEMORY_TEXT),
    Place("memory_memory.content", "the memory's whole note (a weekly episode's text too)", _MEMORY_TEXT),
    Place("memory_memory.embedding", "the memory's text, embedded", _MEMORY_TEXT),
    Place("memory_memory.words", "keyed hashes of the memory's words, to find it by them", _MEMORY_TEXT),
    Place("memory_memoryevent.key", "a memory's name in its history", _MEMORY),
    Place("memory_memoryevent.reason", "why a memory changed, in the writer's words", _MEMORY_TEXT),
    Place("memory_memoryevent.before", "a memory as it was before a change (an evicted one, to restore)", _MEMORY_TEXT),
    Place("memory_memoryevent.after", "a memory as it became", _MEMORY_TEXT),
    Place("memory_memoryproposal.proposed", "a change the coach or staff suggested", _MEMORY_TEXT),
    Place("memory_memoryproposal.reason", "why it was suggested", _MEMORY_TEXT),
    Place(
        "coach_chatsession.title",
        "a conversation's title: its first message's first line (never a temporary one's)",
        _CONVERSATION,
    ),
    Place("coach_chatsession.summary", "what the coach kept of an ended conversation", _OF_A_CONVERSATION),
    Place(
        "coach_chatsession.prompt",
        "a conversation's kept system prompt: the memory block and the emails lately sent",
        _MEMORY | _DRAWN_ON_BOTH,
    ),
    Place("coach_message.content", "what the person and the coach said", _CONVERSATION),
    Place(
        "coach_conversationembedding.embedding",
        "exchanges and summaries embedded, for the look-back",
        _OF_A_CONVERSATION,
    ),
    Place(
        "coach_conversationembedding.words",
        "keyed hashes of the words of exchanges and summaries, for the look-back",
        _OF_A_CONVERSATION,
    ),
    # A check-in is drawn on one memory and is withdrawn with it; a nudge quoting several
    # keeps its words until all memories are deleted.
    Place("emails_email.subject", "a follow-up's subject, queued or sent", _DRAWN_ON_BOTH),
    Place("emails_email.body_text", "a follow-up's text, queued or sent", _DRAWN_ON_BOTH),
    Place("emails_email.body_html", "the same, as HTML", _DRAWN_ON_BOTH),
    Place("emails_email.embedding", "a follow-up's text embedded, so no two read alike", _DRAWN_ON_BOTH),
    Place("emails_outgoingmail.to", "an account email's address, until it is sent", _ACCOUNT),
    Place("emails_outgoingmail.subject", "an account email (sign-up, password reset)", _ACCOUNT),
    Place("emails_outgoingmail.body_text", "the same", _ACCOUNT),
    Place("emails_outgoingmail.body_html", "the same", _ACCOUNT),
    Place("accounts_user.email", "the sign-in address", _ACCOUNT),
    Place("accounts_user.name", "the name the person gave", _ACCOUNT),
    Place("account_emailaddress.email", "their addresses, confirmed or not", _ACCOUNT),
    Place("django_session.session_data", "a signed-in browser's session: their id", _ACCOUNT),
    Place("accounts_login_session.session_data", "the same, with the session's person", _ACCOUNT),
)

# Places outside the tables. Redis is read in every one of its databases.
REDIS = Place(
    "redis",
    "each reply's stream kept for a reload (the coach's words, cues naming memories and "
    "conversations), stop flags, rate-limit counters keyed by id or a hash of the address, "
    "the pages open of a temporary conversation (tokens only)",
    frozenset(
        {
            Way.MEMORY_DELETED,
            Way.MEMORIES_DELETED_ALL,
            Way.CONVERSATION_DELETED,
            Way.NOT_REMEMBERED,
            Way.ACCOUNT_ERASED,
            Way.MESSAGE_EDITED,
        }
    ),
)
EXPORT = Place(
    "the export",
    "the person's download of everything the app holds about them (a zip: the JSON and the page of it)",
    _MEMORY
    | {Way.SUMMARY_DELETED, Way.CONVERSATION_DELETED, Way.NOT_REMEMBERED, Way.ACCOUNT_ERASED, Way.MESSAGE_EDITED},
)
SEARCH_MEMORIES = Place("search_memories", "what the coach finds in the person's memories", _MEMORY_TEXT)
LOOK_BACK = Place(
    "search_conversations",
    "what the coach finds in the person's past conversations (the look-back)",
    _OF_A_CONVERSATION,
)
NEXT_REQUEST_NEW = Place(
    "the next request, in a new conversation",
    "what the model is sent when the person starts a conversation: instructions, memories, emails",
    _MEMORY | _DRAWN_ON_BOTH,
)
NEXT_REQUEST_OPEN = Place(
    "the next request, in each open conversation",
    "what the model is sent at the next turn of a conversation under way: its kept prompt, "
    "the notes of what changed since, its own history",
    _MEMORY
    | {
        Way.MEMORIES_DELETED_ALL,
        Way.SUMMARY_DELETED,
        Way.CONVERSATION_DELETED,
        Way.NOT_REMEMBERED,
        Way.ACCOUNT_ERASED,
        Way.MESSAGE_EDITED,
    },
)
UNDO_TOKEN = Place(
    "an undo token",
    "a deleted memory, sealed under the server's key, held by the person's page for "
    "MEMORY_UNDO_SECONDS; void once they delete all",
    frozenset({Way.UNDO_VOIDED, Way.MEMORIES_DELETED_ALL, Way.ACCOUNT_ERASED}),
)
ELSEWHERE = (REDIS, EXPORT, SEARCH_MEMORIES, LOOK_BACK, NEXT_REQUEST_NEW, NEXT_REQUEST_OPEN, UNDO_TOKEN)
PLACES = COLUMNS + ELSEWHERE

# Columns of a text, JSON, binary or vector type reviewed to hold none of a person's words.
NO_WORDS = {
    "accounts_user.password": "a password hash",
    "accounts_user.time_zone": "a time-zone name from the zone database",
    "accounts_login_session.session_key": "a random key",
    "django_session.session_key": "a random key",
    "account_emailconfirmation.key": "a random confirmation key",
    "auth_group.name": "staff groups",
    "auth_permission.codename": "the app's permissions",
    "auth_permission.name": "the app's permissions",
    "django_admin_log.object_id": "an id",
    "django_admin_log.object_repr": "what objects print: ids and kinds, never text (their __str__)",
    "django_admin_log.change_message": "the names of the fields staff changed",
    "django_content_type.app_label": "the app's models",
    "django_content_type.model": "the app's models",
    "django_migrations.app": "the schema's history",
    "django_migrations.name": "the schema's history",
    "mfa_authenticator.type": "which kind of second factor",
    "mfa_authenticator.data": "a second factor's secrets: keys, never words",
    "coach_chatsession.prompt_nonce": "a random nonce",
    "coach_chatsession.prompt_version": "a hash of the instructions",
    "coach_chatsession.prompt_built_because": "one of the app's own reasons",
    "coach_chatsession.prompt_cleared_because": "one of the app's own reasons",
    "coach_conversationembedding.embedding_model": "a model's name",
    "coach_conversationembedding.kind": "exchange or summary",
    "coach_message.role": "user or assistant",
    "coach_message.status": "where the answer is",
    "coach_message.claimed_by": "which process answers it",
    "coach_message.error": "the app's own words for what went wrong",
    "emails_email.kind": "which kind of email",
    "emails_email.period_key": "when it is for, or which conversation's id",
    "emails_email.status": "where the email is",
    "emails_email.embedding_model": "a model's name",
    "emails_email.claimed_by": "which process sends it",
    "emails_email.provider_message_id": "the Message-ID made for it",
    "emails_email.error": "the app's own words for why it failed or was skipped",
    "emails_emailpreference.frequency": "a choice",
    "emails_outgoingmail.to_digest": "a keyed hash of the address, to find its mail on erasure",
    "emails_outgoingmail.from_email": "the app's sending address",
    "emails_outgoingmail.status": "where the mail is",
    "emails_outgoingmail.error": "the app's own words for why it failed",
    "emails_outgoingmail.message_id": "the Message-ID made for it",
    "emails_outgoingmail.claimed_by": "which process sends it",
    "emails_weeklyepisoderequest.week_key": "which week",
    "emails_weeklyepisoderequest.error": "the app's own words for why it failed",
    "memory_memory.tier": "a choice",
    "memory_memory.category": "a choice",
    "memory_memory.source": "who wrote it",
    "memory_memory.imported_from": "which assistant an import came from, a name from the import page's list",
    "memory_memory.status": "an intention's state",
    "memory_memory.embedding_model": "a model's name",
    "memory_memoryevent.action": "what happened",
    "memory_memoryevent.actor": "who did it",
    "memory_memoryproposal.kind": "update or delete",
    "memory_memoryproposal.status": "where the suggestion is",
    "memory_memoryproposal.suggested_by": "coach or staff",
    "memory_privatetextviewing.kind": "read or changed",
    "memory_privatetextviewing.what": "which kind of record staff opened (never its text)",
    "memory_privatetextviewing.reason": "the staff member's own reason",
    "memory_privatetextviewing.viewer_email": "the staff member's address",
    "memory_readuntil.reader": "the name of a periodic job",
}


def places_reached_by(way: Way) -> frozenset[str]:
    """The names of the places `way` takes the person's words out of (or keeps them from)."""
    return frozenset(place.name for place in PLACES if way in place.reached_by)
