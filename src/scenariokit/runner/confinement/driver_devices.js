'use strict';
// What a run's driver leaves out when its worker asks: Playwright's list of devices.
//
// A driver sends that list to its client in the first objects of every connection (the initializer of
// LocalUtils: 207 devices, about 70 KB of JSON), which the client checks field by field and keeps as
// `playwright.devices`: 3 to 5 ms of a run's CPU between the two (docs/deployment.md), in every run.
// A worker never reads it. The device a run's browser settings name is resolved by the service into
// context options before the job reaches the worker (docs/browser.md), and step code is given no
// Playwright object. So a worker whose plugins launch no browser of their own
// (`scenariokit_browser_provider` is handed the Playwright object, and may read its devices) starts its
// driver with SK_DRIVER_DEVICES=none, and that driver (forked by the driver zygote, or started from the
// start-up snapshot) sends an empty list.
//
// The name is not SCENARIOKIT_*: /proc/<pid>/environ keeps what a process was started with, and no
// process in a sandbox shows a variable of the service's own.
// The variable is the worker's word to this code, not part of the driver's environment: it is taken out
// before the environment is checked against what loading the driver read of it (driver_environment.js,
// which may hold the list of variables), and the browser is started without it.

const VARIABLE = 'SK_DRIVER_DEVICES';
const ASKED = `${VARIABLE}=none`;

// Whether `env` asks for the devices to be left out; the variable is taken out of it. `env` is an
// environment object (process.env) or a list of NAME=value entries.
function takeAsk(env) {
  if (Array.isArray(env)) {
    const asked = env.includes(ASKED);
    for (let at = env.length - 1; at >= 0; at -= 1) if (env[at].startsWith(`${VARIABLE}=`)) env.splice(at, 1);
    return asked;
  }
  const asked = env[VARIABLE] === 'none';
  delete env[VARIABLE];
  return asked;
}

// Empty the device list of a loaded driver (`core`: its coreBundle.js). Returns whether it could.
function leaveOutDevices(core) {
  const devices = core.server?.deviceDescriptors;
  if (devices === null || typeof devices !== 'object') return false;
  for (const name of Object.keys(devices)) delete devices[name];
  return true;
}

module.exports = { VARIABLE, takeAsk, leaveOutDevices };
