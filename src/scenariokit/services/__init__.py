"""The application service layer: the use cases REST, MCP, the CLI and the library all call.

Entry points stay thin: they parse, call a method here, and shape the result with
:mod:`scenariokit.formats.presenters`. Every business rule lives here or in the domain.
"""

from __future__ import annotations

import cattrs
import pluggy

from scenariokit.storage.ports import Store

from .audit import AuditService
from .authoring import AuthoringService
from .base import AuthoringControl, Context, NoAuthoring, NoRunControl, RunControl, RunSettings
from .catalog import CredentialService, EnvironmentService, SessionService, SnippetService
from .devices import DeviceService
from .operations import OperationsService, Readout
from .runs import RunService
from .scenarios import ScenarioService
from .schedules import ScheduleService
from .transfer import ImportReport, TransferService


class Services:
    """Every use case of one application, over one store."""

    def __init__(
        self,
        store: Store,
        *,
        plugins: pluggy.PluginManager | None = None,
        settings: RunSettings | None = None,
        control: RunControl | None = None,
    ) -> None:
        if plugins is None:
            from scenariokit.plugins import get_plugin_manager

            plugins = get_plugin_manager()
        self.context = Context(
            store=store,
            plugins=plugins,
            settings=settings or RunSettings(),
            control=control or NoRunControl(),
        )
        self.scenarios = ScenarioService(self.context)
        self.environments = EnvironmentService(self.context)
        self.credentials = CredentialService(self.context)
        self.snippets = SnippetService(self.context)
        self.sessions = SessionService(self.context)
        self.runs = RunService(self.context)
        self.schedules = ScheduleService(self.context)
        self.transfer = TransferService(self.context)
        self.authoring = AuthoringService(self.context)
        self.devices = DeviceService(self.context)
        self.audit = AuditService(self.context)
        self.operations = OperationsService(self.context)

    @property
    def store(self) -> Store:
        """The store the services write to."""
        return self.context.store

    @property
    def converter(self) -> cattrs.Converter:
        """The JSON converter of this application."""
        return self.context.converter

    def set_control(self, control: RunControl) -> None:
        """Route run requests (queued, cancel, release) to an executor, e.g. the scheduler."""
        self.context.control = control

    def set_authoring(self, authoring: AuthoringControl | None) -> None:
        """Hold authoring sessions with ``authoring`` (the scheduler's host); None: none are held here."""
        self.context.authoring = authoring if authoring is not None else NoAuthoring()


__all__ = [
    "AuditService",
    "AuthoringControl",
    "AuthoringService",
    "Context",
    "ImportReport",
    "NoRunControl",
    "OperationsService",
    "Readout",
    "RunControl",
    "RunSettings",
    "Services",
    "TransferService",
]
