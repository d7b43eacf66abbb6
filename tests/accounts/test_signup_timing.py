"""Sign-up answers a registered address as it answers a new one, in the same time: both
hash a password, so timing cannot tell whether an address has an account (issue 36)."""

from __future__ import annotations

import pytest
from django.contrib.auth.hashers import MD5PasswordHasher
from django.test import Client

from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.django_db

HASHED: list[str] = []


class CountingHasher(MD5PasswordHasher):
    """The test hasher, counting each password it hashes: the slow step of a sign-up."""

    algorithm = "counting_md5"

    def encode(self, password: str, salt: str) -> str:
        HASHED.append(salt)
        return super().encode(password, salt)


def hashes_for_sign_up(email: str) -> int:
    HASHED.clear()
    response = Client().post("/accounts/signup/", {"email": email, "password1": PASSWORD, "password2": PASSWORD})
    assert response.status_code == 302
    return len(HASHED)


def test_a_sign_up_for_a_registered_address_hashes_a_password_as_a_new_one_does(settings) -> None:
    make_user("taken@example.com")
    settings.PASSWORD_HASHERS = ["tests.accounts.test_signup_timing.CountingHasher"]

    registered = hashes_for_sign_up("taken@example.com")
    new = hashes_for_sign_up("fresh@example.com")

    assert new >= 1
    assert registered == new
