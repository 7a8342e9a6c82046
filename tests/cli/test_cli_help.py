"""Each ``scenariokit`` command's ``--help`` teaches: a description, its options and worked examples."""

from __future__ import annotations

import pytest

from scenariokit.cli import main


@pytest.mark.parametrize(
    ("command", "example"),
    [
        ("serve", "scenariokit serve --no-scheduler --database-url postgresql+asyncpg://"),
        ("worker", "scenariokit worker --database-url postgresql+asyncpg://"),
        ("db", "scenariokit db upgrade --database-url"),
        ("export", "scenariokit export 3f2a...-uuid --include-environment -o checkout.scenario.yaml"),
        ("import", "scenariokit export --include-environment | scenariokit import -"),
        ("run", "scenariokit run checks/*.scenario.yaml --env staging"),
    ],
)
def test_each_command_help_shows_examples(
    command: str, example: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main([command, "--help"])
    shown = capsys.readouterr().out

    assert stopped.value.code == 0
    assert shown.startswith(f"usage: scenariokit {command}")
    assert "examples:" in shown and example in shown
    assert "--database-url" in shown or command == "run"
