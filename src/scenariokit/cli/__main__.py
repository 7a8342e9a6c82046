"""``python -m scenariokit.cli``: the same as the ``scenariokit`` command."""

from scenariokit.cli import main

raise SystemExit(main())
