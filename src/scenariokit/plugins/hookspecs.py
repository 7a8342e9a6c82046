"""The hooks a scenariokit plugin may implement.

A plugin is a module or object with functions named like these, marked with
``scenariokit.hookimpl``, registered through a setuptools entry point of group ``scenariokit``.
Hooks are always called with keyword arguments; they grow by new arguments, never by renames.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from scenariokit.domain.job import RunJob
    from scenariokit.domain.model import Run, RunStreak, Scenario
    from scenariokit.storage.ports import Store

hookspec = pluggy.HookspecMarker("scenariokit")

# --- loading ---------------------------------------------------------------------------------------


@hookspec(historic=True)
def scenariokit_plugins_loaded(plugins: pluggy.PluginManager) -> None:
    """Called once on each plugin manager :func:`scenariokit.get_plugin_manager` makes, once the
    installed plugins and the built-ins are registered; for a plugin registered on it later, when it
    is registered.

    A plugin whose hooks matter only when it is configured registers the object holding them here
    (``plugins.register(obj)``), and only then: a hook no plugin implements costs nothing, and the
    scheduler reads a finished run's scenario and streak only for an implementation that takes them.
    """


# --- storage ---------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def scenariokit_storage_backend(url: str, secret_key: str) -> Store | None:
    """Return a store for a database URL whose scheme this plugin serves, or None.

    ``secret_key`` is the ``SCENARIOKIT_SECRET_KEY`` value: one key or several, comma-separated (the
    first encrypts, all decrypt), as ``SqlStore`` takes it.
    """


# --- browsers --------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def scenariokit_browser_provider(job: RunJob) -> Any | None:
    """Return an async callable ``launch(playwright) -> Browser`` to use instead of the built-in launch."""


# --- step code -------------------------------------------------------------------------------------


@hookspec
def scenariokit_step_helpers(job: RunJob) -> dict[str, Any] | None:
    """Return extra names to add to ``helpers`` in step code (merged from every plugin)."""


@hookspec
def scenariokit_snippet_sources() -> list[Any] | None:
    """Return snippet sources: objects with ``get(alias) -> str | None`` and ``aliases() -> list[str]``."""


@hookspec(firstresult=True)
def scenariokit_extract_session_token(storage_state: dict[str, Any]) -> str | None:
    """Return the token to keep from a saved session's storage state, or None to use the built-in rule."""


# --- run lifecycle ---------------------------------------------------------------------------------


@hookspec
def scenariokit_run_started(run: Run, scenario: Scenario) -> None:
    """Called when a worker starts executing a run."""


@hookspec
def scenariokit_run_finished(run: Run, scenario: Scenario, streak: RunStreak) -> None:
    """Called when a run has finished (``pass`` or ``fail``) and its result is stored, with its streak.

    An implementation may take only some of the arguments (``def scenariokit_run_finished(run)``):
    the service reads the run's scenario and its streak from the store only when an implementation
    takes them.
    """
