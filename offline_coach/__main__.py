"""Serve the offline coach until SIGTERM or Ctrl-C:
`python -m offline_coach [--host H] [--port P] [--quirk NAME ...]`. With OFFLINE_COACH_TOKEN
in its environment (the run command sets one for each run), it proves with it that it is
the offline coach the app expects.

A quirk makes it behave as some real servers do (offline_coach/quirks.py), to try the app
and `check_model` against them."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from offline_coach import minilm
from offline_coach.quirks import QUIRKS
from offline_coach.server import ModelServer

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8001
# A short pause between streamed words, so the chat visibly types as a real model does.
CHUNK_DELAY_SECONDS = 0.03


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m offline_coach", description=__doc__)
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument(
        "--quirk", action="append", default=[], choices=sorted(QUIRKS), help="behave as some real servers do"
    )
    options = parser.parse_args(argv)
    stop = threading.Event()
    # The run command stops its children with SIGTERM; Ctrl-C does the same when run alone.
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server = ModelServer(
        host=options.host,
        port=options.port,
        chunk_delay_seconds=CHUNK_DELAY_SECONDS,
        quirks=options.quirk,
        # From the environment, not an argument: every account on the machine reads those.
        identity_token=os.environ.get("OFFLINE_COACH_TOKEN", ""),
    ).start()
    # Load the embedding model now, beside the server, so the first save does not wait for it.
    threading.Thread(target=minilm.preload, name="load-minilm", daemon=True).start()
    try:
        # The run command reads this line through a pipe: send it now, not at exit.
        print(f"offline coach: serving {server.base_url}", flush=True)  # noqa: T201 - a server's one status line
        stop.wait()
    finally:
        server.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
