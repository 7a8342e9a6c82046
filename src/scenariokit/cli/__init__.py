"""The ``scenariokit`` command: serve, worker, db, export, import, run."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scenariokit.cli.run import add_run_command
from scenariokit.domain.errors import ScenarioKitError, ValidationError
from scenariokit.logs import LOG_FORMATS, LogFormat, configure_logging, parse_log_format

DESCRIPTION = """\
Store browser-automation test scenarios and run them in real Chromium.

Every command reads the same SCENARIOKIT_* environment variables as the server
(SCENARIOKIT_DATABASE_URL, SCENARIOKIT_SECRET_KEY, ...); flags win over them.
The default database is the SQLite file ./scenariokit.db, created on first use.
"""

EXAMPLES = """\
examples:
  scenariokit serve                                  # http://127.0.0.1:13000, docs at /docs
  scenariokit serve --host 0.0.0.0 --port 8080       # needs SCENARIOKIT_API_TOKENS (or --insecure)
  scenariokit worker --database-url postgresql+asyncpg://user@db/scenariokit --workers 4
  scenariokit db upgrade --database-url postgresql+asyncpg://user@db/scenariokit
  scenariokit export --include-environment -o scenarios.yaml
  scenariokit export --kind credential 0b8c...-uuid --include-secrets -o admin.yaml
  scenariokit import scenarios.yaml
  scenariokit run checkout.scenario.yaml --env staging.yaml --junit-xml report.xml
"""


def _settings(args: argparse.Namespace, **extra: Any) -> Any:
    from scenariokit.settings import Settings

    return Settings.from_env(
        database_url=getattr(args, "database_url", None),
        workers=getattr(args, "workers", None),
        **extra,
    )


def _add_database(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="sqlite:///path.db or postgresql+asyncpg://user@host/db (default: $SCENARIOKIT_DATABASE_URL "
        "or sqlite:///scenariokit.db)",
    )


def _add_log_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        help="text, or json: one JSON object a line with runId/requestId where they apply, the access log "
        "included (default text; $SCENARIOKIT_LOG_FORMAT)",
    )


def _log_format(args: argparse.Namespace) -> LogFormat:
    """The log format the command line or ``SCENARIOKIT_LOG_FORMAT`` asks for (text by default)."""
    given = getattr(args, "log_format", None)
    if given is not None:
        return parse_log_format(given)
    raw = os.environ.get("SCENARIOKIT_LOG_FORMAT", "").strip()
    try:
        return parse_log_format(raw) if raw else "text"
    except ValueError as exc:
        raise ValueError(f"SCENARIOKIT_LOG_FORMAT={raw!r} is invalid: {exc}") from None


# --- serve and worker -------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from scenariokit_server.app import run_server
    except ModuleNotFoundError as exc:
        raise ScenarioKitError(
            f"serving needs the server extra (no module named {exc.name!r}): "
            "python3 -m pip install 'scenariokit[server]'"
        ) from None

    settings = _settings(
        args,
        host=args.host,
        port=args.port,
        insecure=args.insecure or None,
        run_scheduler=False if args.no_scheduler else None,
        log_format=args.log_format,
    )
    run_server(settings, processes=args.processes)
    return 0


async def _work(settings: Any) -> None:
    from scenariokit.bootstrap import open_services, running_scheduler, stop_signals
    from scenariokit.settings import displayed_url

    signals = stop_signals()
    async with open_services(settings) as services:
        async with running_scheduler(services, settings=settings) as scheduler:
            print(
                f"scenariokit worker {scheduler.owner}: {settings.workers} worker process(es) on "
                f"{displayed_url(settings.database_url)}; sandbox: {scheduler.pool.sandbox_kind or 'none'}; "
                "Ctrl-C to stop",
                flush=True,
            )
            await signals.requested.wait()
            # SIGTERM: the runs under way finish (or go back to the queue); a second signal cuts it short
            await scheduler.drain(settings.drain_seconds, cut_short=signals.urgent)


def cmd_worker(args: argparse.Namespace) -> int:
    settings = _settings(args, lease_seconds=args.lease_seconds, log_format=args.log_format)
    asyncio.run(_work(settings))
    return 0


# --- db ---------------------------------------------------------------------------------------


async def _db(args: argparse.Namespace) -> str | None:
    from scenariokit.storage.opening import open_store
    from scenariokit.storage.sqlalchemy import sqlite_path

    settings = _settings(args)
    path = sqlite_path(settings.database_url)
    if args.action == "current" and path is not None and not path.exists():
        return None  # asking must not create the file (nor its key) that upgrade would
    store = await open_store(
        settings.database_url, secret_key=settings.secret_key, migrate=args.action == "upgrade"
    )
    try:
        revision = getattr(store, "current_revision", None)
        return await revision() if revision else None
    finally:
        await store.close()


async def _rotate_key(args: argparse.Namespace) -> None:
    from scenariokit.storage.opening import open_store
    from scenariokit.storage.secrets import KeyRotation, describe_fingerprints

    settings = _settings(args)
    store = await open_store(settings.database_url, secret_key=settings.secret_key)
    try:
        rotate = getattr(store, "rotate_keys", None)
        if rotate is None:
            raise ScenarioKitError(
                f"the store at {settings.database_url.split(':', 1)[0]}:… cannot rotate keys"
            )
        rotation: KeyRotation = await rotate()
    finally:
        await store.close()
    for column, count in rotation.counts.items():
        print(f"{column}: {count} re-encrypted")
    print(
        f"{rotation.total} secret(s) re-encrypted with the first key "
        f"(fingerprint {describe_fingerprints([rotation.fingerprint])}); the store now needs only that key"
    )


def _backup(args: argparse.Namespace) -> None:
    from scenariokit.storage.backup import backup_sqlite

    settings = _settings(args)
    artifacts = settings.artifacts_dir if args.artifacts else None
    made = backup_sqlite(settings.database_url, Path(args.path), artifacts_dir=artifacts)
    print(f"backed up {made.bytes} bytes to {made.path}")
    if made.artifacts is not None:
        print(f"artifacts copied to {made.artifacts}")
    if os.environ.get("SCENARIOKIT_SECRET_KEY", "").strip():
        where = "in SCENARIOKIT_SECRET_KEY"
    else:
        where = f"in {made.key_file}" if made.key_file else "nowhere this command can see"
    print(
        f"the key that decrypts its secrets is {where}: keep it apart from the backup, and give it to the "
        "server that opens the copy (a backup without its key cannot decrypt a secret)"
    )


def _restore(args: argparse.Namespace) -> None:
    from scenariokit.storage.backup import restore_sqlite

    settings = _settings(args)
    restored = restore_sqlite(
        Path(args.backup),
        settings.database_url,
        artifacts_dir=settings.artifacts_dir if args.artifacts else None,
        key_file=Path(args.key_file) if args.key_file else None,
    )
    print(f"restored {args.backup} to {restored.database}")
    if restored.artifacts is not None:
        print(f"artifacts restored to {restored.artifacts}")
    if restored.key_file is not None:
        print(f"key copied to {restored.key_file}")
    else:
        print("start the server with the key the backup was taken with (SCENARIOKIT_SECRET_KEY, --key-file)")


def cmd_db(args: argparse.Namespace) -> int:
    if args.action == "backup":
        _backup(args)
        return 0
    if args.action == "restore":
        _restore(args)
        return 0
    if args.action == "new-key":
        from scenariokit.storage.secrets import new_key

        print(new_key())
        return 0
    if args.action == "rotate-key":
        asyncio.run(_rotate_key(args))
        return 0
    revision = asyncio.run(_db(args))
    verb = "upgraded to" if args.action == "upgrade" else "at"
    print(f"database {verb} revision {revision or '(none: run `scenariokit db upgrade`)'}")
    return 0


# --- export and import ------------------------------------------------------------------------


def _uuid_list(raw: Sequence[str]) -> list[uuid.UUID]:
    values = [part.strip() for item in raw for part in item.split(",") if part.strip()]
    try:
        return [uuid.UUID(value) for value in values]
    except ValueError as exc:
        raise ValidationError(f"not a UUID: {exc}") from None


async def _export(args: argparse.Namespace) -> str:
    from scenariokit.bootstrap import open_services

    async with open_services(_settings(args)) as services:
        transfer = services.transfer
        ids = _uuid_list(args.ids)
        if args.kind == "scenario":
            return await transfer.export_scenarios(
                ids or None,
                include_environment=args.include_environment,
                credential_ids=_uuid_list(args.credential_ids),
                include_secrets=args.include_secrets,
            )
        if len(ids) != 1:
            raise ValidationError(f"--kind {args.kind} exports one record: give exactly one id")
        if args.kind == "environment":
            return await transfer.export_environment(ids[0], include_secrets=args.include_secrets)
        if args.kind == "credential":
            return await transfer.export_credential(ids[0], include_secrets=args.include_secrets)
        return await transfer.export_snippet(ids[0])


def cmd_export(args: argparse.Namespace) -> int:
    text = asyncio.run(_export(args))
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


async def _import(args: argparse.Namespace, text: str) -> dict[str, Any]:
    from scenariokit.bootstrap import open_services
    from scenariokit.services.caller import Caller, calling_as

    async with open_services(_settings(args)) as services:
        with calling_as(Caller(door="cli")):  # the audit log names the door
            report = await services.transfer.import_yaml(text, kind=args.kind)
    return report.to_json()


def cmd_import(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    report = asyncio.run(_import(args, text))
    for verb in ("created", "updated"):
        for kind, ids in sorted(report[verb].items()):
            for ident in ids:
                print(f"{verb} {kind} {ident}")
    counts = report.get("counts", {})
    print(f"{counts.get('created', 0)} created, {counts.get('updated', 0)} updated", file=sys.stderr)
    return 0


SERVE_EXAMPLES = """\
examples:
  scenariokit serve                                   # http://127.0.0.1:13000, Swagger UI at /docs
  SCENARIOKIT_API_TOKENS=s3cret scenariokit serve --host 0.0.0.0
                                                      # reachable from other machines, bearer token required
  scenariokit serve --no-scheduler --database-url postgresql+asyncpg://postgres@db/scenariokit
                                                      # API only; `scenariokit worker` processes run the runs
"""

WORKER_EXAMPLES = """\
examples:
  scenariokit worker --database-url postgresql+asyncpg://postgres@db/scenariokit --workers 4
  SCENARIOKIT_BROWSER_WS=ws://browsers:3000/ scenariokit worker   # drive a remote Chromium
"""

DB_EXAMPLES = """\
examples:
  scenariokit db upgrade --database-url postgresql+asyncpg://postgres@db/scenariokit
  scenariokit db current                              # the revision of ./scenariokit.db
  scenariokit db new-key                              # a random key for SCENARIOKIT_SECRET_KEY
  SCENARIOKIT_SECRET_KEY="$NEW,$OLD" scenariokit db rotate-key
                                                      # every secret re-encrypted with $NEW
  scenariokit db backup /backups/sk-2026-11-26.db --artifacts
                                                      # while the server runs; prints where the key is
  scenariokit db restore /backups/sk-2026-11-26.db --database-url sqlite:///srv/new/scenariokit.db \
      --artifacts --key-file /secure/scenariokit.key
"""

ROTATE_DESCRIPTION = """\
Re-encrypt every stored secret (credential secrets, session tokens, session storage
states) with the first key of SCENARIOKIT_SECRET_KEY, in one transaction.

SCENARIOKIT_SECRET_KEY holds one or more keys, comma-separated: the first encrypts,
all decrypt. To replace a key, put the new one first and the old one after it,
run this command, then drop the old key. The store records which keys it needs
(their fingerprints, never the keys): afterwards only the first. If any secret cannot
be decrypted with the keys given, nothing changes. Servers may keep running meanwhile,
as long as they were given both keys.
"""

ROTATE_EXAMPLES = """\
examples:
  NEW=$(scenariokit db new-key)
  SCENARIOKIT_SECRET_KEY="$NEW,$OLD" scenariokit db rotate-key --database-url postgresql+asyncpg://postgres@db/sk
                                                      # then give every process SCENARIOKIT_SECRET_KEY="$NEW"
  # the embedded SQLite default keeps its key in a file beside the database:
  SCENARIOKIT_SECRET_KEY="$NEW,$(cat scenariokit.key)" scenariokit db rotate-key
  echo "$NEW" > scenariokit.key
"""

EXPORT_EXAMPLES = """\
examples:
  scenariokit export -o all.scenario.yaml             # every scenario
  scenariokit export 3f2a...-uuid --include-environment -o checkout.scenario.yaml
                                                      # one scenario, runnable by `scenariokit run`
  scenariokit export --kind snippet 9c1d...-uuid -o login.snippet.yaml
  scenariokit export --kind credential 0b8c...-uuid --include-secrets -o admin.yaml
                                                      # secrets in clear text: keep the file safe
"""

IMPORT_EXAMPLES = """\
examples:
  scenariokit import checkout.scenario.yaml           # create or update by id
  scenariokit export --include-environment | scenariokit import - --database-url postgresql+asyncpg://postgres@db/sk
                                                      # copy the scenarios and their environments (linked
                                                      # credentials must be in the stream or stored there)
  scenariokit import staging.yaml --kind environment  # documents without a kind field
"""


# --- the parser -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``scenariokit`` command."""
    parser = argparse.ArgumentParser(
        prog="scenariokit",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log more (DEBUG)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="start the REST/MCP service",
        description="Start the service: REST under /api/v1, Swagger UI at /docs, MCP at /mcp, health at "
        "/health, Prometheus metrics at /metrics. Runs are executed by worker processes started with it. "
        "SIGTERM drains: /health answers 503 draining, no more runs are claimed, those under way finish "
        "for up to $SCENARIOKIT_DRAIN_SECONDS (default 30) and the rest go back to the queue; a second "
        "signal stops at once.",
        epilog=SERVE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("--host", help="address to bind (default 127.0.0.1; $SCENARIOKIT_HOST)")
    serve.add_argument("--port", type=int, help="port (default 13000; $SCENARIOKIT_PORT)")
    serve.add_argument("--workers", type=int, help="run worker processes (default: chosen for this machine)")
    serve.add_argument(
        "--no-scheduler",
        action="store_true",
        help="serve the API only, and let `scenariokit worker` processes run the scenarios "
        "($SCENARIOKIT_RUN_SCHEDULER=0)",
    )
    serve.add_argument(
        "--processes",
        type=int,
        default=1,
        metavar="N",
        help="serve with N processes on one port (SO_REUSEPORT), each with its own scheduler and workers; "
        "PostgreSQL only (default 1)",
    )
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="allow binding a non-loopback address without API tokens (anyone who reaches it can run code)",
    )
    _add_log_format(serve)
    _add_database(serve)
    serve.set_defaults(handler=cmd_serve)

    worker = commands.add_parser(
        "worker",
        help="execute queued runs without the HTTP server",
        description="Claim queued runs from the database and execute them. Start several against one "
        "PostgreSQL to spread runs over machines; a worker that dies has its runs finished as "
        "worker_lost once their lease expires. SIGTERM drains: no more claims, the runs under way "
        "finish for up to $SCENARIOKIT_DRAIN_SECONDS (default 30), the rest go back to the queue for "
        "another worker; a second signal stops at once.",
        epilog=WORKER_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    worker.add_argument("--workers", type=int, help="browsers at once (default: chosen for this machine)")
    worker.add_argument(
        "--lease-seconds", type=float, help="lease length (default 15; $SCENARIOKIT_LEASE_SECONDS)"
    )
    _add_log_format(worker)
    _add_database(worker)
    worker.set_defaults(handler=cmd_worker)

    db = commands.add_parser(
        "db",
        help="database: upgrade the schema, show its revision, make or rotate keys, back up and restore",
        description="Apply the schema migrations (the embedded SQLite default does this itself on first "
        "start), show the revision a database is at, make a key, or re-encrypt the stored secrets with a "
        "new key. Each action takes --database-url.",
        epilog=DB_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = db.add_subparsers(dest="action", required=True, metavar="ACTION")
    upgrade = actions.add_parser(
        "upgrade", help="apply the schema migrations", description="Apply every pending schema migration."
    )
    _add_database(upgrade)
    current = actions.add_parser(
        "current",
        help="show the revision the database is at",
        description="Show the migration revision the database is at (a missing SQLite file is not created).",
    )
    _add_database(current)
    rotate = actions.add_parser(
        "rotate-key",
        help="re-encrypt every stored secret with the first key of SCENARIOKIT_SECRET_KEY",
        description=ROTATE_DESCRIPTION,
        epilog=ROTATE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_database(rotate)
    backup = actions.add_parser(
        "backup",
        help="copy the embedded SQLite store while the server runs (SQLite's online backup API)",
        description="Write a consistent copy of the SQLite store to PATH, which must not exist, while the "
        'server keeps running and writing. PostgreSQL: use pg_dump (docs/deployment.md, "Backups"). '
        "The copy's secrets need the server's key, which is not copied: the command says where it is.",
    )
    backup.add_argument("path", metavar="PATH", help="the new backup file (never overwritten)")
    backup.add_argument(
        "--artifacts", action="store_true", help="also copy the artifacts folder, to PATH.artifacts"
    )
    _add_database(backup)
    restore = actions.add_parser(
        "restore",
        help="bring a backup back as a new SQLite store",
        description="Copy BACKUP to the SQLite file of --database-url, which must not exist yet.",
    )
    restore.add_argument("backup", metavar="BACKUP", help="a file written by `scenariokit db backup`")
    restore.add_argument(
        "--artifacts", action="store_true", help="also restore BACKUP.artifacts into the artifacts folder"
    )
    restore.add_argument(
        "--key-file", metavar="FILE", help="the key the backup was taken with, copied beside the database"
    )
    _add_database(restore)
    actions.add_parser(
        "new-key",
        help="print a new random key for SCENARIOKIT_SECRET_KEY",
        description="Print a new random Fernet key (no database is opened).",
    )
    db.set_defaults(handler=cmd_db)

    export = commands.add_parser(
        "export",
        help="write scenarios (or one environment, credential or snippet) as YAML",
        description="Write a YAML stream. With no ids every scenario is exported.",
        epilog=EXPORT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("ids", nargs="*", help="ids to export (repeat or comma-separate)")
    export.add_argument(
        "--kind", choices=["scenario", "environment", "credential", "snippet"], default="scenario"
    )
    export.add_argument("--include-environment", action="store_true", help="add the scenarios' environments")
    export.add_argument(
        "--credential-ids", action="append", default=[], metavar="ID[,ID]", help="credentials to include"
    )
    export.add_argument(
        "--include-secrets", action="store_true", help="write credential secrets in clear text"
    )
    export.add_argument("-o", "--output", metavar="FILE", help="file to write (default: standard output)")
    _add_database(export)
    export.set_defaults(handler=cmd_export)

    importer = commands.add_parser(
        "import",
        help="read a YAML stream into the database (one transaction)",
        description="Upsert by id: environments and credentials first, then scenarios and their links. "
        "Any error changes nothing.",
        epilog=IMPORT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    importer.add_argument("file", help="YAML file, or - for standard input")
    importer.add_argument(
        "--kind",
        choices=["scenario", "environment", "credential", "snippet"],
        default="scenario",
        help="kind of documents without a kind field (default scenario)",
    )
    _add_database(importer)
    importer.set_defaults(handler=cmd_import)

    add_run_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``scenariokit`` command."""
    args = build_parser().parse_args(argv)
    try:
        log_format = _log_format(args)
    except ValueError as exc:
        print(f"scenariokit: {exc}", file=sys.stderr)
        return 2
    configure_logging(log_format, level=logging.DEBUG if args.verbose else logging.INFO)
    for noisy in ("alembic", "mcp"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130
    except ValidationError as exc:
        print(f"scenariokit: {exc}", file=sys.stderr)
        return 2
    except (ScenarioKitError, ValueError, OSError) as exc:
        print(f"scenariokit: {exc}", file=sys.stderr)
        return 2
