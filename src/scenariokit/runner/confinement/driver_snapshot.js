'use strict';
// The entry of `node --snapshot-blob BLOB --build-snapshot driver_snapshot.js PACKAGE`: loads the
// Playwright driver's own code (PACKAGE is playwright/driver/package) the way its cli.js does, so
// that a worker's `node --snapshot-blob BLOB cli.js run-driver` starts with it loaded instead of
// parsing and running 7 MB of JavaScript. See docs/deployment.md, "The driver's start-up snapshot".
//
// A V8 snapshot cannot hold Node's HTTP, HTTP/2 and TLS bindings, and the driver's bundles touch them
// while loading. Those modules (and the web globals that load them, such as Headers) are stood in
// for while building: a module's keys are known without loading it, a class the bundles read
// (http.Agent, which proxy agents extend; Headers, Response) is a placeholder whose prototype chain
// reaches the real class, and everything is read from the real module on first use, after the start. Anything else that
// loading reads of its surroundings (environment variables, the clock's origin, the working
// directory) is recorded; when a variable the driver read differs at start, the driver is started
// again the ordinary way, so a snapshot never runs with a stale setting.
//
// With a third argument (JSON: Playwright's launch options and a scratch folder), the loaded driver is
// then warmed up: it launches that browser, fills and clicks in a page of its own and closes it, so
// that the functions a run calls are compiled into the snapshot instead of in every run's driver. A
// failed warm-up exits with WARM_UP_FAILED: the pool builds again without one.

const path = require('path');
const fs = require('fs');
const childProcess = require('child_process');
const v8 = require('v8');

const PACKAGE = process.argv[2];
const WARM_UP = process.argv[3] ? JSON.parse(process.argv[3]) : null;
const CANNOT_BE_IN_A_SNAPSHOT = ['http', 'https', 'http2', 'tls'];
const NATIVE_PARTS = ['Internal Binding http_parser', 'Internal Binding http2', 'Internal Binding tls_wrap'];
const WEB_GLOBALS = ['FormData', 'Headers', 'Request', 'Response', 'MessageEvent', 'CloseEvent', 'ErrorEvent',
  'WebSocket', 'EventSource'];
// the same node lists their keys, so `__toESM` copies of them hold every key the real ones have
const KEYS = JSON.parse(childProcess.execFileSync(process.execPath, ['-e',
  `process.stdout.write(JSON.stringify(Object.fromEntries(${JSON.stringify(CANNOT_BE_IN_A_SNAPSHOT)}` +
  '.map((name) => [name, Object.getOwnPropertyNames(require(name))]))))'], { env: {}, encoding: 'utf8' }));

let building = true;
// whether what is read of the environment is recorded: while loading, not while warming up (below)
let recording = true;

// --- what loading reads of the process's surroundings ----------------------------------------------

let clockOriginRead = false;
const performanceProto = Object.getPrototypeOf(performance);
const timeOrigin = Object.getOwnPropertyDescriptor(performanceProto, 'timeOrigin');
Object.defineProperty(performanceProto, 'timeOrigin', { ...timeOrigin, get() {
  if (building) clockOriginRead = true;
  return timeOrigin.get.call(this);
} });

// --- stand-ins for what cannot be in a snapshot ------------------------------------------------------

const realModules = {};
const real = (name) => (name === 'global' ? globalThis : (realModules[name] ??= require(name)));
const placeholders = new Map();

// A stand-in for whatever the real one is once the snapshot runs, looked up on first use.
function forwarding(target, resolve) {
  return new Proxy(target, {
    get: (_, key, receiver) => Reflect.get(resolve(), key, receiver),
    // while building, a subclass's own static (Agent subclasses' `protocols`) lands on the subclass, as it
    // would with no setter of that name further up
    set: (_, key, value, receiver) => (building
      ? Reflect.defineProperty(receiver, key, { value, writable: true, enumerable: true, configurable: true })
      : Reflect.set(resolve(), key, value, receiver)),
    has: (_, key) => key in resolve(),
    getPrototypeOf: () => resolve(),
  });
}

// A class read while loading: subclasses and instances reach the real class (and its prototype)
// through it, which is loaded only when first used.
function placeholder(owner, key) {
  const id = `${owner}.${key}`;
  if (!placeholders.has(id)) {
    const Placeholder = function (...args) {
      return Reflect.construct(real(owner)[key], args, new.target || Placeholder);
    };
    Object.defineProperty(Placeholder, 'name', { value: key });
    Object.defineProperty(Placeholder, Symbol.hasInstance, {
      value: (value) => value instanceof real(owner)[key] || Function.prototype[Symbol.hasInstance].call(Placeholder, value),
    });
    Object.setPrototypeOf(Placeholder.prototype, forwarding({}, () => real(owner)[key].prototype));
    Object.setPrototypeOf(Placeholder, forwarding(function () {}, () => real(owner)[key]));
    placeholders.set(id, Placeholder);
  }
  return placeholders.get(id);
}

function deferredModule(name) {
  const keys = KEYS[name];
  const refuse = (what) => { throw new Error(`the driver ${what} while loading: it cannot be in a snapshot`); };
  return new Proxy({}, {
    get(_, key) {
      if (!building) return real(name)[key];
      if (key === '__esModule' || typeof key === 'symbol') return undefined;
      if (key === 'Agent') return placeholder(name, key);
      return refuse(`reads ${name}.${String(key)}`);
    },
    has: (_, key) => (building ? keys.includes(key) : key in real(name)),
    ownKeys: () => (building ? keys.slice() : Reflect.ownKeys(real(name))),
    getOwnPropertyDescriptor(_, key) {
      if (building) return keys.includes(key) ? { configurable: true, enumerable: true, writable: true, value: undefined } : undefined;
      const descriptor = Object.getOwnPropertyDescriptor(real(name), key);
      if (descriptor) descriptor.configurable = true;
      return descriptor;
    },
    set(_, key, value) {
      if (building) refuse(`changes ${name}.${String(key)}`);
      real(name)[key] = value;
      return true;
    },
  });
}

// The bundles' `globalThis` and `global`. Its target is a stand-in: a proxy's invariant checks read the
// target's own property, and reading one of the web globals loads it. A property that cannot change
// (non-configurable) is copied onto the stand-in, as those checks require.
function settled(target, key, descriptor) {
  if (descriptor && descriptor.configurable === false && !Reflect.getOwnPropertyDescriptor(target, key)) {
    Reflect.defineProperty(target, key, descriptor);
  }
  return descriptor;
}
const globalView = new Proxy({}, {
  get: (_, key) => (building && WEB_GLOBALS.includes(key) ? placeholder('global', key) : Reflect.get(globalThis, key)),
  set: (_, key, value) => Reflect.set(globalThis, key, value),
  has: (_, key) => Reflect.has(globalThis, key),
  deleteProperty: (_, key) => Reflect.deleteProperty(globalThis, key),
  defineProperty(target, key, descriptor) {
    const done = Reflect.defineProperty(globalThis, key, descriptor);
    if (done) settled(target, key, Reflect.getOwnPropertyDescriptor(globalThis, key));
    return done;
  },
  getOwnPropertyDescriptor(target, key) {
    if (building && WEB_GLOBALS.includes(key)) {
      return { value: placeholder('global', key), writable: true, enumerable: false, configurable: true };
    }
    return settled(target, key, Reflect.getOwnPropertyDescriptor(globalThis, key));
  },
  ownKeys(target) {
    const keys = Reflect.ownKeys(globalThis);
    for (const key of keys) if (!(building && WEB_GLOBALS.includes(key))) settled(target, key, Reflect.getOwnPropertyDescriptor(globalThis, key));
    return keys;
  },
});

// --- a CommonJS loader for the driver's own files ------------------------------------------------------

const loaded = new Map();

function load(file) {
  if (loaded.has(file)) return loaded.get(file).exports;
  const module = { exports: {}, filename: file, id: file, loaded: false, children: [], paths: [] };
  loaded.set(file, module);
  const source = fs.readFileSync(file, 'utf8');
  const body = new Function('exports', 'require', 'module', '__filename', '__dirname', 'globalThis', 'global', source);
  const localRequire = (name) => {
    if (name.startsWith('./') || name.startsWith('../') || path.isAbsolute(name)) {
      let target = path.resolve(path.dirname(file), name);
      if (target.endsWith('.json')) return JSON.parse(fs.readFileSync(target, 'utf8'));
      if (!target.endsWith('.js')) target = fs.existsSync(`${target}.js`) ? `${target}.js` : path.join(target, 'index.js');
      return load(target);
    }
    const bare = name.replace(/^node:/, '');
    return CANNOT_BE_IN_A_SNAPSHOT.includes(bare) ? deferredModule(bare) : require(name);
  };
  localRequire.resolve = (name) => path.resolve(path.dirname(file), name);
  body.call(module.exports, module.exports, localRequire, module, file, path.dirname(file), globalView, globalView);
  module.loaded = true;
  return module.exports;
}

// driver_environment.js, loaded with the loader above (an entry that builds a snapshot may require only
// Node's own modules): what the driver's loading reads of the environment is recorded from here on.
const processEnv = process.env;
const environment = load(path.join(path.dirname(path.resolve(process.argv[1])), 'driver_environment.js'))
  .recordingView(processEnv, () => building && recording);
process.env = environment.view;

load(path.join(PACKAGE, 'lib', 'bootstrap.js'));
const core = load(path.join(PACKAGE, 'lib', 'coreBundle.js'));
const utils = load(path.join(PACKAGE, 'lib', 'utilsBundle.js'));

// driver_launch_flags.js, loaded with the loader above: every run's driver launches Chromium with its
// network service in the browser process.
load(path.join(path.dirname(path.resolve(process.argv[1])), 'driver_launch_flags.js')).launchChromiumWith(core);
// driver_devices.js, the same way: a driver leaves Playwright's device list out when its worker asks.
const { takeAsk: takeDevicesAsk, leaveOutDevices } = load(path.join(path.dirname(path.resolve(process.argv[1])), 'driver_devices.js'));

if (typeof process.execve !== 'function') throw new Error('this Node.js cannot start the driver again the ordinary way');
if (typeof core.libCli?.decorateProgram !== 'function' || typeof utils.program?.parse !== 'function') {
  throw new Error('the driver no longer starts as its cli.js did when this entry was written');
}

// --- the warm-up --------------------------------------------------------------------------------------

// driver_warm_up.js, loaded with the loader above (an entry that builds a snapshot may require only
// Node's own modules). What it reads of the environment is not recorded: every function it calls
// reads again what it needs when a run calls it.
const { warmUp: warmUpWith, WARM_UP_FAILED } = load(path.join(path.dirname(path.resolve(process.argv[1])), 'driver_warm_up.js'));

async function warmUp(options) {
  recording = false;
  try {
    await warmUpWith(core, processEnv, options);
  } finally {
    recording = true;
  }
}

// Loading (and the warm-up) done: what the snapshot holds is checked, and what loading read is fixed.
function finish() {
  const loadedNatives = NATIVE_PARTS.filter((part) => process.moduleLoadList.includes(part));
  if (loadedNatives.length) throw new Error(`loading the driver loaded ${loadedNatives.join(', ')}`);
  if (clockOriginRead && typeof core.iso?.setTimeOrigin !== 'function') {
    throw new Error('the driver keeps the clock origin it read while loading, and offers no way to set it again');
  }
  building = false;
  process.env = processEnv;
}

if (WARM_UP === null) {
  finish();
} else {
  warmUp(WARM_UP).then(finish).catch((error) => {
    fs.writeSync(2, `the driver's warm-up failed: ${error?.stack ?? error}\n`);
    process.exit(WARM_UP_FAILED);
  });
}

// The one check done at start: which variable read while loading has changed since (null: none).
function changedVariable() {
  return environment.changedIn(new Map(Object.entries(process.env)));
}

v8.startupSnapshot.setDeserializeMainFunction(() => {
  const blob = process.execArgv.indexOf('--snapshot-blob');
  if (blob >= 0) process.execArgv.splice(blob, 2);  // a node the driver forks starts from its own script
  const withoutDevices = takeDevicesAsk(process.env);  // the worker's word to this entry, taken out
  const changed = changedVariable();
  if (changed !== null) {  // started again the ordinary way: loading reads the variables again
    fs.writeSync(2, `scenariokit: the Playwright driver loads without its start-up snapshot: ${changed} changed since it was built\n`);
    process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], process.env);
  }
  try {
    process.chdir('.');  // a module that cached the working directory while loading (graceful-fs) reads it again
  } catch {}
  if (clockOriginRead) core.iso.setTimeOrigin(performance.timeOrigin);
  if (withoutDevices) leaveOutDevices(core);
  const { program } = utils;
  core.libCli.decorateProgram(program);
  core.libCliTestStub.decorateProgram(program);
  program.parse(process.argv);
});
