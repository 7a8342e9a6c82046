"""The plugin hooks a worker calls, behind one small object that works without any plugins.

The plugin manager is built once in the pool's zygote (:func:`PluginHooks.preload`), so every worker
forked from it finds the installed plugins loaded; a worker started by exec, or forked from a zygote
that could not load them, builds its own. A worker whose plugin manager cannot be imported or built
runs with no plugins at all rather than not at all (and says so in the run log).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from scenariokit.domain.job import RunJob
from scenariokit.runner.worker.stepcode import SnippetSource

logger = logging.getLogger(__name__)

#: ``launch(playwright) -> Browser``, as ``scenariokit_browser_provider`` returns it
BrowserLauncher = Callable[[Any], Awaitable[Any]]

#: the plugins this process loaded for the workers it forks (:meth:`PluginHooks.preload`)
_preloaded: PluginHooks | None = None


class PluginHooks:
    """The hooks step execution calls; every method answers sensibly when there is no plugin manager."""

    def __init__(self, hook: Any | None, problem: str | None = None) -> None:
        self._hook = hook
        #: why there are no plugins, when loading them failed
        self.problem = problem

    @classmethod
    def preload(cls) -> None:
        """Load the installed plugins in this process, for every worker it forks (the zygote).

        Raises what loading them raised: each worker then loads them itself, and reports why not.
        """
        global _preloaded
        from scenariokit.plugins import get_plugin_manager

        _preloaded = cls(get_plugin_manager().hook)

    @classmethod
    def load(cls) -> PluginHooks:
        """The installed plugins' hooks, or no plugins when the plugin manager is unavailable."""
        if _preloaded is not None:
            return _preloaded
        try:
            from scenariokit.plugins import get_plugin_manager

            return cls(get_plugin_manager().hook)
        except Exception as exc:  # a broken plugin must not take the runner down with it
            logger.warning("running without plugins: %s", exc)
            return cls(None, problem=f"plugins unavailable: {type(exc).__name__}: {exc}")

    def step_helpers(self, job: RunJob) -> dict[str, Any]:
        """Every plugin's extra ``helpers`` names, merged (earlier plugins win on a clash)."""
        merged: dict[str, Any] = {}
        if self._hook is None:
            return merged
        for extra in self._hook.scenariokit_step_helpers(job=job):
            for name, value in (extra or {}).items():
                merged.setdefault(name, value)
        return merged

    def snippet_sources(self) -> list[SnippetSource]:
        """Every plugin's snippet sources, asked after the store's snippets."""
        sources: list[SnippetSource] = []
        if self._hook is None:
            return sources
        for found in self._hook.scenariokit_snippet_sources():
            sources.extend(found or [])
        return sources

    def extract_token(self, storage_state: dict[str, Any]) -> str | None:
        """The session token a plugin (or the built-in rule, registered as a plugin) finds."""
        if self._hook is None:
            return None
        token = self._hook.scenariokit_extract_session_token(storage_state=storage_state)
        return None if token is None else str(token)

    @property
    def provides_browsers(self) -> bool:
        """Whether a plugin implements ``scenariokit_browser_provider`` (handed the Playwright object)."""
        return self._hook is not None and bool(self._hook.scenariokit_browser_provider.get_hookimpls())

    def browser_provider(self, job: RunJob) -> BrowserLauncher | None:
        """A plugin's own browser launcher for this job, or None for the built-in launch."""
        if self._hook is None:
            return None
        launcher: BrowserLauncher | None = self._hook.scenariokit_browser_provider(job=job)
        return launcher
