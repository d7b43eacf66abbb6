"""The coach's replies, Markdown to HTML through an allowlist: no model HTML reaches a page.

A link the model writes is shown with its full host beside it, "(evil.example)": its
words may say anything, and a link can carry what the person said to a stranger in its
query, so the person sees where it leaves to before they click. Only a web address whose
host every browser reads as we do is a link: `http://` or `https://`, a plain host name
(or a whole IP address) and no user name before it. Anything else (`https:evil.example`,
which a browser opens as https://evil.example, `mailto:`, a relative path, a user name
that hides the host) is shown as text, its address beside its words, and opens nothing.
"""

from __future__ import annotations

import ipaddress
import re
from html import escape
from typing import Any
from urllib.parse import urlsplit

import nh3
from markdown_it import MarkdownIt

# Raw HTML in the Markdown is escaped, not passed through; links stay links.
_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")

LINK_SCHEMES = ("http", "https")
# A host as browsers and we both read it: letters, digits, dots and hyphens (Markdown has
# already spelled a non-ASCII name in punycode), an optional port; or an IPv6 address.
_PLAIN_HOST = re.compile(r"(?:[A-Za-z0-9-]+\.)*[A-Za-z0-9-]+\.?(?::\d{1,5})?|\[[0-9A-Fa-f:.]+\](?::\d{1,5})?")
# Browsers read a host whose last label is a number as an IPv4 address, however spelled
# (127.1, 0x7f.1): one not spelled in full would be shown as other than where it goes.
_NUMERIC_LAST_LABEL = re.compile(r"(?:^|\.)(?:\d+|0[xX][0-9A-Fa-f]*)\.?$")


def link_host(href: str) -> str | None:
    """The host a web link leaves to, in ASCII; None when `href` is not a link we make."""
    scheme, _, rest = href.partition("://")
    if scheme.lower() not in LINK_SCHEMES or not rest:
        return None
    try:
        parts = urlsplit(href)
        host = parts.hostname or ""
    except ValueError:
        return None
    if not host or not _PLAIN_HOST.fullmatch(parts.netloc):
        return None
    if _NUMERIC_LAST_LABEL.search(host) and not _is_ip_address(host):
        return None
    return host


def _is_ip_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _link_open(renderer: Any, tokens: list[Any], idx: int, options: Any, env: dict[str, Any]) -> str:
    href = tokens[idx].attrGet("href") or ""
    host = link_host(href)
    env.setdefault("links", []).append((host, href))
    if host is None:
        # Not a link: its words stay, and its address follows them as text (link_close).
        return ""
    opened: str = renderer.renderToken(tokens, idx, options, env)
    return opened


def _link_close(renderer: Any, tokens: list[Any], idx: int, options: Any, env: dict[str, Any]) -> str:
    host, href = env["links"].pop() if env.get("links") else (None, "")
    if host is None:
        words = _words_since_open(tokens, idx)
        return "" if not href or words == href else f' <span class="link-address">({escape(href)})</span>'
    closed: str = renderer.renderToken(tokens, idx, options, env)
    return closed + f' <span class="link-host">({escape(host)})</span>'


def _words_since_open(tokens: list[Any], close: int) -> str:
    words: list[str] = []
    for token in reversed(tokens[:close]):
        if token.type == "link_open":
            break
        words.append(token.content)
    return "".join(reversed(words))


_markdown.add_render_rule("link_open", _link_open)
_markdown.add_render_rule("link_close", _link_close)

ALLOWED_TAGS = frozenset(
    {
        "p", "br", "hr", "strong", "em", "code", "pre", "blockquote", "ul", "ol", "li",
        "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td", "span",
    }
)  # fmt: skip
# No img: a remote image would tell a third party when the page was read.
# A span only ever comes from the link rules above: the model's own HTML is escaped.
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "th": {"align"},
    "td": {"align"},
    "span": {"class"},
}
ALLOWED_URL_SCHEMES = frozenset(LINK_SCHEMES)


def render_reply(markdown: str) -> str:
    """Safe HTML for a reply: every tag and attribute outside the allowlist is removed."""
    return nh3.clean(
        _markdown.render(markdown),
        tags=set(ALLOWED_TAGS),
        attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
        url_schemes=set(ALLOWED_URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    ).strip()
