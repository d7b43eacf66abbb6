"""A year of use, for thousands of people: the database bin/bench scale measures in.

Each person has what a year of fortnightly coaching leaves: 26 conversations of 4
exchanges (each ended, summarised, and indexed for the look-back, words and meaning), a
look-back now and then, 64 memories (14 of them weekly episodes, 4 intentions: one open
and months away, one open and close, asked about by a check-in, one done, one dismissed),
their history (each memory's creation, a third of them changed, and 40 notes forgotten
along the way, the text of those forgotten over a month ago gone from it), a nudge a week
and the check-ins, each sent and embedded, and every week with a conversation written up.
Nothing is due: every periodic job finds nothing to do, as in a quiet minute of a
service running for a year.

The people measured are written through the models (their keys, digests and hashed
words are theirs); the others are copies of a template person made in the database, as
bin/bench retrieval makes them (their digests and hashed words are the template's, which
no measured person's query can match). Imported by bench/scale.py once Django is set up.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection, transaction
from psycopg import sql

from accounts.models import User
from coach.exchange_index import exchange_text, exchange_words
from coach.models import ChatSession, ConversationEmbedding, LookBack, Message
from emails.models import Email, EmailPreference, WeeklyEpisodeRequest
from emails.schedule import MIN_GAP
from infra.hashed_words import hashed_words
from memory.models import Memory, MemoryEvent
from offline_coach import bag_of_words_embedding

CONVERSATIONS = 26
EXCHANGES_EACH = 4
NOTES = 46
EPISODES = 14
FORGOTTEN = 40
NUDGES = 52
# Where the people live: planning reads each one's clock.
ZONES = (
    "UTC",
    "Europe/London",
    "Europe/Berlin",
    "Europe/Helsinki",
    "America/New_York",
    "America/Chicago",
    "America/Los_Angeles",
    "America/Sao_Paulo",
    "Asia/Kolkata",
    "Asia/Tokyo",
    "Australia/Sydney",
    "Pacific/Auckland",
)
# The tables a year fills, and so the ones counted when the world is described.
YEAR_TABLES = (User, Memory, MemoryEvent, ChatSession, Message, ConversationEmbedding, LookBack, Email)

WORDS = """
    knee shoulder ankle hip back wrist finger tendon physio rest ice run race marathon tempo
    intervals hills trail pace swim bike climb boulder fingerboard gym squat deadlift press row
    plank core mobility stretch yoga sleep tired energy stress work shift office deadline family
    kids partner holiday trip flight breakfast oats coffee protein vegetables water allergy
    peanuts doctor scan pain sore recovery progress plan week month morning evening weekend club
    friend book chapter talk presentation conference guitar garden dog walk commute rain motivation
    goal habit journal
    """.split()  # noqa: SIM905 - a word list reads best as words


class Writer:
    """Text of a given length, the same for the same seed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def sentence(self, length: int) -> str:
        return " ".join(self.rng.choices(WORDS, k=length)).capitalize() + "."

    def text(self, sentences: int, length: int = 12) -> str:
        return " ".join(self.sentence(length) for _ in range(sentences))


def people_add(first: int, count: int, *, now: datetime, prefix: str = "year") -> list[int]:
    """`count` onboarded people, numbered from `first`, in the zones above in turn, written
    with COPY (no app path writes thousands in the time); their ids, in order."""
    emails = [f"{prefix}-{n}@example.com" for n in range(first, first + count)]
    joined = now - timedelta(days=365)
    with connection.cursor() as cursor:
        with cursor.copy(
            "COPY accounts_user (password, email, name, is_staff, is_active, is_superuser, date_joined, "
            "time_zone, onboarded_at, memory_enabled) FROM STDIN"
        ) as copy:
            for n, email in enumerate(emails, start=first):
                copy.write_row(["!", email, "", False, True, False, joined, ZONES[n % len(ZONES)], joined, True])
        cursor.execute("SELECT id FROM accounts_user WHERE email = ANY(%s) ORDER BY id", [emails])
        return [row[0] for row in cursor.fetchall()]


def year_write(user_ids: Sequence[int], *, now: datetime, seed: int = 48) -> None:
    """A year for each of these people, written through the models."""
    for user_id in user_ids:
        with transaction.atomic():
            _year_of(User.objects.get(pk=user_id), now=now, writer=Writer(seed + user_id))


def _year_of(user: User, *, now: datetime, writer: Writer) -> None:
    zone = ZoneInfo(user.time_zone)
    sessions, said = _conversations(user, now=now, writer=writer)
    memories = _memories(user, now=now, writer=writer, said=said)
    _history(user, memories, now=now, writer=writer)
    _emails(user, memories, now=now, writer=writer)
    # Nudged yesterday: the next is due when the week's gap is over.
    next_nudge = now - timedelta(days=1) + MIN_GAP[EmailPreference.Frequency.WEEKLY]
    EmailPreference.objects.create(user=user, frequency=EmailPreference.Frequency.WEEKLY, nudge_due_at=next_nudge)
    weeks = {_week_key(session.last_message_at.astimezone(zone)) for session in sessions}
    WeeklyEpisodeRequest.objects.bulk_create(
        WeeklyEpisodeRequest(user=user, week_key=week, created_at=now, attempts=1, next_ask_at=now, done_at=now)
        for week in sorted(weeks)
    )


def _week_key(local: datetime) -> str:
    year, week, _ = local.isocalendar()
    return f"week-{year}-{week:02d}"


def _conversations(user: User, *, now: datetime, writer: Writer) -> tuple[list[ChatSession], list[Message]]:
    sessions = []
    for n in range(CONVERSATIONS):
        began = now - timedelta(days=364 - 14 * n, hours=2)
        last = began + timedelta(minutes=5 * (2 * EXCHANGES_EACH - 1))
        sessions.append(
            ChatSession(
                user=user,
                title=writer.sentence(4),
                summary=writer.text(3),
                created_at=began,
                last_message_at=last,
                ended_at=last + timedelta(minutes=40),
                summarised_at=last + timedelta(minutes=41),
                summary_indexed=True,
                prompt_builds=1,
            )
        )
    sessions = ChatSession.objects.bulk_create(sessions)
    said, replies = [], []
    for session in sessions:
        for n in range(EXCHANGES_EACH):
            at = session.created_at + timedelta(minutes=10 * n)
            said.append(
                Message(
                    session=session,
                    role=Message.Role.USER,
                    content=writer.text(2),
                    status=Message.Status.ANSWERED,
                    client_id=uuid.uuid4(),
                    created_at=at,
                    waiting_since=at,
                    attempt=uuid.uuid4(),
                    claimed_at=at,
                    claimed_by="bench:1:year",
                    heartbeat_at=at,
                    indexed=True,
                )
            )
    said = Message.objects.bulk_create(said)
    for message in said:
        replies.append(
            Message(
                session_id=message.session_id,
                role=Message.Role.ASSISTANT,
                content=writer.text(5),
                status=Message.Status.COMPLETE,
                reply_to=message,
                created_at=message.created_at + timedelta(minutes=5),
                prompt_tokens=4200,
                cached_prompt_tokens=3900,
                completion_tokens=120,
            )
        )
    replies = Message.objects.bulk_create(replies)
    model = settings.EMBEDDING_MODEL
    ConversationEmbedding.objects.bulk_create(
        [
            ConversationEmbedding(
                user=user,
                session_id=m.session_id,
                kind=ConversationEmbedding.Kind.EXCHANGE,
                message=m,
                reply=r,
                embedding=bag_of_words_embedding(exchange_text(said=m.content, answered=r.content)),
                embedding_model=model,
                words=hashed_words(user.pk, exchange_words(said=m.content, answered=r.content)),
                embedded_at=r.created_at,
            )
            for m, r in zip(said, replies, strict=True)
        ]
        + [
            ConversationEmbedding(
                user=user,
                session=s,
                kind=ConversationEmbedding.Kind.SUMMARY,
                embedding=bag_of_words_embedding(s.summary),
                embedding_model=model,
                words=hashed_words(user.pk, s.summary),
                text_at=s.summarised_at,
                embedded_at=s.summarised_at,
            )
            for s in sessions
        ]
    )
    LookBack.objects.bulk_create(
        LookBack(
            user=user, message=said[EXCHANGES_EACH * n], looked_at=sessions[n - 1], created_at=sessions[n].created_at
        )
        for n in range(5, CONVERSATIONS, 5)
    )
    return sessions, said


def _memories(user: User, *, now: datetime, writer: Writer, said: list[Message]) -> list[Memory]:
    memories = []
    model = settings.EMBEDDING_MODEL

    def memory(key: str, tier: str, category: str, source: str, made: datetime, **extra: object) -> Memory:
        summary = writer.sentence(8)
        content = writer.text(2)
        learned = said[min(len(said) - 1, int((made - (now - timedelta(days=365))).days / 365 * len(said)))]
        row = Memory(
            user=user,
            key=key,
            tier=tier,
            category=category,
            source=source,
            summary=summary,
            content=content,
            embedding=bag_of_words_embedding(f"{summary}\n{content}"),
            embedding_model=model,
            session_id=learned.session_id if source == "coach" else None,
            message_id=learned.pk if source == "coach" else None,
            created_at=made,
            updated_at=made,
            **extra,
        )
        row.set_key_digest()
        return row

    categories = ("habit", "preference", "goal", "schedule", "background", "project", "feedback")
    for n in range(NOTES):
        made = now - timedelta(days=360 - 7 * n)
        if n < 5:
            memories.append(memory(f"injury-{n + 1}", "profile", "injury", "user", made))
        else:
            tier = "profile" if n % 3 == 0 else "episodic"
            memories.append(memory(f"note-{n}", tier, categories[n % len(categories)], "coach", made))
    for n in range(EPISODES):
        week = now - timedelta(days=7 * (n + 1))
        memories.append(memory(_week_key(week), "episodic", "episode", "coach", week))
    intentions = (
        ("talk", now + timedelta(days=75), "open"),
        ("race", now + timedelta(days=10), "open"),
        ("move", now - timedelta(days=40), "done"),
        ("course", now - timedelta(days=100), "dismissed"),
    )
    for key, due, status in intentions:
        memories.append(
            memory(key, "prospective", "goal", "coach", due - timedelta(days=60), due_at=due, status=status)
        )
    return Memory.objects.bulk_create(memories)


def _history(user: User, memories: list[Memory], *, now: datetime, writer: Writer) -> None:
    # A history holds what happened: nothing after the hour before now.
    latest = now - timedelta(hours=1)
    events = []
    for n, memory in enumerate(memories):
        events.append(
            MemoryEvent(
                user=user,
                memory_id=memory.pk,
                key=memory.key,
                actor="coach" if memory.source == "coach" else "user",
                action=MemoryEvent.Action.CREATED,
                after=memory.snapshot(),
                created_at=min(memory.created_at, latest),
            )
        )
        if n % 3 == 0:
            events.append(
                MemoryEvent(
                    user=user,
                    memory_id=memory.pk,
                    key=memory.key,
                    actor="coach",
                    action=MemoryEvent.Action.UPDATED,
                    before=memory.snapshot(),
                    after=memory.snapshot(),
                    reason=writer.sentence(6),
                    created_at=min(memory.created_at + timedelta(days=3), latest),
                )
            )
    # Notes the eviction policy forgot: ids no row holds any more. Past the restore window
    # their history keeps what happened and when, not the text.
    gone_from = 10**12 + user.pk * 1000
    for n in range(FORGOTTEN):
        evicted = now - timedelta(days=350 - 8 * n)
        recent = now - evicted < timedelta(days=settings.MEMORY_FORGOTTEN_DAYS)
        snapshot = json.dumps({"summary": writer.sentence(8), "content": writer.text(2)}) if recent else None
        for action, at in (
            (MemoryEvent.Action.CREATED, evicted - timedelta(days=60)),
            (MemoryEvent.Action.EVICTED, evicted),
        ):
            events.append(
                MemoryEvent(
                    user=user,
                    memory_id=gone_from + n,
                    key=f"old-{n}" if recent else None,
                    actor="coach" if action == MemoryEvent.Action.CREATED else "system",
                    action=action,
                    after=snapshot if action == MemoryEvent.Action.CREATED else None,
                    before=snapshot if action == MemoryEvent.Action.EVICTED else None,
                    created_at=at,
                )
            )
    MemoryEvent.objects.bulk_create(events)


def _emails(user: User, memories: list[Memory], *, now: datetime, writer: Writer) -> None:
    model = settings.EMBEDDING_MODEL
    rows = []

    def sent(kind: str, period: str, at: datetime, memory: Memory | None = None) -> Email:
        body = writer.text(6)
        return Email(
            user=user,
            kind=kind,
            period_key=period,
            status=Email.Status.SENT,
            subject=writer.sentence(5),
            body_text=body,
            body_html=f"<p>{body}</p>",
            embedding=bag_of_words_embedding(body),
            embedding_model=model,
            memory=memory,
            send_after=at,
            attempts=1,
            provider_message_id=f"<{uuid.uuid4()}@example.com>",
            sent_at=at,
            created_at=at,
        )

    for n in range(NUDGES):
        at = now - timedelta(days=1 + 7 * n)
        year, week, _ = at.isocalendar()
        rows.append(sent(Email.Kind.NUDGE, f"{year}-W{week:02d}", at))
    lead = now + timedelta(days=settings.MEMORY_PROSPECTIVE_LEAD_DAYS)
    for memory in memories:
        # Each intention that came within the lead window was asked about.
        if memory.status in ("open", "done") and memory.due_at is not None and memory.due_at < lead:
            asked = memory.due_at - timedelta(days=20)
            rows.append(sent(Email.Kind.CHECK_IN, f"memory-{memory.pk}", asked, memory))
            Memory.objects.filter(pk=memory.pk).update(asked_at=asked)
    Email.objects.bulk_create(rows)


def year_copy(template_id: int, person_ids: Sequence[int]) -> None:
    """A copy of the template person's year for each of `person_ids`, made by the database
    in one transaction: the rows that others point at (memories, conversations, messages)
    get their new ids first, so every reference lands on the copy's own row."""
    people = list(person_ids)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE clones (person bigint) ON COMMIT DROP")
        cursor.execute("INSERT INTO clones SELECT unnest(%s::bigint[])", [people])
        maps = {
            "memory_map": (Memory, "SELECT id FROM memory_memory WHERE user_id = %(t)s"),
            "session_map": (ChatSession, "SELECT id FROM coach_chatsession WHERE user_id = %(t)s"),
            "message_map": (
                Message,
                "SELECT m.id FROM coach_message m JOIN coach_chatsession s ON s.id = m.session_id "
                "WHERE s.user_id = %(t)s",
            ),
        }
        for name, (model, template_rows) in maps.items():
            table = model._meta.db_table
            cursor.execute(
                sql.SQL(
                    "CREATE TEMP TABLE {name} ON COMMIT DROP AS "
                    "SELECT c.person, r.id AS old, nextval(pg_get_serial_sequence({table}, 'id')) AS new "
                    "FROM clones c, ({rows}) r"
                ).format(name=sql.Identifier(name), table=sql.Literal(table), rows=sql.SQL(template_rows)),
                {"t": template_id},
            )
            cursor.execute(sql.SQL("CREATE INDEX ON {} (old, person)").format(sql.Identifier(name)))
            cursor.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(name)))
        owned = "FROM clones c JOIN {table} r ON r.user_id = %(t)s"
        copies: list[tuple[type, str, dict[str, str]]] = [
            (
                EmailPreference,
                owned,
                {
                    "user_id": "c.person",
                    # Most want a weekly note, some two, a few none, a few never chose.
                    "frequency": "CASE c.person %% 10 WHEN 0 THEN NULL WHEN 1 THEN 'off' "
                    "WHEN 2 THEN 'twice_weekly' WHEN 3 THEN 'twice_weekly' ELSE r.frequency END",
                },
            ),
            (
                ChatSession,
                "FROM session_map sm JOIN {table} r ON r.id = sm.old",
                {"id": "sm.new", "user_id": "sm.person"},
            ),
            (
                Message,
                "FROM message_map mm JOIN {table} r ON r.id = mm.old "
                "JOIN session_map sm ON sm.old = r.session_id AND sm.person = mm.person "
                "LEFT JOIN message_map rm ON rm.old = r.reply_to_id AND rm.person = mm.person",
                {"id": "mm.new", "session_id": "sm.new", "reply_to_id": "rm.new"},
            ),
            (
                Memory,
                "FROM memory_map mm JOIN {table} r ON r.id = mm.old "
                "LEFT JOIN session_map sm ON sm.old = r.session_id AND sm.person = mm.person "
                "LEFT JOIN message_map msg ON msg.old = r.message_id AND msg.person = mm.person",
                {"id": "mm.new", "user_id": "mm.person", "session_id": "sm.new", "message_id": "msg.new"},
            ),
            (
                MemoryEvent,
                owned + " LEFT JOIN memory_map mm ON mm.old = r.memory_id AND mm.person = c.person",
                {"user_id": "c.person", "memory_id": "COALESCE(mm.new, r.memory_id)"},
            ),
            (
                ConversationEmbedding,
                "FROM session_map sm JOIN {table} r ON r.session_id = sm.old "
                "LEFT JOIN message_map a ON a.old = r.message_id AND a.person = sm.person "
                "LEFT JOIN message_map b ON b.old = r.reply_id AND b.person = sm.person",
                {"user_id": "sm.person", "session_id": "sm.new", "message_id": "a.new", "reply_id": "b.new"},
            ),
            (
                LookBack,
                "FROM message_map mm JOIN {table} r ON r.message_id = mm.old "
                "JOIN session_map s ON s.old = r.looked_at_id AND s.person = mm.person",
                {"user_id": "mm.person", "message_id": "mm.new", "looked_at_id": "s.new"},
            ),
            (
                Email,
                owned + " LEFT JOIN memory_map m ON m.old = r.memory_id AND m.person = c.person "
                "LEFT JOIN session_map s ON s.old = r.session_id AND s.person = c.person",
                {"user_id": "c.person", "memory_id": "m.new", "session_id": "s.new"},
            ),
            (WeeklyEpisodeRequest, owned, {"user_id": "c.person"}),
        ]
        for model, source, replaced in copies:
            table = model._meta.db_table
            cursor.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
                [table],
            )
            names = [name for (name,) in cursor.fetchall() if name != "id" or "id" in replaced]
            chosen = ", ".join(replaced.get(name, f"r.{name}") for name in names)
            cursor.execute(
                f"INSERT INTO {table} ({', '.join(names)}) SELECT {chosen} {source.format(table=table)}",
                {"t": template_id},
            )


def settled() -> None:
    """Statistics and visibility as a long-running database has them."""
    with connection.cursor() as cursor:
        for model in (*YEAR_TABLES, EmailPreference, WeeklyEpisodeRequest):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")
        cursor.execute("CHECKPOINT")


def rows_per_table() -> dict[str, int]:
    with connection.cursor() as cursor:
        counts = {}
        for model in YEAR_TABLES:
            cursor.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(model._meta.db_table)))
            counts[model._meta.db_table] = cursor.fetchone()[0]
        return counts
