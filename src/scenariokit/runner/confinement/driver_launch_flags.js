'use strict';
// How a driver the pool prepared launches Chromium: the start-up snapshot's build (driver_snapshot.js,
// which loads this file with its own loader) and the driver zygote (driver_zygote.js) patch the loaded
// driver's Chromium with this, so every run's driver started or forked from them launches so.
//
// The network service runs in the browser process (Chromium's feature NetworkServiceInProcess2): one
// process fewer per browser, which for a browser that lives for one short run is about a quarter of
// its CPU (the process's start, its IPC). Pages see the same network: the same code serves their
// requests, only in another process. Chromium keeps only the last --enable-features switch on its
// command line, and Playwright's own carries features it needs (its screenshots' surface), so the
// feature is merged into that one switch, never given as a second: any --enable-features among the
// launch's own arguments is merged into the same switch too. A driver started the ordinary way (no
// snapshot, no zygote) launches Chromium as Playwright does.

const IN_PROCESS_FEATURES = ['NetworkServiceInProcess2'];
const ENABLE = '--enable-features=';

// `args` with every --enable-features switch merged into one, at the place of the last, holding
// `features` too (each name once, in the order first given).
function withFeatures(args, features) {
  const names = [];
  let last = -1;
  args.forEach((arg, at) => {
    if (!arg.startsWith(ENABLE)) return;
    names.push(...arg.slice(ENABLE.length).split(',').filter(Boolean));
    last = at;
  });
  const merged = `${ENABLE}${[...new Set([...names, ...features])].join(',')}`;
  if (last < 0) return [...args, merged];
  return args.flatMap((arg, at) => (at === last ? [merged] : arg.startsWith(ENABLE) ? [] : [arg]));
}

// Patch the Chromium of `core` (the driver's loaded coreBundle.js) so that its launches carry
// `features`. Returns whether it could: a Playwright whose Chromium builds its arguments otherwise
// is left as it is.
function launchChromiumWith(core, features = IN_PROCESS_FEATURES) {
  const playwright = core.server?.createPlaywright?.({ sdkLanguage: 'python' });
  const chromium = playwright?.chromium && Object.getPrototypeOf(playwright.chromium);
  const own = chromium?._innerDefaultArgs;
  if (typeof own !== 'function') return false;
  chromium._innerDefaultArgs = function innerDefaultArgs(options) {
    return withFeatures(own.call(this, options), features);
  };
  return true;
}

module.exports = { IN_PROCESS_FEATURES, launchChromiumWith, withFeatures };
