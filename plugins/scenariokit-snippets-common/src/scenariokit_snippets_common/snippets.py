"""The snippets: each is step-code source run as the body of ``async def __snippet__(args)``.

Every snippet takes its options as one mapping (``runSnippet("common.login_form", {"username": ...})``)
or, for the common cases, positionally (``runSnippet("common.login_form", [username, password])``).
"""

from __future__ import annotations

import attrs


@attrs.frozen
class CommonSnippet:
    """A snippet with its alias, a title and what it takes and returns."""

    alias: str
    title: str
    usage: str
    code: str


# Shared by the snippets: options from one mapping, or from positional args named in ``names``.
_OPTIONS = """\
def _options(names):
    if len(args) == 1 and isinstance(args[0], dict):
        return dict(args[0])
    if len(args) > len(names):
        raise TypeError(f"takes at most {len(names)} positional arguments ({', '.join(names)})")
    return dict(zip(names, args))
"""

LOGIN_FORM = (
    _OPTIONS
    + """
options = _options(("username", "password", "url"))
missing = [key for key in ("username", "password") if options.get(key) is None]
if missing:
    raise ValueError("common.login_form needs " + " and ".join(missing))
url = options.get("url")
if url:
    if "://" not in url:
        url = helpers.getEnvUrl().rstrip("/") + "/" + url.lstrip("/")
    await page.goto(url)


async def _first(candidates, what):
    for selector in candidates:
        found = page.locator(selector)
        if await found.count():
            return found.first
    raise LookupError(f"common.login_form: no {what} field found (tried {', '.join(candidates)})")


user_field = await _first(
    [options["username_selector"]] if options.get("username_selector") else [
        "input[autocomplete=username]", "input[name=username]", "input[name=email]", "input[type=email]",
        "#username", "#email", "input[name=login]", "input[name=user]",
    ],
    "username",
)
password_field = await _first([options.get("password_selector") or "input[type=password]"], "password")
await user_field.fill(str(options["username"]))
await password_field.fill(str(options["password"]))
submit = options.get("submit_selector")
if submit:
    await page.locator(submit).first.click()
else:
    button = page.locator(
        "form:has(input[type=password]) :is(button[type=submit], input[type=submit], button:not([type]))"
    )
    if await button.count():
        await button.first.click()
    else:
        await password_field.press("Enter")
if options.get("wait_for"):
    await page.locator(options["wait_for"]).first.wait_for(state="visible")
else:
    await page.wait_for_load_state()
return page.url
"""
)

WAIT_FOR_NETWORK_IDLE = (
    _OPTIONS
    + """
options = _options(("timeout",))
timeout = options.get("timeout", 10000)
await page.wait_for_load_state("networkidle", timeout=timeout)
"""
)

ACCEPT_COOKIE_BANNER = (
    _OPTIONS
    + """
import asyncio
import re
import time

options = _options(("timeout",))
# Buttons of the common consent platforms (OneTrust, Cookiebot, Didomi, TrustArc, cookieconsent, ...).
selectors = [
    *options.get("selectors", []),
    "#onetrust-accept-btn-handler", "#CybotCookiebotDialogBodyLevelButtonLevelOptinAllowAll",
    "#CybotCookiebotDialogBodyButtonAccept", "#didomi-notice-agree-button", "#truste-consent-button",
    "#accept-cookies", "#acceptCookies", ".cc-allow", ".cc-accept", ".cc-dismiss", ".fc-cta-consent",
    "[data-testid=cookie-accept]", "[data-cookiefirst-action=accept]", "#L2AGLb",
]
texts = [
    *options.get("texts", []),
    "Accept all cookies", "Accept all", "Accept cookies", "Allow all cookies", "Allow all", "Allow cookies",
    "Accept", "I accept", "I agree", "Agree and close", "Agree", "Got it",
    "Alle Cookies akzeptieren", "Alle akzeptieren", "Akzeptieren", "Zustimmen", "Tout accepter", "Accepter",
    "J'accepte", "Aceptar todo", "Aceptar", "Accetta tutti", "Accetta", "Alles accepteren", "Accepteren",
    "Aceitar todos", "Aceitar", "Zaakceptuj wszystkie", "Acceptera alla", "Hyväksy kaikki",
]
patterns = [re.compile(r"^\\s*" + re.escape(text) + r"[\\s!.]*$", re.IGNORECASE) for text in texts]
# Where a banner's button with a plain text ("Accept", "Agree") may be: never anywhere on the page,
# or a login form's "Accept" would be clicked.
banner = (
    ":is([id*=cookie i], [class*=cookie i], [id*=consent i], [class*=consent i], [id*=gdpr i], "
    "[class*=gdpr i], [aria-label*=cookie i], [aria-label*=consent i], [role=dialog], [aria-modal=true])"
)


def _candidates(frame):
    yield from (frame.locator(selector) for selector in selectors)
    scopes = [frame.locator(banner)]
    if frame != page.main_frame:
        scopes.append(frame.locator("body"))  # a consent platform's own frame
    for scope in scopes:
        for role in ("button", "link"):
            yield from (scope.get_by_role(role, name=pattern) for pattern in patterns)


async def _click_first_visible(frame):
    for candidate in _candidates(frame):
        try:
            for index in range(await candidate.count()):
                item = candidate.nth(index)
                if await item.is_visible():
                    await item.click(timeout=2000)
                    return True
        except Exception:  # a frame that navigated away or detached: look at the others
            return False
    return False


deadline = time.monotonic() + options.get("timeout", 2000) / 1000
while True:
    for frame in page.frames:
        if await _click_first_visible(frame):
            log("common.accept_cookie_banner: accepted the cookie banner")
            return True
    if time.monotonic() >= deadline:
        return False
    await asyncio.sleep(0.2)
"""
)

FILL_FORM = """\
if len(args) != 1 or not isinstance(args[0], dict):
    raise TypeError("common.fill_form takes one mapping of label -> value")
filled = 0
for label, value in args[0].items():
    field = page.get_by_label(label).first
    kind = await field.evaluate("e => e.tagName.toLowerCase() + ':' + (e.type || '').toLowerCase()")
    if isinstance(value, bool) or kind in ("input:checkbox", "input:radio"):
        await field.set_checked(bool(value))
    elif kind.startswith("select:"):
        await field.select_option(value if isinstance(value, list) else str(value))
    else:
        await field.fill(str(value))
    filled += 1
return filled
"""

SNIPPETS: dict[str, CommonSnippet] = {
    snippet.alias: snippet
    for snippet in (
        CommonSnippet(
            alias="common.login_form",
            title="Fill and submit a username/password form",
            usage="{username, password, url?, username_selector?, password_selector?, submit_selector?, "
            "wait_for?} or [username, password, url?]; returns the page URL after submitting",
            code=LOGIN_FORM,
        ),
        CommonSnippet(
            alias="common.wait_for_network_idle",
            title="Wait until the page has had no network traffic for 500 ms",
            usage="{timeout?: milliseconds, default 10000} or [timeout]",
            code=WAIT_FOR_NETWORK_IDLE,
        ),
        CommonSnippet(
            alias="common.accept_cookie_banner",
            title="Click the accept button of a cookie consent banner, if one shows",
            usage="{timeout?: milliseconds to wait for a banner, default 2000, texts?: [...], "
            "selectors?: [...]} or [timeout]; returns True when it clicked, False when none showed",
            code=ACCEPT_COOKIE_BANNER,
        ),
        CommonSnippet(
            alias="common.fill_form",
            title="Fill form fields by their labels",
            usage="{label: value, ...}: text for inputs, an option for selects, True/False for checkboxes; "
            "returns how many fields it filled",
            code=FILL_FORM,
        ),
    )
}
