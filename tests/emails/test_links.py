"""Addresses in a drafted email: whatever the model writes, what a mail client could make a
link of afterwards is on the product's own host or a host name alone, with no path or query
to carry the person's words."""

from __future__ import annotations

from urllib.parse import urlsplit

from hypothesis import given, settings
from hypothesis import strategies as st

from emails.links import ADDRESS, HOST, addresses_off_site_as_hosts

SITE = "https://coach.example.com"

PIECES = st.sampled_from(
    [
        "https://",
        "http://",
        "https:",
        "mailto:",
        "www.",
        "evil.example",
        "coach.example.com",
        "@",
        "/",
        "\\",
        "?q=HIV",
        "#",
        ".",
        " ",
        "(",
        ")",
        ":",
        "8443",
        "\u0430pple.com",
        "Run 5 km",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=20).map("".join))
def test_whatever_the_model_writes_every_address_left_is_on_our_own_host(text: str) -> None:
    shown = addresses_off_site_as_hosts(text, site_url=SITE)

    for found in ADDRESS.finditer(shown):
        address = found.group(0).rstrip(".,;:!?'\"")
        if HOST.fullmatch(address):
            continue  # a host name alone (www.evil.example) carries nothing of the person's
        assert urlsplit(address).hostname == "coach.example.com", (text, shown)
        assert "@" not in urlsplit(address).netloc and "\\" not in address
    assert addresses_off_site_as_hosts(shown, site_url=SITE) == shown


def test_an_address_elsewhere_is_its_host_and_ours_stays_whole() -> None:
    text = (
        "Read https://evil.example/r?q=HIV. Mail mailto:help@evil.example?body=HIV. "
        "Sign in at https://\u0430pple.com/login or https://coach.example.com@evil.example/x. "
        "Your page: https://coach.example.com/memories/."
    )

    assert addresses_off_site_as_hosts(text, site_url=SITE) == (
        "Read evil.example. Mail evil.example. Sign in at xn--pple-43d.com or evil.example. "
        "Your page: https://coach.example.com/memories/."
    )


def test_times_ratios_and_abbreviations_are_not_addresses() -> None:
    text = "Note: at 10:30, a 3:1 ratio, e.g. 1.5km/h pace on Mon./Tue."

    assert addresses_off_site_as_hosts(text, site_url=SITE) == text
