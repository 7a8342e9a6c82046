'use strict';
// The warm-up of a Node that holds Playwright's driver for many runs' drivers: the start-up
// snapshot's build (driver_snapshot.js, which loads this file with its own loader) and the driver
// zygote (driver_zygote.js). What a run's driver does first is done once there, so that the bytecode
// and feedback V8 makes for it are in the snapshot, or in the zygote that forks the drivers, instead
// of being made again in every run's driver.
//
// Playwright's in-process client drives the same server code (dispatchers, the browser's protocol,
// frames, input) a worker's driver runs. The browser's profile goes to the scratch folder (`TMPDIR`
// and `HOME` point there meanwhile), not to a worker's TMPDIR, which does not exist out here.

// `core` is the driver's loaded coreBundle.js; `env` the process's own environment object (not a
// proxy that records what is read); `launch` Playwright's launch options for the workers' browser.
async function warmUp(core, env, { launch, scratch }) {
  const saved = { TMPDIR: env.TMPDIR, HOME: env.HOME };
  Object.assign(env, { TMPDIR: scratch, HOME: scratch });
  try {
    const playwright = core.inprocess.createInProcessPlaywright();
    const browser = await playwright.chromium.launch(launch);
    try {
      const page = await browser.newPage();
      await page.setContent('<input id="name"><button id="go" onclick="out.textContent = name.value">go</button><p id="out"></p>');
      await page.fill('#name', 'warm');
      await page.click('#go');
      await page.locator('#out').textContent();
      await page.close();
    } finally {
      await browser.close();
    }
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete env[name];
      else env[name] = value;
    }
  }
}

// the exit code of a Node whose warm-up failed (driver_snapshot.WARM_UP_FAILED on the pool's side)
const WARM_UP_FAILED = 3;

module.exports = { warmUp, WARM_UP_FAILED };
