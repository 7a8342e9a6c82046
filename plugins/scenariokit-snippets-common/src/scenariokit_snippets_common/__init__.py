"""scenariokit-snippets-common: ready snippets for everyday pages, under the ``common.`` aliases.

Step code calls them like stored snippets, ``await runSnippet("common.login_form", {...})``; a snippet
stored under the same alias wins over these (the store is asked first).
"""

from __future__ import annotations

from scenariokit import hookimpl
from scenariokit_snippets_common.snippets import SNIPPETS, CommonSnippet

__all__ = ["SNIPPETS", "CommonSnippet", "CommonSnippets", "scenariokit_snippet_sources"]


class CommonSnippets:
    """The snippet source scenariokit asks: ``get(alias)`` gives the code, ``aliases()`` the names."""

    def get(self, alias: str) -> str | None:
        """The code of the snippet ``alias``, or None when it is not one of these."""
        snippet = SNIPPETS.get(alias)
        return snippet.code if snippet is not None else None

    def aliases(self) -> list[str]:
        """Every alias this source serves."""
        return sorted(SNIPPETS)


@hookimpl
def scenariokit_snippet_sources() -> list[CommonSnippets]:
    """The common snippets, asked after the snippets in the store."""
    return [CommonSnippets()]
