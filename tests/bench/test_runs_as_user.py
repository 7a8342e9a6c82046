"""``bench/runs.py --as-user``: only its plumbing (which user, which command, which environment).

Nothing here measures anything; the bench itself is run by hand (docs/deployment.md).
"""

from __future__ import annotations

import os
import pwd
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import runs  # noqa: E402 - bench/ is a folder of scripts, not a package


def test_an_unknown_user_is_refused_naming_how_to_make_one() -> None:
    if os.geteuid() != 0:
        pytest.skip("--as-user first checks that the bench runs as root")
    with pytest.raises(SystemExit, match=r"no user 'no-such-bench-user'.*useradd -m no-such-bench-user"):
        runs.other_user("no-such-bench-user", None)


def test_root_is_not_an_ordinary_user() -> None:
    if os.geteuid() != 0:
        pytest.skip("--as-user first checks that the bench runs as root")
    with pytest.raises(SystemExit, match="'root' is root"):
        runs.other_user("root", None)


def test_not_root_is_refused() -> None:
    if os.geteuid() == 0:
        pytest.skip("only a bench run by someone else than root is refused")
    with pytest.raises(SystemExit, match="needs this bench to run as root"):
        runs.other_user("anyone", None)


def test_the_child_runs_as_that_user_with_this_tree_and_nothing_of_roots() -> None:
    ordinary = next(entry for entry in pwd.getpwall() if entry.pw_uid != 0)
    user = runs.OtherUser(ordinary.pw_name, Path("/home/u/venv/bin/python"))
    runuser, *rest = user.command()
    assert Path(runuser).name == "runuser"
    assert rest == ["-u", ordinary.pw_name, "--", "/home/u/venv/bin/python"]
    env = user.environment(BENCH.parent, "bubblewrap")
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(BENCH.parent / "src")
    assert env["SCENARIOKIT_SANDBOX"] == "bubblewrap"
    assert env["HOME"] == ordinary.pw_dir
    assert set(env) == {"PATH", "HOME", "LANG", "PYTHONPATH", "SCENARIOKIT_SANDBOX"}
