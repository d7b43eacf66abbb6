"""Every search statement starts from the person's own rows, through an index: PostgreSQL's
plan for each (read with EXPLAIN, sequential scans priced out so that only a statement no
index can serve keeps one) never scans a table that holds other people's rows."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import User
from coach.look_back import LOOK_BACK_TOOL, exchanges_index
from coach.models import ChatSession, ConversationEmbedding, LookBack, Message
from memory.models import Memory
from memory.tools import ToolContext, run_tool
from offline_coach import ModelServer
from tests.coach.factories import make_session
from tests.memory.factories import make_memory

pytestmark = pytest.mark.django_db

# Tables with a row per person, or per person's message: a scan of one reads everyone's.
PEOPLES_TABLES = {
    model._meta.db_table for model in (Memory, ConversationEmbedding, Message, ChatSession, LookBack, User)
}


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", ()):
        yield from plan_nodes(child)


def sequential_scans(statement: str) -> list[str]:
    """The tables a statement's plan reads by a sequential scan, with sequential scans
    priced out: what is left is what no index serves."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {statement}")
        (plan,) = cursor.fetchone()
        cursor.execute("SET LOCAL enable_seqscan = on")
    plan = plan if isinstance(plan, list) else json.loads(plan)
    return [node.get("Relation Name", "?") for node in plan_nodes(plan[0]["Plan"]) if node["Node Type"] == "Seq Scan"]


def search_statements(search: Callable[[], object]) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        search()
    statements = [query["sql"] for query in captured.captured_queries if "by_meaning AS" in query["sql"]]
    assert statements, "the search made no search statement"
    return statements


def tool(user: User, name: str, arguments: dict[str, Any], message: Message | None = None) -> dict[str, Any]:
    context = ToolContext(
        user=user,
        time_zone=user.time_zone,
        session_id=message.session_id if message else None,
        message_id=message.pk if message else None,
        tools_from_above={LOOK_BACK_TOOL.name: LOOK_BACK_TOOL},
    )
    return json.loads(run_tool(context, name, json.dumps(arguments)))


@pytest.fixture
def two_people(user: User, other_user: User) -> User:
    for person in (user, other_user):
        for n in range(5):
            make_memory(person, f"note-{n}", summary=f"Knee note {n}: no deep squats, hangs are fine")
        make_session(person, "My knee clicks on the stairs", "Then we skip lunges.", "And hangs?", "Fine.")
        exchanges_index(user_id=person.pk)
    return user


SAVE = {
    "key": "knee-again",
    "tier": "episodic",
    "category": "habit",
    "summary": "Knee clicks on stairs",
    "content": "Knee clicks on stairs",
    "due_at": None,
    "keep_separate": None,
}


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("search_memories", {"query": "knee squats hangs", "limit": None}),
        ("search_memories", {"query": "the of and", "limit": 3}),
        ("save_memory", SAVE),
        ("search_conversations", {"query": "knee clicks stairs", "limit": None}),
        ("search_conversations", {"query": "🧗", "limit": 1}),
    ],
)
def test_no_search_statement_scans_a_table_of_other_peoples_rows(
    two_people: User, model_server: ModelServer, name: str, arguments: dict[str, Any]
) -> None:
    current = make_session(two_people, "Do you remember my knee?", "Yes.")
    message = current.messages.get(role="user")

    for statement in search_statements(lambda: tool(two_people, name, arguments, message)):
        assert not set(sequential_scans(statement)) & PEOPLES_TABLES, statement
