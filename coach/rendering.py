"""The coach's replies, Markdown to HTML through an allowlist: no model HTML reaches a page.

A link the model writes is shown with its full host beside it, "(evil.example)": its
words may say anything, and a link can carry what the person said to a stranger in its
query, so the person sees where it leaves to before they click.
"""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import urlsplit

import nh3
from markdown_it import MarkdownIt

# Raw HTML in the Markdown is escaped, not passed through; links stay links.
_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")


def _shown_host(href: str) -> str:
    """The host a link leaves to, as ASCII (punycode), so a look-alike name shows as one."""
    try:
        host = urlsplit(href).hostname or ""
        return host.encode("idna").decode("ascii")
    except (ValueError, UnicodeError):
        return host if host.isascii() else "an address that cannot be shown"


def _link_open(renderer: Any, tokens: list[Any], idx: int, options: Any, env: dict[str, Any]) -> str:
    env.setdefault("link_hosts", []).append(_shown_host(tokens[idx].attrGet("href") or ""))
    opened: str = renderer.renderToken(tokens, idx, options, env)
    return opened


def _link_close(renderer: Any, tokens: list[Any], idx: int, options: Any, env: dict[str, Any]) -> str:
    host = env["link_hosts"].pop() if env.get("link_hosts") else ""
    closed: str = renderer.renderToken(tokens, idx, options, env)
    return closed + (f' <span class="link-host">({escape(host)})</span>' if host else "")


_markdown.add_render_rule("link_open", _link_open)
_markdown.add_render_rule("link_close", _link_close)

ALLOWED_TAGS = frozenset(
    {
        "p", "br", "hr", "strong", "em", "code", "pre", "blockquote", "ul", "ol", "li",
        "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td", "span",
    }
)  # fmt: skip
# No img: a remote image would tell a third party when the page was read.
# A span only ever comes from the link rule above: the model's own HTML is escaped.
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "th": {"align"},
    "td": {"align"},
    "span": {"class"},
}
ALLOWED_URL_SCHEMES = frozenset({"http", "https", "mailto"})


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
