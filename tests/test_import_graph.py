"""No import circle anywhere in the code, the offline coach's included, counting the imports
made only for type checking: import-linter's contracts (pyproject.toml) leave those out, so
two modules that name each other in annotations would pass them unseen."""

from __future__ import annotations

import tomllib

import grimp

from tests.processes import REPO

ROOT_PACKAGES = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Each circle through a direct import, shortest first: the import, then the way back."""
    found: dict[frozenset[str], list[str]] = {}
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            way_back = graph.find_shortest_chain(importer=imported, imported=importer)
            if way_back is not None:
                circle = [importer, *way_back]
                found.setdefault(frozenset(circle), circle)
    return sorted(found.values(), key=len)


def test_no_module_imports_itself_through_others_type_checking_imports_included() -> None:
    graph = grimp.build_graph(*ROOT_PACKAGES, exclude_type_checking_imports=False)

    assert [" -> ".join(circle) for circle in circles(graph)] == []


def test_a_circle_made_only_by_annotations_is_found() -> None:
    graph = grimp.ImportGraph()
    graph.add_import(importer="offline.server", imported="offline.handler", line_number=1, line_contents="import")
    graph.add_import(importer="offline.handler", imported="offline.routes", line_number=1, line_contents="import")
    graph.add_import(
        importer="offline.routes", imported="offline.server", line_number=9, line_contents="if TYPE_CHECKING"
    )

    assert circles(graph) == [["offline.handler", "offline.routes", "offline.server", "offline.handler"]]
