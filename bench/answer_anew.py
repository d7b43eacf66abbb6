"""The request for an answer anew, as the model server receives it: how much of it repeats,
from the start, the request of the answer it replaces (what a provider's prompt cache reads
again instead of the model), and whether the next turn's request begins with it.

    bin/bench answer_anew [--memories 40] [--turns 10]

The scenario: a person with `--memories` memories talks for `--turns` turns; then, three
times over, the coach answers a message and saves a memory on the way, and the person
has it answered anew: a retry (the model failed after the save), a regenerate, an edit of
the words. Tokens are the offline coach's (words and punctuation), the tool schemas first,
as a provider renders them.

A benchmark, not a test: it prints a table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.setup import django_for_benchmarks

django_for_benchmarks()

from django.conf import settings  # noqa: E402
from django.test import override_settings  # noqa: E402

from accounts.models import User  # noqa: E402
from bench.chat_people import REPLY, person  # noqa: E402
from bench.prompt import CACHE_FROM, cacheable, request_tokens, save, shared_start  # noqa: E402
from coach.answer_anew import message_edit, message_regenerate  # noqa: E402
from coach.claims import message_retry  # noqa: E402
from coach.models import ChatSession, Message  # noqa: E402
from coach.services import message_post, session_start  # noqa: E402
from coach.turn import turn_start  # noqa: E402
from offline_coach import ModelServer  # noqa: E402

TURN_SECONDS = 60


# What the coach saves in each case (bench/prompt.py's facts): far apart, so none is held
# back as a near-copy of another.
FACT_OF = {"retry": 3, "regenerate": 6, "edit": 9}


class Conversation:
    def __init__(self, server: ModelServer, user: User) -> None:
        self.server, self.user = server, user
        self.session = session_start(user=user)

    def answered(self, text: str) -> Message:
        message = message_post(session=ChatSession.objects.get(pk=self.session.pk), text=text, client_id=None)
        self.run(message)
        return Message.objects.get(pk=message.pk)

    def run(self, message: Message) -> list[dict[str, Any]]:
        """The turn for `message`, run to its end: the requests it sent."""
        asked = len(self.server.chat_requests())
        turn_start(user_id=self.user.pk, message_id=message.pk).result(timeout=TURN_SECONDS)
        return self.server.chat_requests()[asked:]

    def saving_turn(self, text: str, case: str, *, fails: bool = False) -> tuple[Message, dict[str, Any]]:
        """A turn whose model saves the case's fact, then answers (or fails): its message and
        first request."""
        self.server.queue_tool_calls([("save_memory", save(FACT_OF[case]))])
        if fails:
            self.server.queue_error(503)
        else:
            self.server.queue_text(REPLY)
        asked = len(self.server.chat_requests())
        message = self.answered(text)
        return message, self.server.chat_requests()[asked]


def row(name: str, first: dict[str, Any], again: dict[str, Any], following: dict[str, Any]) -> str:
    tokens, before = request_tokens(again), request_tokens(first)
    repeated = shared_start(tokens, before)
    carried = shared_start(request_tokens(following), tokens)
    return (
        f"| {name} | {len(before):,} | {len(tokens):,} | {repeated:,} ({repeated / len(before):.1%}) "
        f"| {cacheable(repeated):,} | {carried:,} of {len(tokens):,} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=40, help="the person's memories")
    parser.add_argument("--turns", type=int, default=10, help="turns before the first answer anew")
    args = parser.parse_args()

    server = ModelServer(scripted=True).start()
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = server.base_url, "bench"
    # The model's failure is the scenario's: not tried again under the turn.
    settings.LLM_MAX_RETRIES = 0
    rows = []
    with override_settings(EMBEDDING_MODEL="bag-of-words"):
        chat = Conversation(server, person("bench-answer-anew@example.com", args.memories))
        for number in range(args.turns):
            server.queue_text(REPLY)
            chat.answered(f"Question {number}: how was my week?")

        message, first = chat.saving_turn("I run on Sundays now", "retry", fails=True)
        server.queue_text(REPLY)
        assert message_retry(message=message)
        (again, *_) = chat.run(message)
        server.queue_text(REPLY)
        chat.answered("And on Mondays?")
        rows.append(row("retry, after the failed answer saved a memory", first, again, server.chat_requests()[-1]))

        for name in ("regenerate", "edit"):
            message, first = chat.saving_turn(f"Something new, for the {name}", name)
            server.queue_text(REPLY)
            asked = {"user_id": chat.user.pk, "session_id": message.session_id, "message_id": message.pk}
            if name == "regenerate":
                assert message_regenerate(**asked, asked_at=message.waiting_since)
            else:
                assert message_edit(**asked, text="Something new, once more", asked_at=message.waiting_since)
            (again, *_) = chat.run(message)
            server.queue_text(REPLY)
            chat.answered(f"And after {name}?")
            rows.append(row(f"{name}, after the first answer saved a memory", first, again, server.chat_requests()[-1]))
    server.stop()

    print(f"\n{args.memories} memories, {args.turns} turns before; tokens as the offline coach counts them")
    print(
        "\n| answered anew | the replaced answer's request | the new one's | repeated from the start | cacheable "
        "| the next turn's request begins with it |"
    )
    print("|---|---:|---:|---:|---:|---|")
    for line in rows:
        print(line)
    print(f"(cacheable: OpenAI's rule, from {CACHE_FROM:,} tokens in steps of 128; an edit's request can repeat")
    print(" only what comes before the edited message)")


if __name__ == "__main__":
    main()
