"""Another process on the offline coach's port: the app sends it nothing. Each request to
the offline coach's address first asks the server there to prove, with this run's token,
that it is the offline coach the run command started; a server that cannot is sent no
prompt and no text to embed, and the turn says what holds the port."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from infra import llm
from offline_coach import ModelServer

TOKEN = "this-runs-offline-coach-token-Wq3x9"
PROMPT = [{"role": "user", "content": "My knee hurts after long runs"}]
REFUSED = "is not the offline coach this app started"


class Squatter(ThreadingHTTPServer):
    """Some other process on the port: it answers like a model, and keeps what it is sent."""

    def __init__(self, proof: str | None) -> None:
        super().__init__(("127.0.0.1", 0), _SquatterHandler)
        self.proof = proof
        self.received: list[str] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _SquatterHandler(BaseHTTPRequestHandler):
    server: Squatter

    def do_GET(self) -> None:
        if "/offline-coach/identity" in self.path and self.server.proof is not None:
            self._json({"proof": self.server.proof})
        else:
            self._json({"error": {"message": "no such path"}}, status=404)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        self.server.received.append(body)
        if self.path.endswith("/embeddings"):
            self._json({"data": [{"index": 0, "embedding": [0.1, 0.2]}], "model": "x"})
        else:
            message = {"role": "assistant", "content": "I am the coach now."}
            self._json({"id": "1", "object": "chat.completion", "choices": [{"index": 0, "message": message}]})

    def _json(self, payload: dict, status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(params=[None, "echo", "a guess"], ids=["no proof", "the challenge echoed", "a guessed proof"])
def squatter(request, settings) -> Iterator[Squatter]:
    server = Squatter(proof={"echo": "{challenge}", "a guess": "0" * 64}.get(request.param))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.OFFLINE_COACH_URL = settings.OPENAI_BASE_URL = server.base_url
    settings.OFFLINE_COACH_TOKEN = TOKEN
    yield server
    server.shutdown()
    server.server_close()


def test_a_process_on_the_offline_coachs_port_is_sent_no_prompt(squatter: Squatter) -> None:
    with pytest.raises(llm.LLMError, match=REFUSED) as refused:
        llm.complete(PROMPT)

    assert "set OFFLINE_COACH_URL to a free port" in str(refused.value)
    assert squatter.received == []


def test_a_process_on_the_offline_coachs_port_is_sent_no_text_to_embed(squatter: Squatter) -> None:
    with pytest.raises(llm.LLMError, match=REFUSED):
        llm.embed(["My knee hurts after long runs"])

    assert squatter.received == []


def test_a_process_on_the_offline_coachs_port_is_sent_no_streamed_turn(squatter: Squatter) -> None:
    async def turn() -> None:
        async for _ in llm.stream_chat(PROMPT):
            pass

    with pytest.raises(llm.LLMError, match=REFUSED):
        asyncio.run(turn())

    assert squatter.received == []


def test_the_offline_coach_holding_the_runs_token_gets_every_request(settings) -> None:
    with ModelServer(scripted=True, identity_token=TOKEN) as coach:
        settings.OFFLINE_COACH_URL = settings.OPENAI_BASE_URL = coach.base_url
        settings.OFFLINE_COACH_TOKEN = TOKEN
        coach.queue_text("Let's look at your long runs.")

        answer = llm.complete(PROMPT)
        [vector] = llm.embed(["My knee hurts after long runs"])

        assert answer == "Let's look at your long runs."
        assert coach.chat_requests()[-1]["messages"] == PROMPT and vector.vector


def test_an_offline_coach_started_with_another_token_is_refused_too(settings) -> None:
    with ModelServer(scripted=True, identity_token="another-runs-token-7Hq2") as coach:
        settings.OFFLINE_COACH_URL = settings.OPENAI_BASE_URL = coach.base_url
        settings.OFFLINE_COACH_TOKEN = TOKEN

        with pytest.raises(llm.LLMError, match=REFUSED):
            llm.complete(PROMPT)

        assert coach.chat_requests() == []


def test_without_a_token_nothing_is_asked_of_the_server(model_server: ModelServer, settings) -> None:
    settings.OFFLINE_COACH_URL = model_server.base_url
    settings.OFFLINE_COACH_TOKEN = ""
    model_server.queue_text("Hello.")

    assert llm.complete(PROMPT) == "Hello."
