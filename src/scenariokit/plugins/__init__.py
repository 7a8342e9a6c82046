"""The plugin manager: hook specifications, entry-point plugins and the built-in defaults."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pluggy

from scenariokit.plugins import hookspecs

if TYPE_CHECKING:
    from scenariokit.domain.model import Run, RunStreak, Scenario

log = logging.getLogger(__name__)

hookimpl = pluggy.HookimplMarker("scenariokit")

#: setuptools entry-point group of scenariokit plugins
ENTRY_POINT_GROUP = "scenariokit"


def get_plugin_manager(*, load_entry_points: bool = True) -> pluggy.PluginManager:
    """A new plugin manager with the specs, the installed plugins and the built-in defaults.

    The built-ins register through the same hooks a third-party plugin uses (``trylast``), so an
    installed plugin can override any of them. Then ``scenariokit_plugins_loaded`` lets a plugin that
    is configured register the hooks it serves only then.
    """
    from scenariokit.plugins import builtin as builtin_plugins

    manager = pluggy.PluginManager("scenariokit")
    manager.add_hookspecs(hookspecs)
    manager.register(builtin_plugins, name="scenariokit.builtin")
    if load_entry_points:
        manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    # historic: a plugin registered on this manager later hears it when it is registered
    manager.hook.scenariokit_plugins_loaded.call_historic(kwargs={"plugins": manager})
    return manager


class HookRelay:
    """The lifecycle hooks the service layer fires, one typed method per hook.

    Callers fire them only after the unit of work that stored what the hook reports has committed
    (the hookspecs promise a stored result). A plugin's fault is logged, never raised: a broken
    plugin must not fail the run whose result is already stored.
    """

    def __init__(self, manager: pluggy.PluginManager) -> None:
        self._hook = manager.hook

    @property
    def run_finished_takes(self) -> frozenset[str]:
        """The arguments of ``scenariokit_run_finished`` some implementation takes (none: no plugin
        implements it, or none takes an argument).

        An implementation names only the arguments it needs (pluggy hands it those), as the server's
        run metrics take ``run`` alone: what none takes (the run's scenario, its streak) is not read
        from the store, and the hook is given None for it.
        """
        impls = self._hook.scenariokit_run_finished.get_hookimpls()
        return frozenset(name for impl in impls for name in impl.argnames)

    def run_started(self, *, run: Run, scenario: Scenario) -> None:
        """Fire ``scenariokit_run_started`` for a run a worker has claimed (its lease is stored)."""
        try:
            self._hook.scenariokit_run_started(run=run, scenario=scenario)
        except Exception:  # a plugin's fault must not fail the run
            log.exception("plugin hook scenariokit_run_started failed")

    def run_finished(self, *, run: Run, scenario: Scenario | None, streak: RunStreak | None) -> None:
        """Fire ``scenariokit_run_finished`` for a run whose outcome is committed; ``scenario`` and
        ``streak`` are None where no implementation takes them (:attr:`run_finished_takes`).

        Not fired for a run whose scenario is gone when an implementation takes the scenario: none
        is handed None for what it asked for.
        """
        if scenario is None and "scenario" in self.run_finished_takes:
            return
        try:
            self._hook.scenariokit_run_finished(run=run, scenario=scenario, streak=streak)
        except Exception:  # a plugin's fault must not fail the run
            log.exception("plugin hook scenariokit_run_finished failed")
