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

// The warm-ups' page: what is typed in its field, its button writes below it.
const PAGE = '<input id="name"><button id="go">go</button><p id="out"></p><script>'
  + 'go.onclick = () => { out.textContent = document.getElementById("name").value; };</script>';

// Runs `work` with `TMPDIR` and `HOME` in `env` pointing at `scratch`, and puts them back after.
async function inScratch(env, scratch, work) {
  const saved = { TMPDIR: env.TMPDIR, HOME: env.HOME };
  Object.assign(env, { TMPDIR: scratch, HOME: scratch });
  try {
    return await work();
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete env[name];
      else env[name] = value;
    }
  }
}

// `core` is the driver's loaded coreBundle.js; `env` the process's own environment object (not a
// proxy that records what is read); `launch` Playwright's launch options for the workers' browser.
async function warmUp(core, env, { launch, scratch }) {
  await inScratch(env, scratch, async () => {
    const playwright = core.inprocess.createInProcessPlaywright();
    const browser = await playwright.chromium.launch(launch);
    try {
      const page = await browser.newPage();
      await page.setContent(PAGE);
      await page.fill('#name', 'warm');
      await page.click('#go');
      await page.locator('#out').textContent();
      await page.close();
    } finally {
      await browser.close();
    }
  });
}

// The warm-up of the driver zygote, which forks every run's driver from its own heap: a run's work as a
// driver does it. Its protocol goes through a DispatcherConnection of the driver's own kind (binary
// as base64, every message as JSON text both ways, as over a worker's pipe), the page is fetched
// from a server on 127.0.0.1 (closed before the zygote forks anything), and the run's calls are a
// worker's: a context, a page, goto, fill, click, an expect. Every object the protocol made is kept
// in `kept` (the zygote's, for as long as it lives): a V8 hidden class lives only while some object
// of it does, and with it the inline caches and the transitions that name it. Collected with the
// warm-up's objects, every forked driver made them all again (a tenth of its CPU in inline-cache
// misses, measured with perf on 2026-11-29).
async function warmUpAsDriver(core, env, { launch, scratch }, kept) {
  const site = require('http').createServer((request, response) => {
    response.writeHead(200, { 'content-type': 'text/html' }).end(PAGE);
  });
  await new Promise((resolve, reject) => site.once('error', reject).listen(0, '127.0.0.1', resolve));
  try {
    await inScratch(env, scratch, async () => {
      const { DispatcherConnection, RootDispatcher, PlaywrightDispatcher, createPlaywright } = core.server;
      const dispatchers = new DispatcherConnection();
      const record = dispatchers._dispatcherByGuid.set;
      dispatchers._dispatcherByGuid.set = function (guid, dispatcher) {
        kept.push(dispatcher, dispatcher._object);
        return record.call(this, guid, dispatcher);
      };
      new RootDispatcher(dispatchers, async (scope, { sdkLanguage }) =>
        new PlaywrightDispatcher(scope, createPlaywright({ sdkLanguage, isClientCollocatedWithServer: true })));
      // the client: Playwright's own, of the class its in-process connection is (the module keeps it)
      const Connection = core.inprocess.createInProcessPlaywright()._connection.constructor;
      const client = new Connection();
      const across = (to) => (message) => {
        const received = JSON.parse(JSON.stringify(message));  // as it arrives over a pipe: text, parsed
        kept.push(received);
        setImmediate(() => to.dispatch(received));
      };
      dispatchers.onmessage = across(client);
      client.onmessage = across(dispatchers);
      const playwright = await client.initializePlaywright();
      const browser = await playwright.chromium.launch(launch);
      try {
        const context = await browser.newContext();
        const page = await context.newPage();
        await page.goto(`http://127.0.0.1:${site.address().port}/`);
        await page.fill('#name', 'warm');
        await page.click('#go');
        const outcome = await page.locator('#out')._expect('to.have.text', {
          expectedText: [{ string: 'warm', normalizeWhiteSpace: true }],
          isNot: false,
          useInnerText: false,
          timeout: 30000,
        });
        if (!outcome.matches) throw new Error(`the warm-up's page did not answer: ${JSON.stringify(outcome)}`);
        await context.close();
      } finally {
        await browser.close();
      }
    });
  } finally {
    site.closeAllConnections();
    await new Promise((resolve) => site.close(resolve));
  }
}

// the exit code of a Node whose warm-up failed (driver_snapshot.WARM_UP_FAILED on the pool's side)
const WARM_UP_FAILED = 3;

module.exports = { warmUp, warmUpAsDriver, WARM_UP_FAILED };
