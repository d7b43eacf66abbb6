"""Whether the server at the offline coach's address is the offline coach this app expects.

The run command starts the offline coach on a fixed port (8001). Any process that holds
that port first (another program, or anyone's on a shared machine) would otherwise be sent
every prompt, memories and all, and answer as the coach. So each run makes a token, hands it
to the offline coach and to the app's processes alike (OFFLINE_COACH_TOKEN, never on a
command line), and before each request to that address the app sends a fresh challenge;
only a server holding the token can answer it (an HMAC of the challenge under the token).
A server that cannot is sent nothing: the request fails with NotOurOfflineCoach.

Without OFFLINE_COACH_TOKEN (tests, docker-compose's own network) nothing is checked.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import secrets
import urllib.request
from urllib.parse import urlencode

import httpx2
from django.conf import settings

logger = logging.getLogger(__name__)

# Relative to the offline coach's base URL (its /v1), where it answers a challenge.
IDENTITY_PATH = "/offline-coach/identity"
PROOF_TIMEOUT_SECONDS = 2.0


class NotOurOfflineCoach(httpx2.ConnectError):
    """The server at the offline coach's address could not prove it is the offline coach
    this app expects: nothing was sent to it. A connection error to the model's client, as
    if none were listening (the gateway says why: infra/llm.py)."""


def proof_for(token: str, challenge: str) -> str:
    return hmac.new(token.encode(), challenge.encode(), hashlib.sha256).hexdigest()


def needs_proof(url: str) -> bool:
    """Whether a request to `url` goes to the offline coach's address with a token given."""
    base = settings.OFFLINE_COACH_URL.rstrip("/")
    asked_of_it = url.startswith(base + "/") and not url.startswith(base + IDENTITY_PATH)
    return bool(settings.OFFLINE_COACH_TOKEN) and asked_of_it


def offline_coach_proven(url: str) -> None:
    """Before a request to `url`: NotOurOfflineCoach unless `url` is elsewhere than the
    offline coach's address, no token was given, or the server there proves it holds it."""
    if not needs_proof(url):
        return
    token = settings.OFFLINE_COACH_TOKEN
    base = settings.OFFLINE_COACH_URL.rstrip("/")
    challenge = secrets.token_urlsafe(24)
    asked = f"{base}{IDENTITY_PATH}?{urlencode({'challenge': challenge})}"
    try:
        with urllib.request.urlopen(asked, timeout=PROOF_TIMEOUT_SECONDS) as response:
            answer = json.loads(response.read())
    except (OSError, ValueError) as error:
        raise _refused(base, f"it did not answer the challenge ({error})") from None
    proof = answer.get("proof") if isinstance(answer, dict) else None
    if not isinstance(proof, str) or not hmac.compare_digest(proof, proof_for(token, challenge)):
        raise _refused(base, "its answer to the challenge was wrong")


def _refused(base: str, why: str) -> NotOurOfflineCoach:
    said = (
        f"the server at {base} is not the offline coach this app started ({why}): nothing was sent to it. "
        "Another program may hold its port: stop it, or set OFFLINE_COACH_URL to a free port."
    )
    logger.warning("%s", said)
    return NotOurOfflineCoach(said)


def check_before_sending(request: httpx2.Request) -> None:
    """An httpx request hook for the model clients: the check above, for each request."""
    offline_coach_proven(str(request.url))


async def check_before_sending_async(request: httpx2.Request) -> None:
    url = str(request.url)
    # Most requests need no proof, and get no thread; the check itself waits on a socket,
    # so it runs off the event loop, which other replies share.
    if needs_proof(url):
        await asyncio.to_thread(offline_coach_proven, url)
