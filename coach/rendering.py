"""The coach's replies, Markdown to HTML through an allowlist: no model HTML reaches a page."""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

# Raw HTML in the Markdown is escaped, not passed through; links stay links.
_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")

ALLOWED_TAGS = frozenset(
    {
        "p", "br", "hr", "strong", "em", "code", "pre", "blockquote", "ul", "ol", "li",
        "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
# No img: a remote image would tell a third party when the page was read.
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}
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
