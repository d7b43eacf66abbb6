"""Search at scale: does a person's search cost what it costs in a small database?

    bin/bench retrieval [--people 10000] [--exchanges 10000] [--runs 40]

Every search goes through memory/retrieval.py: the person's rows ranked by their hashed
words (BM25 in SQL over a GIN index) and by their embeddings (an exact scan of the person's
rows), fused. This builds the databases it measures: first 10 people, then --people in all,
each with 40 memories and 16 exchanges in 4 conversations (every row with its hashed words
and a bag-of-words embedding, 384 wide, served by the offline coach); then one person with
--exchanges exchanges. The people measured are written as the app writes them; the others
are copies of a template person made in the database (their hashed words are the
template's, which no measured person's query can match: each person's words hash apart).
It prints, in the same run:

- a look-back (`search_conversations`) and a `search_memories` of a person with 16
  exchanges, p50 and p95 with 10 people and with --people, and the ratio (target: at most
  1.5x), with their statements and embedding requests;
- for the person with --exchanges exchanges: the look-back fused, by words alone, by
  meaning alone (the exact scan), and the alternatives: an approximate (HNSW) index on the
  embeddings, a partial expression index per model, and BM25 in Python over the person's
  decrypted exchanges; and the HNSW index for the person with 16 exchanges.

A benchmark, not a test: it prints tables. Figures are ratios and times of the same run.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.setup import django_for_benchmarks

django_for_benchmarks()

from django.conf import settings  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402
from psycopg import sql  # noqa: E402

from accounts.models import User  # noqa: E402
from bench.stores import copy_people  # noqa: E402
from bench.timing import measure  # noqa: E402
from coach.exchange_index import exchange_words  # noqa: E402
from coach.look_back import conversations_search  # noqa: E402
from coach.models import ChatSession, ConversationEmbedding, Message  # noqa: E402
from infra import llm  # noqa: E402
from infra.hashed_words import hashed_words, words  # noqa: E402
from infra.llm import Embedding  # noqa: E402
from memory.models import Memory  # noqa: E402
from memory.tools import ToolContext, run_tool  # noqa: E402
from offline_coach import ModelServer, bag_of_words_embedding  # noqa: E402
from offline_coach.bag_of_words import MODEL_NAME  # noqa: E402

MEMORIES_EACH = 40
EXCHANGES_EACH = 16
PER_CONVERSATION = 4
TARGET_RATIO = 1.5
BATCH = 5000
rng = random.Random(44)

# What the made-up people talk about: a few hundred words, some far more common than others.
VOCABULARY = """
    knee shoulder ankle hip back wrist elbow hamstring calf shin foot finger pulley tendon physio rest
    ice run runs running race marathon half tempo intervals hills trail track pace miles kilometres
    long easy swim bike ride climb climbing boulder hangs fingerboard crimp lead rope gym squat
    deadlift press bench pull row lunge plank core mobility stretch yoga pilates sleep tired energy
    stress work shift nurse office meeting deadline family kids partner holiday trip travel flight
    hotel beach mountains lake breakfast lunch dinner oats coffee tea protein carbs vegetables fruit
    water allergy peanuts shellfish gluten dairy doctor appointment scan injury pain sore tight stiff
    swelling recovery progress plan week month monday tuesday wednesday thursday friday saturday sunday
    morning evening night weekend club coach friend book writing chapter story reading talk speech
    presentation conference library music guitar piano garden dog walk cycling commute weather rain
    cold heat snow motivation goal habit journal diary
    """.split()  # noqa: SIM905 - a word list reads best as words
WEIGHTS = [1 / (rank + 1) ** 0.8 for rank in range(len(VOCABULARY))]


def sentence(length: int) -> str:
    return " ".join(rng.choices(VOCABULARY, WEIGHTS, k=length)).capitalize() + "."


def seed(ids: list[int], *, exchanges_each: int, memories_each: int) -> None:
    """Memories, conversations, messages and the look-back's index for each of `ids`, as
    the app writes them (hashed words, embeddings), in batches."""
    now = timezone.now()
    memories: list[Memory] = []
    for user_id in ids:
        for n in range(memories_each):
            text = sentence(rng.randint(4, 12))
            memory = Memory(
                user_id=user_id,
                key=f"note-{n}",
                tier="episodic",
                category="habit",
                source="coach",
                summary=text,
                content=text,
                embedding=bag_of_words_embedding(text),
                embedding_model=MODEL_NAME,
            )
            memory.set_key_digest()
            memories.append(memory)
        if len(memories) >= BATCH:
            Memory.objects.bulk_create(memories)
            memories = []
    Memory.objects.bulk_create(memories)
    for start in range(0, len(ids), max(1, BATCH // max(exchanges_each, 1))):
        _seed_conversations(ids[start : start + max(1, BATCH // max(exchanges_each, 1))], exchanges_each, now)
    settled()


def _seed_conversations(ids: list[int], exchanges_each: int, now: object) -> None:
    with transaction.atomic():
        sessions = ChatSession.objects.bulk_create(
            [
                ChatSession(user_id=user_id, title=sentence(3), summary="", created_at=now, last_message_at=now)
                for user_id in ids
                for _ in range(math.ceil(exchanges_each / PER_CONVERSATION))
            ]
        )
        by_person: dict[int, list[ChatSession]] = {}
        for session in sessions:
            by_person.setdefault(session.user_id, []).append(session)
        said: list[Message] = []
        for user_id in ids:
            for n in range(exchanges_each):
                session = by_person[user_id][n // PER_CONVERSATION]
                at = now - timedelta(minutes=exchanges_each - n)  # type: ignore[operator]
                said.append(
                    Message(session=session, role="user", content=sentence(15), status="answered", created_at=at)
                )
        said = Message.objects.bulk_create(said)
        replies = Message.objects.bulk_create(
            [
                Message(
                    session_id=m.session_id,
                    role="assistant",
                    content=sentence(30),
                    status="complete",
                    reply_to=m,
                    created_at=m.created_at + timedelta(seconds=20),
                )
                for m in said
            ]
        )
        ConversationEmbedding.objects.bulk_create(
            [
                ConversationEmbedding(
                    user_id=session_owner,
                    session_id=m.session_id,
                    kind="exchange",
                    message=m,
                    reply=r,
                    embedding=bag_of_words_embedding(m.content),
                    embedding_model=MODEL_NAME,
                    words=hashed_words(session_owner, exchange_words(said=m.content, answered=r.content)),
                )
                for m, r in zip(said, replies, strict=True)
                for session_owner in [m.session.user_id]
            ]
        )


def clone_people(template: int, ids: list[int]) -> None:
    """Copies of `template`'s memories, conversations, messages and look-back index for each
    of `ids`, made by the database: thousands of people in seconds, not hours."""
    sessions, messages = ChatSession._meta.db_table, Message._meta.db_table
    memories, index = Memory._meta.db_table, ConversationEmbedding._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE clones (person bigint) ON COMMIT DROP")
        cursor.execute("INSERT INTO clones SELECT unnest(%s::bigint[])", [ids])
        cursor.execute(
            sql.SQL(
                "CREATE TEMP TABLE session_map ON COMMIT DROP AS SELECT c.person, s.id AS old, "
                "nextval(pg_get_serial_sequence({name}, 'id')) AS new FROM clones c, {table} s "
                "WHERE s.user_id = %s"
            ).format(name=sql.Literal(sessions), table=sql.Identifier(sessions)),
            [template],
        )
        cursor.execute(
            sql.SQL(
                "CREATE TEMP TABLE message_map ON COMMIT DROP AS SELECT sm.person, m.id AS old, "
                "nextval(pg_get_serial_sequence({name}, 'id')) AS new FROM session_map sm "
                "JOIN {table} m ON m.session_id = sm.old"
            ).format(name=sql.Literal(messages), table=sql.Identifier(messages))
        )
        copy = {
            memories: ("SELECT {columns} FROM clones c, {table} r WHERE r.user_id = %s", {"user_id": "c.person"}),
            sessions: (
                "SELECT {columns} FROM session_map sm JOIN {table} r ON r.id = sm.old",
                {"id": "sm.new", "user_id": "sm.person"},
            ),
            messages: (
                "SELECT {columns} FROM message_map mm JOIN {table} r ON r.id = mm.old "
                "JOIN session_map sm ON sm.old = r.session_id AND sm.person = mm.person "
                "LEFT JOIN message_map rm ON rm.old = r.reply_to_id AND rm.person = mm.person",
                {"id": "mm.new", "session_id": "sm.new", "reply_to_id": "rm.new"},
            ),
            index: (
                "SELECT {columns} FROM session_map sm JOIN {table} r ON r.session_id = sm.old "
                "LEFT JOIN message_map mm ON mm.old = r.message_id AND mm.person = sm.person "
                "LEFT JOIN message_map rm ON rm.old = r.reply_id AND rm.person = sm.person",
                {"user_id": "sm.person", "session_id": "sm.new", "message_id": "mm.new", "reply_id": "rm.new"},
            ),
        }
        for table, (select, replaced) in copy.items():
            cursor.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
                [table],
            )
            names = [name for (name,) in cursor.fetchall() if name != "id" or "id" in replaced]
            chosen = ", ".join(replaced.get(name, f"r.{name}") for name in names)
            statement = f"INSERT INTO {table} ({', '.join(names)}) " + select.format(columns=chosen, table=table)
            cursor.execute(statement, [template] if "%s" in select else [])


def settled() -> None:
    with connection.cursor() as cursor:
        for model in (User, Memory, ChatSession, Message, ConversationEmbedding):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")
        cursor.execute("CHECKPOINT")


def queries_of(person: User, count: int = 20) -> list[str]:
    """Questions a person would ask: a few words from what they said."""
    texts = [m.content for m in Message.objects.filter(session__user=person, role="user")[:count]]
    return [" ".join(rng.sample(words(text), min(3, len(words(text))))) or "knee" for text in texts]


def measured(operation: Callable[[int], None], runs: int) -> tuple[float, float, int]:
    return measure(operation, runs)


@contextmanager
def embedded_here() -> Iterator[None]:
    """Embeddings made in this process, not asked of the model server: what is left is the
    app's own work and its statement, without the network's noise."""
    asked = llm.embed

    def here(texts: list[str]) -> list[Embedding]:
        return [Embedding(vector=bag_of_words_embedding(text), model=MODEL_NAME) for text in texts]

    llm.embed = here
    try:
        yield
    finally:
        llm.embed = asked


def person_searches(person: User, runs: int, server: ModelServer) -> dict[str, tuple[float, float, int, float]]:
    """A look-back and a search_memories of `person`, with the embedding request and with the
    embedding made in the process: p50, p95 ms, statements, embedding requests each."""
    questions = queries_of(person)

    def look_back(run: int) -> None:
        conversations_search(user=person, query=questions[run % len(questions)], limit=None, current_session_id=None)

    def search(run: int) -> None:
        context = ToolContext(user=person)
        context.embedded_by = MODEL_NAME  # the once-a-turn check is the turn's, not the search's
        arguments = {"query": questions[run % len(questions)], "limit": None}
        json.loads(run_tool(context, "search_memories", json.dumps(arguments)))

    results = {}
    for name, operation in (("search_conversations", look_back), ("search_memories", search)):
        before = len(server.embedding_requests())
        p50, p95, statements = measured(operation, runs)
        requests = (len(server.embedding_requests()) - before) / (runs + 2)
        results[name] = (p50, p95, statements, requests)
        with embedded_here():
            p50, p95, statements = measured(operation, runs)
        results[f"{name}, its embedding made in the process"] = (p50, p95, statements, 0.0)
    return results


def exact_and_approximate(person: User, runs: int, *, with_hnsw: bool) -> dict[str, float]:
    """The meaning ranking alone as SQL: the exact scan of the person's rows, and (when the
    index exists) the approximate one through a partial HNSW expression index."""
    vector = "[" + ",".join(map(str, bag_of_words_embedding(queries_of(person, 1)[0]))) + "]"
    table = ConversationEmbedding._meta.db_table
    chosen = sql.SQL("SELECT id FROM {table} WHERE user_id = %s AND embedding_model = %s").format(
        table=sql.Identifier(table)
    )
    exact = sql.SQL("{} ORDER BY embedding <=> %s::vector LIMIT 50").format(chosen)
    statements = {"exact scan of the person's rows": exact}
    if with_hnsw:
        statements["HNSW index (partial, per model), iterative scan"] = sql.SQL(
            "{} ORDER BY (embedding::vector(384)) <=> %s::vector(384) LIMIT 50"
        ).format(chosen)
    found = {}
    with connection.cursor() as cursor:
        cursor.execute("SET hnsw.iterative_scan = relaxed_order")
        for name, statement in statements.items():
            timings = []
            for _ in range(runs + 1):
                started = time.perf_counter()
                cursor.execute(statement, [person.pk, MODEL_NAME, vector])
                cursor.fetchall()
                timings.append((time.perf_counter() - started) * 1000)
            found[name] = statistics.median(timings[1:])
    return found


def python_bm25(person: User, runs: int) -> float:
    """BM25 in Python over the person's decrypted exchanges, the alternative to hashed words
    in SQL: every exchange read and decrypted for each search. p50 ms."""
    questions = queries_of(person)

    def search(run: int) -> None:
        rows = ConversationEmbedding.objects.filter(user=person).select_related("message", "reply")
        documents = [
            (row.pk, Counter(words(exchange_words(said=row.message.content, answered=row.reply.content))))
            for row in rows.only("pk", "message__content", "reply__content")
        ]
        total = len(documents)
        mean = sum(sum(d.values()) for _, d in documents) / max(total, 1)
        asked = set(words(questions[run % len(questions)]))
        frequency = {w: sum(1 for _, d in documents if w in d) for w in asked}
        scores = []
        for pk, document in documents:
            length = sum(document.values())
            score = 0.0
            for word in asked & document.keys():
                idf = math.log(1 + (total - frequency[word] + 0.5) / (frequency[word] + 0.5))
                tf = document[word]
                score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / mean))
            scores.append((score, pk))
        sorted(scores, reverse=True)[:50]

    return measured(search, runs)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--people", type=int, default=10_000)
    parser.add_argument("--exchanges", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    server = ModelServer(scripted=True).start()
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = server.base_url, "bench"
    settings.EMBEDDING_MODEL, settings.LLM_MAX_RETRIES = MODEL_NAME, 0
    try:
        run(args, server)
    finally:
        server.stop()


def run(args: argparse.Namespace, server: ModelServer) -> None:
    started = time.perf_counter()
    first = copy_people_now(0, 10)
    seed(first, exchanges_each=EXCHANGES_EACH, memories_each=MEMORIES_EACH)
    person = User.objects.get(pk=first[0])
    small = person_searches(person, args.runs, server)
    print(f"10 people seeded and measured in {time.perf_counter() - started:.0f} s", flush=True)
    for start in range(10, args.people, 1000):
        ids = copy_people_now(start, min(1000, args.people - start))
        with transaction.atomic():
            clone_people(first[1], ids)
        print(f"  {start + len(ids):,} people", flush=True)
    settled()
    large = person_searches(person, args.runs, server)
    print(f"{args.people:,} people seeded and measured in {time.perf_counter() - started:.0f} s", flush=True)

    print(
        f"\nA person with {EXCHANGES_EACH} exchanges and {MEMORIES_EACH} memories, "
        f"among 10 people and among {args.people:,}"
    )
    print(
        f"| search | 10 people p50 / p95 ms | {args.people:,} people p50 / p95 ms "
        f"| ratio of p50 (target <= {TARGET_RATIO}x) | statements | embedding requests |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name in small:
        a, b = small[name], large[name]
        ratio = b[0] / a[0]
        verdict = "met" if ratio <= TARGET_RATIO else "not met"
        print(
            f"| {name} | {a[0]:.2f} / {a[1]:.2f} | {b[0]:.2f} / {b[1]:.2f} | {ratio:.2f}x, {verdict} "
            f"| {b[2]} | {b[3]:.0f} |"
        )

    heavy_id = copy_people_now(args.people, 1)
    seed(heavy_id, exchanges_each=args.exchanges, memories_each=MEMORIES_EACH)
    heavy = User.objects.get(pk=heavy_id[0])
    questions = queries_of(heavy)
    print(f"\nA person with {args.exchanges:,} exchanges, among {args.people + 1:,} people (look-back p50 ms)")
    print("| how | p50 ms | statements |")
    print("|---|---:|---:|")
    for by, name in (
        ("both", "fused, as the app searches"),
        ("words", "words alone (BM25 over hashed words, in SQL)"),
        ("meaning", "meaning alone (exact scan)"),
    ):

        def look(run: int, by: str = by) -> None:
            conversations_search(
                user=heavy, query=questions[run % len(questions)], limit=None, current_session_id=None, by=by
            )

        p50, _, statements = measured(look, args.runs)
        print(f"| {name} | {p50:.2f} | {statements} |")
    print(f"| BM25 in Python over the decrypted exchanges | {python_bm25(heavy, max(5, args.runs // 8)):.2f} | 1 |")

    exact = exact_and_approximate(heavy, args.runs, with_hnsw=False)
    small_exact = exact_and_approximate(person, args.runs, with_hnsw=False)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE INDEX bench_hnsw ON {ConversationEmbedding._meta.db_table} USING hnsw "
            f"((embedding::vector(384)) vector_cosine_ops) WHERE embedding_model = %s",
            [MODEL_NAME],
        )
        cursor.execute(f"ANALYZE {ConversationEmbedding._meta.db_table}")
    built = time.perf_counter() - started
    approximate = exact_and_approximate(heavy, args.runs, with_hnsw=True)
    small_approximate = exact_and_approximate(person, args.runs, with_hnsw=True)
    print(f"\nThe meaning ranking alone as one statement, top 50 (p50 ms; the HNSW index took {built:.0f} s to build)")
    print(f"| statement | the person with {args.exchanges:,} exchanges | the person with {EXCHANGES_EACH} |")
    print("|---|---:|---:|")
    for name in approximate:
        heavy_ms = approximate[name] if name not in exact else exact[name]
        small_ms = small_approximate[name] if name not in small_exact else small_exact[name]
        print(f"| {name} | {heavy_ms:.2f} | {small_ms:.2f} |")


def copy_people_now(first: int, count: int) -> list[int]:
    raw = connection.connection if connection.connection is not None else None
    if raw is None:
        connection.ensure_connection()
        raw = connection.connection
    with raw.cursor() as cursor:
        return copy_people(
            cursor, [(f"retrieval-{n}@example.com", "UTC") for n in range(first, first + count)], now=timezone.now()
        )


if __name__ == "__main__":
    main()
