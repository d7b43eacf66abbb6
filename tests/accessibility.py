"""axe-core in the browser tests: what a screen-reader or keyboard user would meet on a page.

A page state fails on any violation axe-core rates serious or critical. The script is
evaluated through the DevTools protocol, which the page's Content-Security-Policy does not
govern, so the app's CSP stays exactly as served while it is checked."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from playwright.sync_api import Page

AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
# The published file's digest: a vendored copy edited by hand would check nothing real.
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"
BLOCKING = ("serious", "critical")

RUN = """async () => {
  const results = await axe.run(document, {resultTypes: ["violations"]});
  return results.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    where: v.nodes.slice(0, 3).map(n => n.target.join(" ") + " :: " + n.failureSummary.split("\\n")[1])
  }));
}"""


@cache
def axe_source() -> str:
    source = AXE.read_bytes()
    assert hashlib.sha256(source).hexdigest() == AXE_SHA256, (
        "tests/vendor/axe-core/axe.min.js is not the published file"
    )
    return source.decode()


def violations(page: Page) -> list[dict]:
    """Every axe-core violation on the page as it is now, whatever its impact."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(axe_source())
    return page.evaluate(RUN)


def blocking_violations(page: Page) -> list[str]:
    """The serious and critical ones, one readable line each."""
    return [
        f"{v['impact']} {v['id']} ({v['help']}): {'; '.join(v['where'])}"
        for v in violations(page)
        if v["impact"] in BLOCKING
    ]


def assert_accessible(page: Page, state: str) -> None:
    found = blocking_violations(page)
    assert not found, f"axe-core on {state} ({page.url}):\n" + "\n".join(found)
