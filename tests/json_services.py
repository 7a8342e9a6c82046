"""Services whose commands also take the REST JSON of their input, as a :class:`~scenariokit.Kit`'s do.

The services take typed commands (``scenariokit.formats.inputs``); tests write most records as the JSON
bodies the docs show, so they reach the services through the library's own door
(:class:`scenariokit.kit.JsonDoor`), which structures a mapping once with the services' converter.
"""

from __future__ import annotations

from typing import Any

from scenariokit.kit import JSON_COMMANDS, JsonDoor
from scenariokit.services import Services


class JsonServices:
    """``services`` with a :class:`JsonDoor` in front of each service that has commands."""

    def __init__(self, services: Services) -> None:
        self.typed = services
        self._doors = {
            name: JsonDoor(getattr(services, name), services.converter, commands)
            for name, commands in JSON_COMMANDS.items()
        }

    def __getattr__(self, name: str) -> Any:
        door = self._doors.get(name)
        return door if door is not None else getattr(self.typed, name)


def json_services(services: Services) -> Any:
    """``services`` taking REST JSON mappings too (typed as Any: it answers as Services does)."""
    return JsonServices(services)
