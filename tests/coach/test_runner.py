"""Where turns run: on the ASGI server's own loop while it serves (beside the readers that
follow them), and on a loop of their own otherwise, never on a loop that has stopped."""

from __future__ import annotations

import threading

from coach import runner
from tests.asgi_server import asgi_app_server


async def _thread_name() -> str:
    return threading.current_thread().name


def test_turns_run_on_the_servers_loop_while_it_serves_and_on_their_own_after_it_stops() -> None:
    with asgi_app_server():
        on_the_server = runner.run_in_background(_thread_name()).result(timeout=5)
    after_it_stopped = runner.run_in_background(_thread_name()).result(timeout=5)

    assert on_the_server == "asgi-live-server"
    assert after_it_stopped == "turns"
