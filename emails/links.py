"""Addresses in what the model drafts for an email. Mail clients make a link of anything that
looks like an address, and an address can carry what the person told the coach to a
stranger (`https://evil.example/?q=HIV-positive`) or lead somewhere its words hide. So an
address stays as the model wrote it only on the product's own host (SITE_URL's); any other
is shown as its host alone, as text ("evil.example"), with nothing of its path or query.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# What a mail client would link, or a browser open: a scheme and what follows it
# (`https://...`, `mailto:...`, `https:evil.example`), an address from `www.`, or a host
# name with a path or a query after it.
_NOT_IN_AN_ADDRESS = r"""[^\s<>"'()\[\]]"""
ADDRESS = re.compile(
    rf"""(?ix)
    \b(?:
        [a-z][a-z0-9+.-]*://{_NOT_IN_AN_ADDRESS}+
      | (?:https?|ftp|mailto|tel|sms|data|javascript|file):{_NOT_IN_AN_ADDRESS}+
      | www\.{_NOT_IN_AN_ADDRESS}+
      | (?:[a-z0-9-]+\.)+[a-z]{{2,}}[/?\#]{_NOT_IN_AN_ADDRESS}*
    )"""
)
# Ends a sentence, not an address: left where it was.
TRAILING = ".,;:!?'\""
HOST = re.compile(r"(?i)^(?:[a-z0-9-]+\.)+[a-z0-9-]+$")
WEB_SCHEMES = ("http", "https")
LEFT_OUT = "(a link we left out)"


def addresses_off_site_as_hosts(text: str, *, site_url: str) -> str:
    """`text` with every address not on `site_url`'s host replaced by that address's host,
    in ASCII (or by LEFT_OUT where it has none to show), as plain text."""
    site_host = (urlsplit(site_url).hostname or "").lower()

    def shown(found: re.Match[str]) -> str:
        address = found.group(0)
        kept = address.rstrip(TRAILING)
        return _shown(kept, site_host=site_host) + address[len(kept) :]

    return ADDRESS.sub(shown, text)


def _shown(address: str, *, site_host: str) -> str:
    scheme, colon, rest = address.partition(":")
    if not colon or scheme.lower().startswith("www.") or "." in scheme:
        # www.evil.example/... or evil.example/path: the host is what comes before the path.
        return _host_of("//" + address) or LEFT_OUT
    if scheme.lower() in WEB_SCHEMES and rest.startswith("//"):
        try:
            parts = urlsplit(address)
        except ValueError:
            return LEFT_OUT
        host = _host_of(address)
        if host and host == site_host and "@" not in parts.netloc and "\\" not in address:
            return address
        return host or LEFT_OUT
    # mailto:someone@evil.example?body=..., https:evil.example, tel:, and the like.
    return _host_of("//" + rest.lstrip("/\\").rpartition("@")[2]) or LEFT_OUT


def _host_of(address: str) -> str:
    """The host of `address` in ASCII (a look-alike name as the punycode it is), or "" when
    it has none that reads as a host name."""
    try:
        host = (urlsplit(address).hostname or "").encode("idna").decode("ascii").lower()
    except (ValueError, UnicodeError):
        return ""
    return host if HOST.fullmatch(host) else ""
