"""Finding a person's rows again, by their words and by their meaning (DESIGN.md 3.2).

Every search goes through here: `search_memories`, the near-copy check of a save, the
duplicate check of an import and of the memory page's add, the memory page's related
memories, and the look-back through past conversations (coach/look_back.py hands its own
table in as a Corpus). Each ranks only the person's rows, two ways, in one statement:

- by words: BM25 over the keyed hashes of each row's words (infra/hashed_words.py), so no
  word is read at rest: the rows holding any word of the query come from the GIN index
  (each hash is one person's word, so its posting list is theirs alone), each scored by
  how rare each of its matching words is among the person's rows, and how short it is;
- by meaning: the cosine distance of the row's embedding to the query's, an exact scan of
  the person's rows of the current embedding model (bench/retrieval.py measures it beside
  an approximate index at 10,000 exchanges a person).

The two rankings are fused by reciprocal rank (1 / (60 + rank), summed): a row high in
either comes up, one high in both first. Each row found says why: the words of the query
it holds, and its similarity in meaning. Measured on LoCoMo (bin/bench locomo): words alone
find more than MiniLM's meaning alone, and the two fused more than either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from psycopg import sql

from infra.hashed_words import any_of, query_words
from infra.rows import columns, from_row, table
from memory.models import Memory

# Reciprocal rank fusion's constant (Cormack et al., 2009): damps the top ranks' lead.
RRF_K = 60
# How deep each ranking goes before fusion: a row below this in both is not found.
DEPTH = 50
# BM25's usual constants: how soon a word's repeats stop counting, how much length does.
BM25_K1 = 1.2
BM25_B = 0.75
# A match of a similarity search is shown and recorded by its id, key, tier, category and
# summary alone: the rest (the note itself, the longest text) is neither read nor decrypted.
NOT_IN_A_MATCH = tuple(
    field.name
    for field in Memory._meta.concrete_fields
    if field.name not in {"id", "key", "tier", "category", "summary"}
)


@dataclass(frozen=True)
class Query:
    """What to look for: the person, the words of the query by their hash, and its
    embedding (None: by words alone)."""

    user_id: int
    words: dict[str, str]
    vector: list[float] | None = None
    model: str = ""

    @classmethod
    def of(
        cls, *, user_id: int, text: str, vector: list[float] | None = None, model: str = "", most: int | None = None
    ) -> Query:
        return cls(user_id=user_id, words=query_words(user_id, text, most=most), vector=vector, model=model)

    def parameters(self) -> dict[str, Any]:
        return {
            "user_id": self.user_id,
            "hashes": list(self.words),
            "any_word": any_of(self.words) or None,
            "vector": None if self.vector is None else _vector_text(self.vector),
            "model": self.model,
            "rrf_k": RRF_K,
            "depth": DEPTH,
            "k1": BM25_K1,
            "b": BM25_B,
        }


@dataclass(frozen=True)
class Why:
    """Why a row was found: the query's words it holds (none: not by words), and how near it
    is in meaning (None: not compared, as when it was embedded by another model)."""

    words: tuple[str, ...] = ()
    similarity: float | None = None
    by_meaning: bool = False

    @property
    def by_words(self) -> bool:
        return bool(self.words)

    @property
    def how(self) -> str:
        """`both`, `words` or `meaning`."""
        if self.by_words and self.by_meaning:
            return "both"
        return "words" if self.by_words else "meaning"

    def says(self) -> str:
        """In a few words, for the model and the page: "the words hang, fingerboard; close in meaning (0.62)"."""
        parts = []
        if self.words:
            parts.append(("the word " if len(self.words) == 1 else "the words ") + ", ".join(self.words))
        if self.by_meaning and self.similarity is not None:
            parts.append(f"close in meaning ({self.similarity:.2f})")
        return "; ".join(parts) or "close in meaning"


@dataclass(frozen=True)
class Corpus:
    """A table of rows to search, each one person's: its name, the columns that hold the
    person, the hashed words, the embedding and its model; and what else a row must meet,
    as SQL over the alias `r` with named parameters (`where` and `parameters`)."""

    table: str
    user_column: str = "user_id"
    words_column: str = "words"
    embedding_column: str = "embedding"
    model_column: str = "embedding_model"
    where: sql.Composable = field(default_factory=lambda: sql.SQL("TRUE"))
    parameters: dict[str, Any] = field(default_factory=dict)


def ranked(corpus: Corpus) -> sql.Composed:
    """The CTEs that rank `corpus` for a Query's parameters, ending in `found` (`id`,
    `fused`, `word_rank`, `meaning_rank`, `matched` hashes), best first, DEPTH at most from
    each ranking. A caller puts `WITH` before it and selects from `found`."""
    names = {
        "rows": sql.Identifier(corpus.table),
        "person": sql.Identifier("r", corpus.user_column),
        "words": sql.Identifier("r", corpus.words_column),
        "embedding": sql.Identifier("r", corpus.embedding_column),
        "model": sql.Identifier("r", corpus.model_column),
        "where": corpus.where,
    }
    return sql.SQL(_RANKED).format(**names)


# Each ranking reads the person's rows alone, through an index on the person (the words'
# GIN index holds hashes of the person's own words): never another person's row.
_RANKED = """
terms AS MATERIALIZED (
    SELECT q.hash, q.hash::tsquery AS one FROM unnest(%(hashes)s::text[]) AS q(hash)
),
candidates AS MATERIALIZED (
    SELECT r.id, {words} AS words, length({words}) AS length FROM {rows} r
    WHERE {person} = %(user_id)s AND {words} @@ %(any_word)s::tsquery AND ({where})
),
searched AS (
    -- How many rows the person has: what a word's rarity is counted against.
    SELECT count(*) AS total FROM {rows} r WHERE {person} = %(user_id)s AND %(any_word)s::tsquery IS NOT NULL
),
rarity AS MATERIALIZED (
    SELECT t.hash, t.one, ln(1 + (s.total - d.found + 0.5) / (d.found + 0.5)) AS idf
    FROM terms t CROSS JOIN searched s
    CROSS JOIN LATERAL (SELECT count(*) AS found FROM candidates c WHERE c.words @@ t.one) d
    WHERE d.found > 0
),
by_words AS (
    SELECT top.id, top.matched, row_number() OVER (ORDER BY top.score DESC, top.id) AS word_rank
    FROM (
        SELECT c.id, m.matched,
            m.weight * (%(k1)s + 1) / (1 + %(k1)s * (1 - %(b)s + %(b)s * c.length / a.mean)) AS score
        FROM candidates c
        CROSS JOIN (SELECT greatest(avg(length), 1) AS mean FROM candidates) a
        CROSS JOIN LATERAL (
            SELECT sum(w.idf) AS weight, array_agg(w.hash) AS matched FROM rarity w WHERE c.words @@ w.one
        ) m
        ORDER BY score DESC, c.id LIMIT %(depth)s
    ) top
),
by_meaning AS (
    SELECT near.id, row_number() OVER (ORDER BY near.distance, near.id) AS meaning_rank
    FROM (
        SELECT r.id, {embedding} <=> %(vector)s::vector AS distance FROM {rows} r
        WHERE {person} = %(user_id)s AND {model} = %(model)s AND {embedding} IS NOT NULL
          AND %(vector)s::vector IS NOT NULL AND ({where})
        ORDER BY distance, r.id LIMIT %(depth)s
    ) near
),
found AS (
    SELECT coalesce(w.id, m.id) AS id, w.word_rank, m.meaning_rank, w.matched,
        coalesce(1.0 / (%(rrf_k)s + w.word_rank), 0) + coalesce(1.0 / (%(rrf_k)s + m.meaning_rank), 0) AS fused
    FROM by_words w FULL OUTER JOIN by_meaning m ON m.id = w.id
)"""


# BM25 with each word counted once a row (a row's words are short: a note, an exchange),
# so a row's score is the sum of its matching words' rarity, damped by its length.


def similarity(corpus: Corpus, alias: str = "r") -> sql.Composed:
    """A selected row's cosine similarity to the query, NULL when embedded by another model."""
    return sql.SQL(
        "CASE WHEN {model} = %(model)s AND %(vector)s::vector IS NOT NULL "
        "THEN 1 - ({embedding} <=> %(vector)s::vector) END"
    ).format(model=sql.Identifier(alias, corpus.model_column), embedding=sql.Identifier(alias, corpus.embedding_column))


def why(query: Query, *, matched: Sequence[str] | None, meaning_rank: int | None, similarity: float | None) -> Why:
    """A found row's Why, from what the statement returned for it."""
    words = tuple(query.words[digest] for digest in query.words if digest in set(matched or ()))
    return Why(
        words=words,
        similarity=None if similarity is None else round(float(similarity), 4),
        by_meaning=meaning_rank is not None,
    )


def run(statement: sql.Composed, parameters: dict[str, Any]) -> list[tuple[Any, ...]]:
    """One search statement, its rows as they come."""
    with connection.cursor() as cursor:
        cursor.execute(statement.as_string(), parameters)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
    return rows


def _vector_text(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(value)) for value in vector) + "]"


# The person's memories ------------------------------------------------------------------------


@dataclass(frozen=True)
class FoundMemory:
    """A memory found, read without its note (the index line is what a match shows), and why."""

    memory: Memory
    why: Why

    @property
    def similarity(self) -> float:
        return self.why.similarity if self.why.similarity is not None else 0.0


def memories_found(
    *,
    user_id: int,
    query: Query,
    limit: int,
    exclude_category: str | None = None,
    exclude_digest: str | None = None,
    in_use_only: bool = False,
) -> list[FoundMemory]:
    """The person's memories by the query's words and meaning fused, best first: at most
    `limit`, but those of `exclude_category` and the one whose key digest is
    `exclude_digest`; nothing while the person has memory off when `in_use_only`. One
    statement."""
    if query.user_id != user_id:
        raise ValueError("a query is hashed for one person and searches only theirs")
    parameters = {
        **query.parameters(),
        "limit": limit,
        "exclude_category": exclude_category,
        "exclude_digest": exclude_digest,
    }
    rows = run(_memories_statement(in_use_only), parameters)
    found = []
    for row in rows:
        *columns_read, matched, meaning_rank, near = row
        memory = from_row(Memory, columns_read, without=NOT_IN_A_MATCH)
        found.append(FoundMemory(memory, why(query, matched=matched, meaning_rank=meaning_rank, similarity=near)))
    return found


MEMORIES = Corpus(
    table=Memory._meta.db_table,
    where=sql.SQL(
        "(%(exclude_digest)s::varchar IS NULL OR r.key_digest <> %(exclude_digest)s::varchar) "
        "AND (%(exclude_category)s::varchar IS NULL OR r.category <> %(exclude_category)s::varchar)"
    ),
)


@cache
def _memories_statement(in_use_only: bool) -> sql.Composed:
    in_use = (
        sql.SQL("JOIN {people} u ON u.id = r.user_id AND u.memory_enabled").format(people=table(get_user_model()))
        if in_use_only
        else sql.SQL("")
    )
    return sql.SQL(
        """WITH {ranked}
        SELECT {columns}, f.matched, f.meaning_rank, {similarity}
        FROM found f JOIN {memory} r ON r.id = f.id {in_use}
        ORDER BY f.fused DESC, r.id LIMIT %(limit)s"""
    ).format(
        ranked=ranked(MEMORIES),
        columns=columns(Memory, "r", without=NOT_IN_A_MATCH),
        similarity=similarity(MEMORIES),
        memory=table(Memory),
        in_use=in_use,
    )
