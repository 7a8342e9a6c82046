"""Checks of what a real browser shows, shared by the tests that drive the report pages."""

from __future__ import annotations

from playwright.async_api import Locator


async def loaded_image_width(image: Locator) -> int:
    """The natural width of an ``<img>`` once it has loaded; 0 when it cannot be shown.

    Not ``page.wait_for_function("...complete")``: only its first poll runs inside the DevTools
    evaluation, which Content-Security-Policy lets through. The polls after it call ``eval`` from the
    page, and a page whose policy forbids eval (every report page) refuses them, so such a wait fails
    whenever the image is still loading at the first poll.
    """
    width = await image.evaluate("img => img.decode().then(() => img.naturalWidth, () => 0)")
    assert isinstance(width, int)
    return width
