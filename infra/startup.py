"""What a web process does once, before its first request."""

from __future__ import annotations

import contextlib
import contextvars
from pathlib import Path

from django.forms.renderers import get_default_renderer
from django.template import Engine, TemplateDoesNotExist, TemplateSyntaxError, engines
from django.urls import get_resolver


def url_resolvers_filled() -> None:
    """Fill Django's URL resolvers now, in a context of their own, not in a request's.

    A resolver marks that it is filling itself in an asgiref Local, which sets a value in
    the context it fills in. Filled in the first request's, that value is inherited by
    every context after it, and asgiref re-homes each such value on every hop between a
    thread and the event loop: some 36 hops a turn, each carrying the app's 22 resolvers.
    That was about a tenth of a turn's CPU. Filled here, in a context then dropped, they
    leave nothing behind (but a namespaced resolver made on its first use, in the request
    that uses it); what a resolver holds once filled is shared by every request."""
    # reverse_dict fills the root resolver, and through it each resolver included in it.
    contextvars.copy_context().run(lambda: get_resolver().reverse_dict)


def templates_compiled() -> int:
    """Compile every template the app's template engines can find, now, into their cached
    loaders: otherwise each page's first request in a process parses its templates and
    their includes (on a small machine, a fresh process's first account page took over
    twice as long as the next). Returns how many were compiled."""
    compiled = 0
    # The forms' own renderer has an engine of its own, for the widgets' templates.
    renderer = get_default_renderer()
    for engine in [*engines.all(), getattr(renderer, "engine", None)]:
        backend = getattr(engine, "engine", None)
        if not isinstance(backend, Engine):
            continue
        for name in _template_names(backend):
            with contextlib.suppress(TemplateSyntaxError, TemplateDoesNotExist):
                backend.get_template(name)
                compiled += 1
    return compiled


def _template_names(engine: Engine) -> list[str]:
    names: set[str] = set()
    for loader in engine.template_loaders:
        # The cached loader wraps the filesystem and app-directory loaders, which know their folders.
        for inner in getattr(loader, "loaders", [loader]):
            for folder in map(Path, inner.get_dirs()):
                names.update(str(path.relative_to(folder)) for path in folder.rglob("*.html") if path.is_file())
    return sorted(names)
