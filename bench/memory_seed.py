"""The stores bin/bench memory measures against: thousands of people of 74 memories each
(14 weekly episodes, the rest notes), written with COPY, as no app path could write them
in the time, with 1,024-dimension embeddings of a fixed seed.

Imported by bench/memory.py once Django is set up.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone
from pgvector import Vector
from pgvector.psycopg import register_vector
from psycopg import Cursor

from bench.stores import copy_people
from infra.encryption import encrypt
from memory.models import key_digest

DIMENSIONS = 1024
PER_USER = 74
EPISODES = 14
MODEL = "bench-embedding-1024"
rng = random.Random(7)


def random_vector() -> list[float]:
    vector = [rng.gauss(0, 1) for _ in range(DIMENSIONS)]
    norm = sum(v * v for v in vector) ** 0.5
    return [v / norm for v in vector]


VECTORS = [Vector(random_vector()) for _ in range(256)]
TEXTS = [
    (encrypt(f"Observation {i} about training"), encrypt(f"Longer note {i}: " + "detail " * 30)) for i in range(74)
]
KEYS = [encrypt(f"m-{i}") for i in range(74)]


SHORT_TEXTS = [
    "Bad left shoulder, no overhead pressing",
    "Training for a half marathon in April",
    "Writes best in the early morning",
    "Allergic to peanuts and cashews",
    "Giving a talk at the library in June",
    "Prefers blunt feedback, short answers",
    "Runs with her club on Saturday mornings",
    "Works night shifts as a nurse",
]


def seed_users(first: int, count: int, *, memories_each: int = PER_USER) -> list[int]:
    """Users bench-<n>@example.com with `memories_each` memories: 14 episodes, the rest notes."""
    now = timezone.now()
    raw = connection.connection
    register_vector(raw)
    with raw.cursor() as cursor:
        ids = copy_people(cursor, [(f"bench-{n}@example.com", "UTC") for n in range(first, first + count)], now=now)
        _copy_memories(cursor, ids, memories_each, now=now)
    with connection.cursor() as cursor:
        # Settle the new rows now, so autovacuum and a checkpoint do not run mid-measurement.
        cursor.execute("VACUUM ANALYZE accounts_user")
        cursor.execute("VACUUM ANALYZE memory_memory")
        cursor.execute("CHECKPOINT")
    return ids


def _copy_memories(cursor: Cursor, ids: list[int], memories_each: int, *, now: datetime) -> None:
    columns = (
        "user_id, key, key_digest, tier, category, source, summary, content, embedding, embedding_model, "
        "status, version, created_at, updated_at"
    )
    with cursor.copy(f"COPY memory_memory ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(
            [
                "int8",
                "text",
                "varchar",
                "varchar",
                "varchar",
                "varchar",
                "text",
                "text",
                "vector",
                "varchar",
                "varchar",
                "int4",
                "timestamptz",
                "timestamptz",
            ]
        )
        for user_id in ids:
            for i in range(memories_each):
                episode = memories_each == PER_USER and i < EPISODES
                summary, content = TEXTS[i]
                at = now - timedelta(days=memories_each - i)
                copy.write_row(
                    [
                        user_id,
                        KEYS[i],
                        key_digest(user_id, f"m-{i}"),
                        "episodic",
                        "episode" if episode else "habit",
                        "coach",
                        summary,
                        content,
                        VECTORS[(user_id + i) % len(VECTORS)],
                        MODEL,
                        "",
                        1,
                        at,
                        at,
                    ]
                )
