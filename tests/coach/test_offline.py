"""The offline coach's server: the OpenAI wire format, scripting for tests, and its command.

Everything is driven over real HTTP with the openai SDK, the way the app talks to it.
"""

from __future__ import annotations

import asyncio
import http.client
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import openai
import pytest

from infra import llm
from offline_coach import ModelServer, Pause, bag_of_words_embedding
from tests.processes import REPO, free_port, get_json, wait_until_answers

MESSAGES = [{"role": "system", "content": "# Coach\nToday: 2025-03-10"}, {"role": "user", "content": "hello"}]
MEMORY_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
    for name in ("save_memory", "update_memory")
]


@pytest.fixture(scope="module")
def running_server() -> Iterator[ModelServer]:
    with ModelServer(scripted=True) as server:
        yield server


@pytest.fixture
def server(running_server: ModelServer) -> ModelServer:
    running_server.reset()
    return running_server


@pytest.fixture
def client(server: ModelServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="offline", max_retries=0, timeout=5)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def streamed_text(stream: openai.Stream) -> list[str]:
    return [chunk.choices[0].delta.content for chunk in stream if chunk.choices and chunk.choices[0].delta.content]


# The API surface ---------------------------------------------------------------------


def test_models_lists_the_chat_and_the_embedding_model(client: openai.OpenAI) -> None:
    assert {model.id for model in client.models.list()} == {"offline-coach", "all-MiniLM-L6-v2", "bag-of-words"}


def test_a_text_answer_streams_word_by_word_and_ends_with_done(server: ModelServer) -> None:
    server.queue_text("Keep the first week easy and sleep well.")

    with urllib.request.urlopen(chat_request(server, {"messages": MESSAGES, "stream": True}), timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        assert response.headers["Transfer-Encoding"] == "chunked"
        events = [event for event in response.read().decode().split("\n\n") if event]

    assert all(event.startswith("data: ") for event in events)
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(event.removeprefix("data: ")) for event in events[:-1]]
    contents = [chunk["choices"][0]["delta"].get("content") for chunk in chunks]
    assert len([content for content in contents if content]) == 8
    assert "".join(content or "" for content in contents) == "Keep the first week easy and sleep well."
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    assert [chunk["choices"][0]["finish_reason"] for chunk in chunks][-1] == "stop"


def test_a_connection_stays_open_for_the_next_request_and_closes_when_the_server_stops() -> None:
    server = ModelServer(scripted=True).start()
    server.queue_text("First answer.")
    server.queue_text("Second answer.")
    connection = http.client.HTTPConnection(server.host, server.port, timeout=5)
    answers = []
    for _ in range(2):
        body = json.dumps({"messages": MESSAGES, "stream": True})
        connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        answers.append(response.read().decode())
        # The same socket carries both: a client pays for its connection once.
        assert not response.will_close
    first_socket = connection.sock

    server.stop()

    assert "First" in answers[0] and "Second" in answers[1]
    assert connection.sock is first_socket
    assert first_socket.recv(1) == b"", "a stopped server keeps no connection open"


def test_the_sdk_reassembles_a_streamed_answer(client: openai.OpenAI, server: ModelServer) -> None:
    server.queue_text("One step at a time.")

    stream = client.chat.completions.create(model="offline-coach", messages=MESSAGES, stream=True)

    assert streamed_text(stream) == ["One ", "step ", "at ", "a ", "time."]


def test_a_non_streamed_answer_is_a_whole_chat_completion(client: openai.OpenAI, server: ModelServer) -> None:
    server.queue_text("Rest today.")

    completion = client.chat.completions.create(model="offline-coach", messages=MESSAGES)

    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content == "Rest today."
    assert completion.choices[0].message.tool_calls is None
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens > 0


def test_two_streamed_parallel_tool_calls_reassemble_to_their_names_and_arguments(
    client: openai.OpenAI, server: ModelServer
) -> None:
    first = {"key": "left-shoulder", "summary": "Bad left shoulder: no overhead pressing"}
    second = {"key": "talk-june", "summary": "Giving a talk in June"}
    server.queue_tool_calls([("save_memory", first), ("update_memory", second)])

    stream = client.chat.completions.create(model="offline-coach", messages=MESSAGES, tools=MEMORY_TOOLS, stream=True)

    calls: dict[int, dict[str, str]] = {}
    finish_reasons = []
    for chunk in stream:
        finish_reasons.append(chunk.choices[0].finish_reason)
        for delta in chunk.choices[0].delta.tool_calls or []:
            call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            if delta.id:
                assert not call["id"], "only the first delta of a call carries its id"
                call["id"], call["name"] = delta.id, delta.function.name
                assert delta.type == "function"
            call["arguments"] += delta.function.arguments or ""
    assert [calls[index]["name"] for index in sorted(calls)] == ["save_memory", "update_memory"]
    assert [json.loads(calls[index]["arguments"]) for index in sorted(calls)] == [first, second]
    assert calls[0]["id"] != calls[1]["id"]
    assert finish_reasons[-1] == "tool_calls"


def test_non_streamed_tool_calls_come_with_no_content(client: openai.OpenAI, server: ModelServer) -> None:
    server.queue_tool_calls([("save_memory", {"key": "diet"})])

    completion = client.chat.completions.create(model="offline-coach", messages=MESSAGES, tools=MEMORY_TOOLS)

    message = completion.choices[0].message
    assert message.content is None
    assert [(call.type, call.function.name, json.loads(call.function.arguments)) for call in message.tool_calls] == [
        ("function", "save_memory", {"key": "diet"})
    ]
    assert completion.choices[0].finish_reason == "tool_calls"


def test_a_request_without_messages_is_a_400_in_openai_shape(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="offline-coach", messages=None)  # type: ignore[arg-type]

    assert raised.value.status_code == 400
    assert raised.value.body["type"] == "invalid_request_error"


def test_an_unknown_path_is_a_404_in_openai_shape(server: ModelServer) -> None:
    status, body = get_json(server.base_url + "/assistants")

    assert status == 404
    assert set(body["error"]) >= {"message", "type", "code"}


# Embeddings --------------------------------------------------------------------------


def test_base64_embeddings_decode_to_the_bag_of_words_embedding(client: openai.OpenAI) -> None:
    texts = ["bad left shoulder", "Rönnells antikvariat", ""]

    response = client.embeddings.create(model="bag-of-words", input=texts)

    assert [item.embedding for item in response.data] == [bag_of_words_embedding(text) for text in texts]
    assert [item.index for item in response.data] == [0, 1, 2]


def test_float_embeddings_equal_the_bag_of_words_embedding_and_take_a_single_string(server: ModelServer) -> None:
    body = {"model": "bag-of-words", "input": "I train on Mondays", "encoding_format": "float"}
    request = urllib.request.Request(server.base_url + "/embeddings", data=json.dumps(body).encode(), method="POST")

    with urllib.request.urlopen(request, timeout=5) as response:
        payload = json.loads(response.read())

    assert payload["object"] == "list"
    assert payload["data"][0]["embedding"] == bag_of_words_embedding("I train on Mondays")
    assert payload["usage"]["prompt_tokens"] > 0


def test_near_identical_texts_embed_close_and_unrelated_texts_near_orthogonal() -> None:
    shoulder = bag_of_words_embedding("bad left shoulder no overhead pressing")

    assert cosine(shoulder, bag_of_words_embedding("bad left shoulder, avoid overhead pressing")) > 0.75
    # Words hash to one of 384 dimensions, so a rare collision between two words can leave
    # unrelated short texts at about 0.2 rather than exactly 0.
    assert abs(cosine(shoulder, bag_of_words_embedding("allergic to peanuts and shellfish"))) < 0.25
    assert abs(cosine(shoulder, bag_of_words_embedding("giving a talk about databases in June"))) < 0.25


def test_an_embedding_is_a_384_dimension_unit_vector_even_for_stop_words_alone() -> None:
    for text in ["The shoulder hurts", "the and of", ""]:
        vector = bag_of_words_embedding(text)
        assert len(vector) == 384
        assert math.isclose(math.sqrt(sum(value * value for value in vector)), 1.0, rel_tol=1e-6)
    assert bag_of_words_embedding("the and of") == bag_of_words_embedding("")


def test_embeddings_are_identical_across_processes() -> None:
    script = (
        "import json; from offline_coach import bag_of_words_embedding; "
        "print(json.dumps(bag_of_words_embedding('Rönnells')))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            cwd=REPO,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }

    assert [json.loads(output) for output in outputs] == [bag_of_words_embedding("Rönnells")]


# Scripting ---------------------------------------------------------------------------


def test_a_queued_text_waits_its_delay_before_the_first_byte(client: openai.OpenAI, server: ModelServer) -> None:
    server.queue_text("Later.", delay_seconds=0.5)

    started = time.monotonic()
    completion = client.chat.completions.create(model="offline-coach", messages=MESSAGES)

    assert time.monotonic() - started >= 0.5
    assert completion.choices[0].message.content == "Later."


def test_chunk_delays_space_out_the_streamed_words(client: openai.OpenAI, server: ModelServer) -> None:
    server.queue_text("one two three four", chunk_delay_seconds=0.2)

    arrivals = []
    for chunk in client.chat.completions.create(model="offline-coach", messages=MESSAGES, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append(time.monotonic())

    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    assert len(arrivals) == 4
    assert min(gaps) >= 0.15


def test_queued_answers_are_served_in_order_then_the_rule_based_coach_answers(
    client: openai.OpenAI, server: ModelServer
) -> None:
    server.queue_text("first")
    server.queue_text("second")

    answers = [client.chat.completions.create(model="offline-coach", messages=MESSAGES) for _ in range(3)]

    assert [answer.choices[0].message.content for answer in answers[:2]] == ["first", "second"]
    assert answers[2].choices[0].message.content.startswith(("Hi", "Hello", "Hey"))


def test_malformed_tool_arguments_are_sent_verbatim(client: openai.OpenAI, server: ModelServer) -> None:
    server.queue_tool_calls([("save_memory", '{"key": "left-shoulder", ')], text="Noting that.")

    message = client.chat.completions.create(model="offline-coach", messages=MESSAGES).choices[0].message

    assert message.content == "Noting that."
    assert message.tool_calls[0].function.arguments == '{"key": "left-shoulder", '


@pytest.mark.parametrize(
    ("status", "error_class"),
    [(429, openai.RateLimitError), (500, openai.InternalServerError), (503, openai.InternalServerError)],
)
def test_a_queued_error_fails_with_its_status_and_message(
    client: openai.OpenAI, server: ModelServer, status: int, error_class: type[openai.APIStatusError]
) -> None:
    server.queue_error(status, "The coach is overwhelmed.")

    with pytest.raises(error_class) as raised:
        client.chat.completions.create(model="offline-coach", messages=MESSAGES, stream=True)

    assert raised.value.status_code == status
    assert raised.value.body["message"] == "The coach is overwhelmed."


def test_a_queued_error_waits_its_delay(client: openai.OpenAI, server: ModelServer) -> None:
    server.queue_error(503, delay_seconds=0.3)

    started = time.monotonic()
    with pytest.raises(openai.APIStatusError):
        client.chat.completions.create(model="offline-coach", messages=MESSAGES)

    assert time.monotonic() - started >= 0.3


def test_a_stream_drop_breaks_the_sdk_iteration_after_the_text(client: openai.OpenAI, server: ModelServer) -> None:
    server.queue_stream_drop("Let me think about your")

    received: list[str] = []
    stream = client.chat.completions.create(model="offline-coach", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIConnectionError):
        for chunk in stream:
            assert chunk.choices[0].finish_reason is None
            received.append(chunk.choices[0].delta.content or "")

    assert "".join(received) == "Let me think about your"


def test_a_stream_drop_on_a_non_streamed_request_is_a_connection_error(
    client: openai.OpenAI, server: ModelServer
) -> None:
    server.queue_stream_drop("Half an answer")

    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="offline-coach", messages=MESSAGES)


def test_an_embedding_override_answers_for_exactly_that_text(client: openai.OpenAI, server: ModelServer) -> None:
    override = [1.0] + [0.0] * 383
    server.set_embedding("my shoulder", override)

    response = client.embeddings.create(model="bag-of-words", input=["my shoulder", "my shoulder."])

    assert response.data[0].embedding == override
    assert response.data[1].embedding == bag_of_words_embedding("my shoulder.")


def test_a_queued_embedding_error_fails_only_the_next_request(client: openai.OpenAI, server: ModelServer) -> None:
    server.queue_embedding_error(503)

    with pytest.raises(openai.APIStatusError) as raised:
        client.embeddings.create(model="bag-of-words", input="hello")
    after = client.embeddings.create(model="bag-of-words", input="hello")

    assert raised.value.status_code == 503
    assert after.data[0].embedding == bag_of_words_embedding("hello")


def test_requests_are_recorded_with_their_path_and_body(client: openai.OpenAI, server: ModelServer) -> None:
    client.chat.completions.create(model="offline-coach", messages=MESSAGES, tools=MEMORY_TOOLS)
    client.embeddings.create(model="bag-of-words", input="hello")

    assert [request.path for request in server.requests] == ["/v1/chat/completions", "/v1/embeddings"]
    [chat] = server.chat_requests()
    assert chat["messages"] == MESSAGES
    assert chat["tools"] == MEMORY_TOOLS
    assert server.system_prompt(chat) == "# Coach\nToday: 2025-03-10"
    assert server.embedding_requests()[0]["input"] == "hello"
    with pytest.raises(AttributeError):
        server.requests[0].path = "/elsewhere"  # type: ignore[misc]


def test_reset_forgets_queues_overrides_and_requests(client: openai.OpenAI, server: ModelServer) -> None:
    server.queue_text("scripted")
    server.set_embedding("hello", [1.0, 0.0])
    client.models.list()

    server.reset()

    assert server.requests == []
    assert client.chat.completions.create(model="offline-coach", messages=MESSAGES).choices[0].message.content != (
        "scripted"
    )
    assert client.embeddings.create(model="bag-of-words", input="hello").data[0].embedding == bag_of_words_embedding(
        "hello"
    )


def test_a_normal_mode_server_refuses_scripts_and_keeps_no_log() -> None:
    with ModelServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="offline", max_retries=0, timeout=5)
        client.chat.completions.create(model="offline-coach", messages=MESSAGES)

        with pytest.raises(RuntimeError, match="scripted=True"):
            server.queue_text("hi")
        assert server.requests == []


def test_a_stopped_server_no_longer_answers() -> None:
    server = ModelServer().start()
    client = openai.OpenAI(base_url=server.base_url, api_key="offline", max_retries=0, timeout=5)
    client.models.list()

    server.stop()

    with pytest.raises(openai.APIConnectionError):
        client.models.list()


def test_a_held_stream_sends_its_first_words_then_waits_alive_past_the_apps_read_timeout(
    model_server: ModelServer, settings
) -> None:
    settings.LLM_TIMEOUT_SECONDS = 1.5
    held = Pause(after_chunks=2)
    model_server.queue_text("one two three four", pause=held)

    async def read() -> list[str]:
        pieces = []
        async for piece in llm.stream_chat(MESSAGES):
            if isinstance(piece, llm.TextDelta):
                pieces.append(piece.text)
                if len(pieces) == 1:
                    # Held while the next read waits, for twice the read timeout: the comments
                    # it sends keep the stream alive.
                    threading.Timer(3, held.release.set).start()
        return pieces

    assert asyncio.run(read()) == ["one ", "two ", "three ", "four"]


def test_a_reset_lets_a_held_stream_go_on(server: ModelServer, client: openai.OpenAI) -> None:
    held = Pause(after_chunks=1)
    server.queue_text("one two", pause=held)
    stream = client.chat.completions.create(model="offline-coach", messages=MESSAGES, stream=True)
    assert held.reached.wait(timeout=30)

    server.reset()

    assert streamed_text(stream) == ["one ", "two"]


def test_a_hundred_delayed_streams_are_served_concurrently(client: openai.OpenAI, server: ModelServer) -> None:
    count = 100
    # Each answer is held before its first word until all of them have begun: served one
    # after another, the second would never begin while the first is held.
    pauses = [Pause(after_chunks=0) for _ in range(count)]
    for number, pause in enumerate(pauses):
        server.queue_text(f"answer {number}", pause=pause)
    answers: list[str] = []
    lock = threading.Lock()

    def ask() -> None:
        stream = client.chat.completions.create(model="offline-coach", messages=MESSAGES, stream=True)
        text = "".join(streamed_text(stream))
        with lock:
            answers.append(text)

    threads = [threading.Thread(target=ask) for _ in range(count)]
    for thread in threads:
        thread.start()
    given_up_at = time.monotonic() + 60
    begun = sum(pause.reached.wait(timeout=max(0.0, given_up_at - time.monotonic())) for pause in pauses)
    for pause in pauses:
        pause.release.set()
    for thread in threads:
        thread.join()

    assert begun == count, f"only {begun} of {count} streams were being served at once"
    assert sorted(answers) == sorted(f"answer {number}" for number in range(count))


# The management command --------------------------------------------------------------


def test_the_command_serves_until_sigterm_and_exits_cleanly() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "offline_coach", "--port", str(port)],
        cwd=REPO,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until_answers(f"http://127.0.0.1:{port}/v1/models", process)
        status, body = get_json(f"http://127.0.0.1:{port}/v1/models")
        assert status == 200
        assert {model["id"] for model in body["data"]} == {"offline-coach", "all-MiniLM-L6-v2", "bag-of-words"}
        assert process.stdout is not None
        assert f"http://127.0.0.1:{port}/v1" in process.stdout.readline()
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=10)

    assert process.returncode == 0, stderr
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1)


def chat_request(server: ModelServer, body: dict) -> urllib.request.Request:
    return urllib.request.Request(
        server.base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
