"""Looking for a person's words in every place they can live (accounts/where_words_live.py).

`places_holding(phrase, person)` reads each place on the list the way an attacker with the
database, Redis and the person's session would, and names those where `phrase` turns up:
every text, JSON and binary column of every table, raw, with what is encrypted decrypted;
every vector column, compared with the phrase's own embedding (the tests' bag-of-words
model: a text that holds the phrase's rare words points towards it); every column of
hashed words, searched for a row of the person's holding every word of the phrase, hashed
as the app hashes that person's words; every key of every
Redis database; the person's export; a `search_memories` and a look-back for the phrase;
and the next request the model receives, in a new conversation and in each one under way.
`assert_forgotten` fails naming each place a way of forgetting claims to reach and does not.
"""

from __future__ import annotations

import html
import json
import math

import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone
from psycopg import sql

from accounts.export_archive import account_export_files
from accounts.models import User
from accounts.where_words_live import (
    EXPORT,
    LOOK_BACK,
    NEXT_REQUEST_NEW,
    NEXT_REQUEST_OPEN,
    REDIS,
    SEARCH_MEMORIES,
    Way,
    places_reached_by,
)
from coach.look_back import LOOK_BACK_TOOL
from coach.models import ChatSession
from coach.services import message_post, session_start
from coach.turn import turn_start
from infra.encryption import DecryptionError, decrypt
from infra.hashed_words import query_words
from memory.tools import ToolContext, run_tool
from offline_coach import ModelServer
from offline_coach.bag_of_words import bag_of_words_embedding, words

TEXT_TYPES = ("text", "character varying", "jsonb", "json", "bytea")
# How near a stored vector must point to the phrase's to count as made from it: the phrase's
# rare words in a text of up to about a hundred other words still reach this; unrelated
# texts stay well below (measured: under 0.1 for the tests' texts).
VECTOR_NEAR = 0.18
TURN_SECONDS = 30


def places_holding(phrase: str, person: User, *, model_server: ModelServer) -> list[str]:
    """The names of the places (as accounts/where_words_live.py names them) holding `phrase`."""
    needle = phrase.lower()
    found = [*_columns_holding(needle), *_vectors_near(phrase), *_hashed_words_holding(phrase, person)]
    if needle in _redis_contents().lower():
        found.append(REDIS.name)
    if User.objects.filter(pk=person.pk).exists():
        person.refresh_from_db()
        # Every file of the download: the JSON and the page of it (its text as a browser shows it).
        exported = account_export_files(user=person, now=timezone.now()).values()
        if any(needle in html.unescape(text).lower() for text in exported):
            found.append(EXPORT.name)
        found += _searches_holding(needle, phrase, person)
        found += _next_requests_holding(needle, person, model_server)
    return found


def assert_forgotten(phrase: str, person: User, *, way: Way, model_server: ModelServer) -> None:
    """Fail naming every place `way` is listed as reaching that still holds `phrase`."""
    reached = places_reached_by(way)
    assert reached, f"nothing on the list is reached by {way}"
    still = [place for place in places_holding(phrase, person, model_server=model_server) if place in reached]
    assert not still, f"after {way.name}, {phrase!r} is still in: {', '.join(still)}"


def database_columns() -> set[str]:
    """Every text, JSON, binary and vector column of the database, as table.column."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND (data_type = ANY(%s) OR udt_name IN ('vector', 'tsvector'))",
            [list(TEXT_TYPES)],
        )
        return {f"{table}.{column}" for table, column in cursor.fetchall()}


def _columns_holding(needle: str) -> list[str]:
    found = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND data_type = ANY(%s)",
            [list(TEXT_TYPES)],
        )
        for table, column, data_type in cursor.fetchall():
            value = (
                sql.Identifier(column)
                if data_type != "bytea"
                else sql.SQL("encode({}, 'escape')").format(sql.Identifier(column))
            )
            cursor.execute(
                sql.SQL("SELECT {}::text FROM {} WHERE {} IS NOT NULL").format(
                    value, sql.Identifier(table), sql.Identifier(column)
                )
            )
            if any(needle in _readable(raw).lower() for (raw,) in cursor.fetchall()):
                found.append(f"{table}.{column}")
    return found


def _readable(raw: str) -> str:
    if raw.startswith("gAAAAA"):
        try:
            return decrypt(raw)
        except DecryptionError:
            return raw
    return raw


def _vectors_near(phrase: str) -> list[str]:
    assert settings.EMBEDDING_MODEL == "bag-of-words", "vectors are searched for the phrase by its bag of words"
    assert len(set(words(phrase))) >= 3, "a phrase of at least three rare words is found in a vector"
    target = bag_of_words_embedding(phrase)
    found = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND udt_name = 'vector'"
        )
        for table, column in cursor.fetchall():
            cursor.execute(
                sql.SQL("SELECT {}::text FROM {} WHERE {} IS NOT NULL").format(
                    sql.Identifier(column), sql.Identifier(table), sql.Identifier(column)
                )
            )
            for (raw,) in cursor.fetchall():
                if _cosine(json.loads(raw), target) >= VECTOR_NEAR:
                    found.append(f"{table}.{column}")
                    break
    return found


def _hashed_words_holding(phrase: str, person: User) -> list[str]:
    every_word = " & ".join(query_words(person.pk, phrase))
    found = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND udt_name = 'tsvector'"
        )
        for table, column in cursor.fetchall():
            cursor.execute(
                sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE user_id = %s AND {} @@ %s::tsquery)").format(
                    sql.Identifier(table), sql.Identifier(column)
                ),
                [person.pk, every_word],
            )
            if cursor.fetchone()[0]:
                found.append(f"{table}.{column}")
    return found


def _cosine(a: list[float], b: list[float]) -> float:
    if len(a) != len(b):
        return 0.0
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norms if norms else 0.0


def _redis_contents() -> str:
    """Every key of every Redis database the app uses, and its value, as text.

    Only this test process's databases: under pytest-xdist another worker's hold its own
    tests' phrases, which this test never wrote."""
    server = settings.REDIS_URL.rsplit("/", 1)[0]
    locations = {settings.REDIS_URL, settings.CACHES["default"]["LOCATION"], settings.CELERY_BROKER_URL}
    databases = sorted({int(location.rsplit("/", 1)[1]) for location in locations})
    contents = []
    for database in databases:
        client = redis.Redis.from_url(f"{server}/{database}")
        read = {
            b"stream": lambda key, client=client: client.xrange(key),
            b"string": client.get,
            b"hash": client.hgetall,
            b"list": lambda key, client=client: client.lrange(key, 0, -1),
            b"set": client.smembers,
            b"zset": lambda key, client=client: client.zrange(key, 0, -1),
        }
        try:
            for key in client.scan_iter():
                # A key that expires between the scan and its read is of type "none".
                value = read.get(client.type(key), lambda key: None)(key)
                contents.append(f"{key!r} {_decoded(value)}")
        finally:
            client.close()
    return "\n".join(contents)


def _decoded(value: object) -> str:
    # Stream entries and hashes hold JSON whose non-ASCII is escaped: read it as the app does.
    text = repr(value)
    return text.encode().decode("unicode_escape", errors="replace")


def _searches_holding(needle: str, phrase: str, person: User) -> list[str]:
    context = ToolContext(
        user=person, time_zone=person.time_zone, tools_from_above={LOOK_BACK_TOOL.name: LOOK_BACK_TOOL}
    )
    query = json.dumps({"query": phrase[:300], "limit": None})
    found = []
    if needle in run_tool(context, "search_memories", query).lower():
        found.append(SEARCH_MEMORIES.name)
    if needle in run_tool(context, LOOK_BACK_TOOL.name, query).lower():
        found.append(LOOK_BACK.name)
    return found


def _next_requests_holding(needle: str, person: User, model_server: ModelServer) -> list[str]:
    """Run the next turn of each conversation under way, and of a new one; read what the
    model server received."""
    found = []
    under_way = ChatSession.objects.filter(user=person, ended_at__isnull=True, prompt_built_at__isnull=False)
    for session in under_way:
        if needle in next_request(person, model_server, session=session):
            found.append(NEXT_REQUEST_OPEN.name)
            break
    if needle in next_request(person, model_server, session=None):
        found.append(NEXT_REQUEST_NEW.name)
    return found


def next_request(person: User, model_server: ModelServer, *, session: ChatSession | None) -> str:
    """The first request the model receives for the person's next message in `session` (a
    new conversation for None), as lower-cased JSON."""
    model_server.queue_text("Noted.")
    before = len(model_server.chat_requests())
    if session is None:
        session = session_start(user=person)
    message = message_post(session=session, text="What do you remember of me?", client_id=None)
    turn_start(user_id=person.pk, message_id=message.pk).result(timeout=TURN_SECONDS)
    sent = model_server.chat_requests()[before:]
    assert sent, "the turn sent the model no request"
    return json.dumps(sent[0], ensure_ascii=False).lower()
