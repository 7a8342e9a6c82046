"""The plugin manager: hook specifications, entry-point plugins and the built-in defaults."""

from __future__ import annotations

import pluggy

from scenariokit import hookspecs

hookimpl = pluggy.HookimplMarker("scenariokit")

#: setuptools entry-point group of scenariokit plugins
ENTRY_POINT_GROUP = "scenariokit"


def get_plugin_manager(*, load_entry_points: bool = True) -> pluggy.PluginManager:
    """A new plugin manager with the specs, the installed plugins and the built-in defaults.

    The built-ins register through the same hooks a third-party plugin uses (``trylast``), so an
    installed plugin can override any of them.
    """
    from scenariokit import builtin_plugins

    manager = pluggy.PluginManager("scenariokit")
    manager.add_hookspecs(hookspecs)
    manager.register(builtin_plugins, name="scenariokit.builtin")
    if load_entry_points:
        manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    return manager
