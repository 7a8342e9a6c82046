"""Step code without a browser: names, snippets, failures, masking, and the plugin hooks a worker calls."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

import scenariokit.domain.job as domain_job
import scenariokit.runner.worker.stepcode as stepcode
from scenariokit.domain import code as domain_code
from scenariokit.domain.job import CredentialValue, RunJob, StepJob, compiled, step_job
from scenariokit.domain.model import RunErrorKind, Step
from scenariokit.runner.worker.plugin_hooks import PluginHooks
from scenariokit.runner.worker.stepcode import (
    CredentialBook,
    SnippetLibrary,
    StepHelpers,
    StepNamespace,
    check_syntax,
    compile_step,
    describe_failure,
    mask_secrets,
)


def step(code: str, order: int = 1) -> StepJob:
    return StepJob(id=uuid.uuid4(), order=order, title=None, exec_code=code, timeout_seconds=5)


def job(env: dict[str, Any] | None = None, **fields: Any) -> RunJob:
    return RunJob(
        run_id=uuid.uuid4(),
        scenario_id=uuid.uuid4(),
        scenario_name="unit",
        steps=(),
        env_name="staging",
        env_data=env or {},
        artifacts_dir=Path("unused"),
        **fields,
    )


class Snippets:
    """A plugin snippet source."""

    def __init__(self, **codes: str) -> None:
        self.codes = codes

    def get(self, alias: str) -> str | None:
        return self.codes.get(alias)


def namespace(
    run_job: RunJob | None = None, *, sources: tuple[Snippets, ...] = ()
) -> tuple[StepNamespace, list[tuple[str, str]]]:
    lines: list[tuple[str, str]] = []
    run_job = run_job or job()
    names = StepNamespace(
        page=None,
        context=None,
        browser=None,
        helpers=StepHelpers(run_job),
        snippets=SnippetLibrary(run_job.snippets, sources),
        log_sink=lambda level, message: lines.append((level, message)),
    )
    return names, lines


async def failure_of(code: str, run_job: RunJob | None = None) -> tuple[RunErrorKind, str]:
    names, _ = namespace(run_job)
    the_step = step(code)
    with pytest.raises(BaseException) as caught:
        await names.run(compile_step(the_step))
    return describe_failure(caught.value, the_step)


# --- mask_secrets --------------------------------------------------------------------------------


def test_mask_secrets_replaces_every_occurrence_of_every_secret() -> None:
    assert mask_secrets("a=hunter2 b=hunter2 c=s3cr3t", ["hunter2", "s3cr3t"]) == "a=*** b=*** c=***"


def test_mask_secrets_masks_a_longer_secret_whole_before_one_it_contains() -> None:
    assert mask_secrets("token abc-123-xyz", ["abc", "abc-123-xyz"]) == "token ***"


def test_mask_secrets_ignores_empty_secrets_and_leaves_clean_text_alone() -> None:
    assert mask_secrets("nothing to hide", ["", "absent"]) == "nothing to hide"


# --- helpers.getEnvUrl ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "key", "expected"),
    [
        ({"admin": "http://a", "url": "http://u"}, "admin", "http://a"),
        ({"url": "http://u", "baseUrl": "http://b"}, None, "http://u"),
        ({"url": "http://u"}, "missing", "http://u"),
        ({"baseUrl": "http://b"}, None, "http://b"),
        ({"url": "", "baseUrl": "http://b"}, None, "http://b"),
    ],
)
def test_get_env_url_takes_the_key_then_url_then_base_url(
    data: dict[str, str], key: str | None, expected: str
) -> None:
    helpers = StepHelpers(job(data))

    assert helpers.getEnvUrl(key) == expected
    assert helpers.get_env_url(key) == expected


def test_get_env_url_without_any_url_names_every_key_it_tried() -> None:
    helpers = StepHelpers(job({"other": 1}))

    with pytest.raises(LookupError) as caught:
        helpers.getEnvUrl("adminUrl")

    assert (
        str(caught.value) == "environment 'staging' has no URL: tried data keys 'adminUrl', 'url', 'baseUrl'"
    )


def test_helpers_env_is_the_environment_data() -> None:
    assert StepHelpers(job({"user": "bob", "retries": 3})).env == {"user": "bob", "retries": 3}


def test_get_env_url_reads_the_data_as_given_no_environment_is_rebuilt() -> None:
    """Data an environment's rules refuse today (a NaN) does not stop a run that asks for its URL."""
    helpers = StepHelpers(job({"url": "http://u", "ratio": float("nan")}))
    helpers.env["url"] = "http://changed"  # step code may edit helpers.env; the URL follows

    assert helpers.getEnvUrl() == "http://changed"


def test_plugin_helpers_are_added_but_never_replace_documented_names() -> None:
    helpers = StepHelpers(job({"url": "http://u"}), {"today": "2024-01-01", "env": "plugin's"})

    assert helpers.today == "2024-01-01"  # type: ignore[attr-defined]
    assert helpers.env == {"url": "http://u"}


# --- helpers.credentials -------------------------------------------------------------------------


def test_credentials_by_alias_read_as_attributes_or_items() -> None:
    book = CredentialBook([CredentialValue(alias="admin", username="alice", secret="pw")])

    assert (book["admin"].username, book["admin"].secret) == ("alice", "pw")
    assert (book["admin"]["username"], book["admin"]["secret"]) == ("alice", "pw")
    assert "pw" not in repr(book["admin"])
    assert list(book) == ["admin"]


def test_unknown_credential_alias_names_the_linked_ones() -> None:
    book = CredentialBook([CredentialValue(alias="admin", username="alice", secret="pw")])

    with pytest.raises(KeyError) as caught:
        book["root"]

    assert str(caught.value) == "no credential linked under alias 'root' (linked: 'admin')"


# --- syntax --------------------------------------------------------------------------------------


def test_check_syntax_names_the_step_and_line_of_each_bad_step() -> None:
    good = step("await page.goto('http://x')\nprint('top-level await is fine')", order=1)
    bad = step("x = 1\ny = (\n", order=2)
    worse = step("return 5", order=3)

    problems = check_syntax([worse, good, bad])

    assert [(p.step_id, p.order, p.lineno) for p in problems] == [(bad.id, 2, 2), (worse.id, 3, 1)]
    assert problems[0].describe() == "SyntaxError: '(' was never closed (line 2)"
    assert "'return' outside function" in problems[1].msg


def _count_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    compiles: list[str] = []
    real = domain_code.compile_step_code

    def counting(code: str, filename: str) -> Any:
        compiles.append(filename)
        return real(code, filename)

    monkeypatch.setattr(domain_job, "compile_step_code", counting)
    monkeypatch.setattr(stepcode, "compile_step_code", counting)
    return compiles


async def test_a_job_step_is_compiled_once_and_the_runner_uses_that_compile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compiles = _count_compiles(monkeypatch)
    good = step_job(Step(exec_code="import asyncio\nawait asyncio.sleep(0)\nlog('ran')", order=1))
    bad = step_job(Step(exec_code="x = (", order=2))
    assert compiles == ["<step 1>", "<step 2>"]
    assert good.compiled_code is not None and good.syntax_error is None
    assert bad.compiled_code is None and bad.syntax_error == (1, "'(' was never closed")

    problems = check_syntax([good, bad])
    assert compiled(good) is good
    names, lines = namespace()
    await names.run(compile_step(good))

    assert [(p.step_id, p.lineno) for p in problems] == [(bad.id, 1)]
    assert lines == [("info", "ran")]
    assert compiles == ["<step 1>", "<step 2>"]  # the syntax check and the run compiled nothing more


# --- failures ------------------------------------------------------------------------------------


async def test_an_error_reads_type_message_and_the_line_in_the_step() -> None:
    assert await failure_of("x = 1\n\ny = {}['nope']") == (RunErrorKind.ERROR, "KeyError: 'nope' (line 3)")


async def test_an_assertion_is_its_own_kind_with_its_message() -> None:
    assert await failure_of("assert 1 == 2, 'numbers differ'") == (
        RunErrorKind.ASSERTION,
        "numbers differ (line 1)",
    )


async def test_a_bare_assertion_quotes_its_source_line() -> None:
    assert await failure_of("value = 3\nassert value == 4") == (
        RunErrorKind.ASSERTION,
        "assertion failed: assert value == 4 (line 2)",
    )


async def test_a_failure_inside_a_snippet_names_both_lines() -> None:
    run_job = job(snippets={"boom": "x = 1\nraise ValueError('bad ' + str(args[0]))"})

    assert await failure_of("print('hi')\nawait runSnippet('boom', [7])", run_job) == (
        RunErrorKind.ERROR,
        "ValueError: bad 7 (line 2, in snippet 'boom' line 2)",
    )


async def test_exiting_the_interpreter_is_a_step_error() -> None:
    assert await failure_of("import sys\nsys.exit(4)") == (RunErrorKind.ERROR, "SystemExit: 4 (line 2)")


async def test_a_multi_line_message_gets_the_line_on_its_first_line() -> None:
    _, message = await failure_of("raise RuntimeError('first\\nsecond')")

    assert message == "RuntimeError: first (line 1)\nsecond"


# --- the namespace -------------------------------------------------------------------------------


async def test_print_and_log_write_to_the_run_log() -> None:
    names, lines = namespace()

    await names.run(compile_step(step("print('a', 1, sep='-')\nlog('careful', 'warning')\nlog('plain')")))

    assert lines == [("info", "a-1"), ("warning", "careful"), ("info", "plain")]


async def test_log_refuses_an_unknown_level() -> None:
    assert await failure_of("log('x', level='loud')") == (
        RunErrorKind.ERROR,
        "ValueError: log level must be one of debug, info, warning, error, not 'loud' (line 1)",
    )


async def test_steps_of_a_run_share_their_names() -> None:
    names, lines = namespace()

    await names.run(compile_step(step("user = 'bob'", order=1)))
    await names.run(compile_step(step("print(user)", order=2)))

    assert lines == [("info", "bob")]


async def test_snippets_bind_args_and_return_values() -> None:
    run_job = job(snippets={"join": "return '/'.join(args)", "none": "print(args)"})
    names, lines = namespace(run_job)

    assert await names.run_snippet("join", ["a", "b"]) == "a/b"
    assert await names.run_snippet("join", ("c",)) == "c"
    assert await names.run_snippet("join", "single") == "single"
    assert await names.run_snippet("none") is None
    assert lines == [("info", "[]")]


async def test_stored_snippets_win_over_plugin_sources_which_are_asked_next() -> None:
    names, _ = namespace(
        job(snippets={"greet": "return 'stored'"}),
        sources=(Snippets(greet="return 'plugin'", extra="return 'from plugin'"),),
    )

    assert await names.run_snippet("greet") == "stored"
    assert await names.run_snippet("extra") == "from plugin"
    with pytest.raises(LookupError, match="unknown snippet 'missing'"):
        await names.run_snippet("missing")


@pytest.mark.parametrize(
    ("code", "called"),
    [
        ("await page.goto(helpers.getEnvUrl())", frozenset()),
        ("await runSnippet('login', ['ada'])\nawait run_snippet('fill')", frozenset({"login", "fill"})),
        ("await run_snippet(alias='fill', args=[1])", frozenset({"fill"})),
        ("return await runSnippet('inner')", frozenset({"inner"})),  # snippet code
        ("async def go():\n    await runSnippet('x')\nawait go()", frozenset({"x"})),
        ("await runSnippet(name)", None),
        ("await runSnippet(f'log{suffix}')", None),
        ("await runSnippet(*aliases)", None),
        ("await runSnippet(**call)", None),
        ("call = runSnippet\nawait call('x')", None),
        ("await asyncio.gather(*map(runSnippet, ['a']))", None),
        ("await globals()['runSnippet']('x')", None),
        ("await getattr(helpers, 'x')", None),
        ("await eval('runSnippet(\"x\")')", None),
        ("import inspect", None),
        ("from sys import modules", None),
        ("await print.__self__.run_snippet('x')", None),
        ("(lambda: 0).__globals__", None),
        ("frame = error.__traceback__.tb_frame", None),
        ("await page.run_snippet('x')", None),
        ("if x print(x)", None),
    ],
)
def test_the_snippets_code_calls_are_read_from_it_or_it_may_call_any(
    code: str, called: frozenset[str] | None
) -> None:
    assert domain_code.snippets_called(code) == called


async def test_a_snippet_that_does_not_compile_says_which_and_where() -> None:
    names, _ = namespace(job(snippets={"broken": "x = 1\nif x print(x)"}))

    with pytest.raises(SyntaxError, match=r"in snippet 'broken' line 2: "):
        await names.run_snippet("broken")


# --- plugin hooks --------------------------------------------------------------------------------


def test_without_a_plugin_manager_the_hooks_answer_empty() -> None:
    hooks = PluginHooks(None)

    assert hooks.step_helpers(job()) == {}
    assert hooks.snippet_sources() == []
    assert hooks.extract_token({"cookies": [{"name": "token", "value": "t"}]}) is None
    assert hooks.browser_provider(job()) is None


def test_plugin_results_are_merged() -> None:
    class Hook:
        def scenariokit_step_helpers(self, job: RunJob) -> list[dict[str, Any] | None]:
            return [{"a": 1}, None, {"a": 2, "b": 3}]

        def scenariokit_snippet_sources(self) -> list[list[Snippets] | None]:
            return [[Snippets(x="1")], None, [Snippets(y="2")]]

    hooks = PluginHooks(Hook())

    assert hooks.step_helpers(job()) == {"a": 1, "b": 3}
    assert [source.codes for source in hooks.snippet_sources()] == [{"x": "1"}, {"y": "2"}]  # type: ignore[attr-defined]


def test_the_built_in_token_rule_prefers_local_storage_then_cookies() -> None:
    hooks = PluginHooks.load()
    state = {
        "cookies": [{"name": "token", "value": "from-cookie"}],
        "origins": [{"origin": "http://x", "localStorage": [{"name": "jwt", "value": "from-storage"}]}],
    }

    assert hooks.problem is None
    assert hooks.extract_token(state) == "from-storage"
    assert hooks.extract_token({"cookies": state["cookies"], "origins": []}) == "from-cookie"
    assert hooks.extract_token({"cookies": [], "origins": []}) is None


def test_plugin_helpers_add_names_and_replace_none_of_the_documented_ones() -> None:
    run_job = job({"url": "http://127.0.0.1/"})
    extras = {"env": {}, "credentials": None, "getEnvUrl": None, "_env_name": "x", "slack": "a client"}

    helpers = StepHelpers(run_job, extras)

    assert helpers.slack == "a client"  # type: ignore[attr-defined]
    assert helpers.env == {"url": "http://127.0.0.1/"} and helpers.getEnvUrl() == "http://127.0.0.1/"
    assert helpers.credentials is not None
    with pytest.raises(AttributeError, match="helpers has no attribute 'slak'; did you mean slack"):
        helpers.slak  # noqa: B018
