"""Prototype bench: per-run CPU of the driver (and its launcher, and the zygote's share) through Playwright Python.

    python proto/measure.py RUNS [ZYGOTE_PID]

PLAYWRIGHT_NODEJS_PATH says which launcher. Each run: a fresh Playwright (its own driver), launch the
headless shell, new page, goto, fill, click, expect, close. The driver's and the launcher's
utime+stime are read from /proc just before Playwright stops (exit cost not included).
"""

import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
from _shared import serve_page  # noqa: E402
from playwright.async_api import async_playwright, expect  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def reaped(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / TICK


def faults(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def children(pid: int) -> set[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return {int(x) for x in f.read().split()}


async def main() -> None:
    runs = int(sys.argv[1])
    zygote = int(sys.argv[2]) if len(sys.argv) > 2 else None
    server, url = await serve_page()
    driver_cpu, launcher_cpu, walls, flt, stops, browser_cpu = [], [], [], [], [], []
    zygote_before = cpu(zygote) if zygote else 0.0
    for _ in range(runs):
        began = time.perf_counter()
        before = children(zygote) if zygote else set()
        mine = children(os.getpid())
        manager = async_playwright()
        playwright = await manager.__aenter__()
        (launcher,) = children(os.getpid()) - mine
        browser = await playwright.chromium.launch(executable_path="/usr/bin/chromium-headless-shell")
        page = await browser.new_page()
        await page.goto(url)
        await page.fill("#name", "bench")
        await page.click("#go")
        await expect(page.locator("#out")).to_have_text("Hello bench")
        await browser.close()
        if zygote:
            (between,) = children(zygote) - before
            (driver,) = children(between)
            driver_cpu.append(cpu(driver))
            browser_cpu.append(reaped(driver))
            flt.append(faults(driver))
            launcher_cpu.append(cpu(launcher))
        else:
            driver_cpu.append(cpu(launcher))
            browser_cpu.append(reaped(launcher))
            flt.append(faults(launcher))
            launcher_cpu.append(0.0)
        t = time.perf_counter()
        await manager.__aexit__(None, None, None)
        stops.append(time.perf_counter() - t)
        walls.append(time.perf_counter() - began)
    zygote_share = (cpu(zygote) - zygote_before) / runs if zygote else 0.0
    await server.cleanup()
    skip = 1  # the first run warms caches of this process

    def avg(values: list[float]) -> float:
        return sum(values[skip:]) / len(values[skip:]) * 1000

    print(f"runs {runs - skip}: driver {avg(driver_cpu):.0f} ms, launcher {avg(launcher_cpu):.0f} ms, "
          f"zygote share {zygote_share * 1000:.0f} ms, wall {avg(walls):.0f} ms; "
          f"stop {avg(stops):.0f} ms, browser (reaped by the driver) {avg(browser_cpu):.0f} ms, faults {sum(flt[1:]) // (runs - 1)}, driver per run {[round(x * 1000) for x in driver_cpu]}")


asyncio.run(main())
