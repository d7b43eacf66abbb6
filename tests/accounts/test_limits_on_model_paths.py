"""Every path that spends the model or writes in bulk has a limit (issue 36): imports per
person per hour, onboarding once. Each refusal is a 429 with words on the page, and
spends nothing. (Retries count with new messages: tests/coach/test_chat_limits.py.)"""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import User
from accounts.views.imports import TOO_MANY_IMPORTS
from accounts.views.onboarding import ALREADY_DONE
from memory.models import Memory
from offline_coach import ModelServer
from tests.accounts.test_memory_import import review_form
from tests.conftest import make_user
from tests.memory.test_imports import CHATGPT_ANSWER, import_requests

pytestmark = pytest.mark.django_db

ANSWERS = {"goals": "Deadlift 100 kg by summer", "health": "Severe peanut allergy"}


@pytest.fixture
def person(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def test_the_imports_past_the_hours_limit_are_refused_without_asking_the_model(
    person: Client, user: User, model_server: ModelServer, settings
) -> None:
    settings.MEMORY_IMPORTS_PER_HOUR = 2

    pastes = [person.post("/memories/import", {"text": CHATGPT_ANSWER}) for _ in range(3)]

    assert [response.status_code for response in pastes] == [200, 200, 429]
    assert TOO_MANY_IMPORTS in pastes[-1].content.decode()
    assert len(import_requests(model_server)) == 2


def test_saving_imports_past_the_hours_limit_is_refused_and_saves_nothing(
    person: Client, user: User, model_server: ModelServer, settings
) -> None:
    settings.MEMORY_IMPORTS_PER_HOUR = 1
    fields = review_form(person.post("/memories/import", {"text": CHATGPT_ANSWER})).fields
    assert person.post("/memories/import/save", fields).status_code == 302
    count = Memory.objects.filter(user=user).count()

    again = person.post("/memories/import/save", fields)

    assert again.status_code == 429 and TOO_MANY_IMPORTS in again.content.decode()
    assert Memory.objects.filter(user=user).count() == count


def test_a_second_onboarding_post_is_refused_with_a_clear_message(client: Client, model_server: ModelServer) -> None:
    newcomer = make_user("new@example.com", onboarded=False)
    client.force_login(newcomer)
    assert client.post("/welcome/", ANSWERS).status_code == 302
    count = Memory.objects.filter(user=newcomer).count()
    embedded = len(model_server.embedding_requests())

    again = client.post("/welcome/", ANSWERS)

    assert again.status_code == 429
    assert ALREADY_DONE in again.content.decode().replace("&#x27;", "'")
    assert Memory.objects.filter(user=newcomer).count() == count == 2
    assert len(model_server.embedding_requests()) == embedded
