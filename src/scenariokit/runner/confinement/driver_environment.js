'use strict';
// What loading Playwright's driver reads of the environment, for a Node that holds the loaded driver
// for many runs' drivers: the start-up snapshot's build (driver_snapshot.js, which loads this file
// with its own loader) and the driver zygote (driver_zygote.js). The driver's modules keep what they
// read while loading, so a run whose value of one of those variables differs (or whose list of
// variables does, when loading listed them) gets no driver from such a Node: it starts one of its
// own, which reads its own.

// A view of `env` that records what is read through it while `recording()` says so, and the check of
// a run's environment against what it recorded.
function recordingView(env, recording = () => true) {
  const read = new Map();
  let listed = null;
  const note = (name) => {
    if (recording() && typeof name === 'string' && !read.has(name)) read.set(name, env[name] ?? null);
  };
  const view = new Proxy(env, {
    get(target, name) {
      note(name);
      return target[name];
    },
    has(target, name) {
      note(name);
      return name in target;
    },
    ownKeys(target) {
      if (recording()) listed = Object.keys(target).sort();
      return Reflect.ownKeys(target);
    },
  });
  // The variable read while recording whose value `environ` (a Map of name to value) does not share,
  // 'the list of variables' when its names are not those listed while recording, or null.
  function changedIn(environ) {
    for (const [name, value] of read) if ((environ.get(name) ?? null) !== value) return name;
    if (listed !== null && [...environ.keys()].sort().join('\0') !== listed.join('\0')) return 'the list of variables';
    return null;
  }
  return { view, changedIn };
}

module.exports = { recordingView };
