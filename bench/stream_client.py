"""Follow many server-sent-event streams at once from one event loop, in its own process.

    python bench/stream_client.py < plan.json > results.json

The plan: {"port": 8765, "gap": 0.02, "first_words": "<regex>", "hang_up_at_first_words":
false, "requests": [{"method": "GET", "path": "...", "headers": {...}, "body": "...",
"port": 8766}, ...]}. Request n starts n * gap seconds in, on its own port if it names one.
For each, the result is [seconds to the first line matching `first_words` (the first
words, not an empty opening event), seconds to the end, whether it ended well (a done
event)]; with `hang_up_at_first_words`, a reader leaves once it has them, as a reload
would. A request with `then: {"path": "<regex>", "headers": {...}}` is answered first
(a message posted), and the stream followed is the path the regex's group finds in that
answer, asked for with those headers, timed from the first request, as a browser meets it.
Its own process, so the benchmark's other threads (the model server) do not share
its interpreter lock and skew what it measures.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time

END_MARKERS = (b"event: done", b"data: [DONE]")
FAILED_MARKERS = (b"event: failed", b"event: stopped")


async def follow(
    port: int, request: dict, delay: float, first_words: re.Pattern[bytes], *, hang_up: bool
) -> tuple[float, float, bool]:
    await asyncio.sleep(delay)
    began = time.perf_counter()
    if "then" in request:
        answer = await answered(port, request)
        found = re.search(request["then"]["path"].encode(), answer)
        if found is None:
            return float("inf"), time.perf_counter() - began, False
        request = {"method": "GET", "path": found.group(1).decode(), "headers": request["then"]["headers"]}
    reader, writer = await sent(port, request)
    first, ended = None, False
    while line := await reader.readline():
        if first is None and first_words.search(line):
            first = time.perf_counter() - began
            if hang_up:
                ended = True
                break
        if line.startswith(END_MARKERS):
            ended = True
            break
        if line.startswith(FAILED_MARKERS):
            break
    writer.close()
    return (first if first is not None else float("inf")), time.perf_counter() - began, ended


async def sent(port: int, request: dict) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = request.get("body", "").encode()
    headers = {"Host": "127.0.0.1", "Content-Length": str(len(body)), **request.get("headers", {})}
    head = f"{request['method']} {request['path']} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(head.encode() + b"\r\n" + body)
    return reader, writer


async def answered(port: int, request: dict) -> bytes:
    """The body of a response that says its length."""
    reader, writer = await sent(port, {**request, "headers": {**request.get("headers", {}), "Connection": "close"}})
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    body = await reader.readexactly(length)
    writer.close()
    return body


async def follow_all(plan: dict) -> list[tuple[float, float, bool]]:
    first_words = re.compile(plan["first_words"].encode())
    return await asyncio.gather(
        *(
            follow(
                request.get("port", plan["port"]),
                request,
                n * plan["gap"],
                first_words,
                hang_up=plan.get("hang_up_at_first_words", False),
            )
            for n, request in enumerate(plan["requests"])
        )
    )


if __name__ == "__main__":
    json.dump(asyncio.run(follow_all(json.load(sys.stdin))), sys.stdout)
