"""Running the shell commands of the documentation as a newcomer would: in a clean environment.

The guides' examples are run in a subprocess whose environment has none of the suite's ``SCENARIOKIT_*``
settings (the suite sets a secret key, and CI may set more), with this virtualenv's ``bin`` first on
``PATH`` so that ``scenariokit`` and ``pytest`` are the ones under test.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a fresh shell: no ``SCENARIOKIT_*`` or pytest settings, this venv first."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("SCENARIOKIT_", "PYTEST_")) and name not in ("COLUMNS", "LINES")
    }
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', os.defpath)}"
    env.update(extra)
    return env


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def without_durations(text: str) -> str:
    """``text`` with durations (``0.84 s``, ``in 6.3 s``, ``time="1.120"``) replaced by ``T``."""
    text = re.sub(r"\b\d+\.\d+ s\b", "T s", text)
    return re.sub(r'time="[\d.]+"', 'time="T"', text)
