'use strict';
// The driver zygote: one Node per worker environment of the service's process, with Playwright's
// driver loaded (and compiled: it runs with --no-lazy), forking a fresh driver for each run through
// node:ffi instead of starting one.
// `node ZYGOTE_NODE_FLAGS driver_zygote.js PACKAGE SOCKET MODE [WARM_UP]` (flags: driver_zygote.py),
// MODE `sandboxed` (a requester must be in a PID and mount namespace other than the zygote's) or
// `unsandboxed`; WARM_UP (JSON: launch options and a scratch folder) warms the driver up before the
// zygote says `ready`. See driver_zygote.py for the launcher that asks it for a driver.
//
// A request is a connection on SOCKET carrying the requester's standard input, output and error
// (SCM_RIGHTS), the driver's arguments, which must be `run-driver`, and, from a worker that asks
// itself, its environment (see requestedEnvironment). Nothing else in it is read: where the driver
// goes is taken from the kernel's facts about the requester (SO_PEERPIDFD, SO_PEERCRED and
// /proc/<pid>): its mount, PID and IPC namespaces, its control groups, its user and group, its
// resource limits and its working directory. A driver so made is where a driver the requester
// started itself would be, and nothing a request says can put it elsewhere.
// The zygote answers `started` once the driver is confined; a requester that sees the connection
// close without it starts its driver the ordinary way.

const path = require('path');
const fs = require('fs');
const ffi = require('node:ffi');

const [PACKAGE, SOCKET, MODE_ARGUMENT, WARM_UP_JSON] = process.argv.slice(2);
// `sandboxed:N`: an ordinary user's sandboxes, whose processes are N user namespaces below the zygote's
const [MODE, DEPTH] = MODE_ARGUMENT.split(':');
if (!['sandboxed', 'unsandboxed'].includes(MODE)) throw new Error(`unknown mode ${MODE}`);
const USER_DEPTH = MODE === 'sandboxed' && DEPTH !== undefined ? Number(DEPTH) : null;
if (USER_DEPTH !== null && !(USER_DEPTH > 0)) throw new Error(`unknown user namespace depth ${DEPTH}`);
const WARM_UP = WARM_UP_JSON ? JSON.parse(WARM_UP_JSON) : null;

const { functions: c } = ffi.dlopen(null, {
  socket: { arguments: ['int32', 'int32', 'int32'], return: 'int32' },
  bind: { arguments: ['int32', 'buffer', 'uint32'], return: 'int32' },
  listen: { arguments: ['int32', 'int32'], return: 'int32' },
  accept4: { arguments: ['int32', 'pointer', 'pointer', 'int32'], return: 'int32' },
  poll: { arguments: ['buffer', 'uint64', 'int32'], return: 'int32' },
  recvmsg: { arguments: ['int32', 'buffer', 'int32'], return: 'int64' },
  recv: { arguments: ['int32', 'pointer', 'uint64', 'int32'], return: 'int64' },
  send: { arguments: ['int32', 'buffer', 'uint64', 'int32'], return: 'int64' },
  getsockopt: { arguments: ['int32', 'int32', 'int32', 'buffer', 'buffer'], return: 'int32' },
  setsockopt: { arguments: ['int32', 'int32', 'int32', 'buffer', 'uint32'], return: 'int32' },
  fork: { arguments: [], return: 'int32' },
  waitpid: { arguments: ['int32', 'buffer', 'int32'], return: 'int32' },
  dup2: { arguments: ['int32', 'int32'], return: 'int32' },
  close: { arguments: ['int32'], return: 'int32' },
  open: { arguments: ['string', 'int32', 'int32'], return: 'int32' },
  fchdir: { arguments: ['int32'], return: 'int32' },
  setns: { arguments: ['int32', 'int32'], return: 'int32' },
  syscall: { arguments: ['int64', 'int64', 'int64', 'pointer', 'int64'], return: 'int64' },
  setrlimit: { arguments: ['int32', 'buffer'], return: 'int32' },
  prctl: { arguments: ['int32', 'uint64', 'uint64', 'uint64', 'uint64'], return: 'int32' },
  setgroups: { arguments: ['uint64', 'pointer'], return: 'int32' },
  setresgid: { arguments: ['uint32', 'uint32', 'uint32'], return: 'int32' },
  setresuid: { arguments: ['uint32', 'uint32', 'uint32'], return: 'int32' },
  getuid: { arguments: [], return: 'uint32' },
  getpid: { arguments: [], return: 'int32' },
  usleep: { arguments: ['uint32'], return: 'int32' },
  capset: { arguments: ['buffer', 'buffer'], return: 'int32' },
  ioctl: { arguments: ['int32', 'uint64', 'buffer'], return: 'int32' },
  pipe2: { arguments: ['buffer', 'int32'], return: 'int32' },
  madvise: { arguments: ['uint64', 'uint64', 'int32'], return: 'int32' },
  malloc_trim: { arguments: ['uint64'], return: 'int32' },
  uv_loop_fork: { arguments: ['pointer'], return: 'int32' },
  _exit: { arguments: ['int32'], return: 'void' },
  __errno_location: { arguments: [], return: 'pointer' },
});
const errno = () => ffi.getInt32(c.__errno_location(), 0);
function check(result, what) {
  if (Number(result) < 0) throw new Error(`${what}: errno ${errno()}`);
  return Number(result);
}

const AF_UNIX = 1, SOCK_STREAM = 1, SOCK_CLOEXEC = 0o2000000, SOL_SOCKET = 1, SCM_RIGHTS = 1;
const POLLIN = 1, EINTR = 4;
const SO_PEERCRED = 17, SO_PEERPIDFD = 77, SO_RCVTIMEO = 20, MSG_CMSG_CLOEXEC = 0x40000000;
const O_RDONLY = 0, O_WRONLY = 1, O_PATH = 0o10000000, O_DIRECTORY = 0o200000, O_CLOEXEC = 0o2000000;
const CLONE_NEWNS = 0x00020000, CLONE_NEWIPC = 0x08000000, CLONE_NEWUSER = 0x10000000, CLONE_NEWPID = 0x20000000;
const NS_GET_PARENT = 0xb702n, NS_GET_OWNER_UID = 0xb704n, PR_SET_CHILD_SUBREAPER = 36;
const PR_CAP_AMBIENT = 47, PR_CAP_AMBIENT_CLEAR_ALL = 4n;
const SYS_PIDFD_SEND_SIGNAL = 424n;
const PR_SET_NO_NEW_PRIVS = 38, PR_SET_DUMPABLE = 4, PR_CAPBSET_DROP = 24;
const RLIMITS = 16;  // RLIMIT_CPU .. RLIMIT_RTTIME
const MADV_DONTFORK = 10, MADV_DOFORK = 11;

// V8 maps its heap MADV_DONTFORK: a child forked as it is finds no heap and crashes. Right before each
// fork everything up to [vvar] (VM_IO: madvise stops there) and from [vdso]'s end up is made
// inheritable again, one call each, with no JavaScript allocation between them and the fork.
const maps = fs.readFileSync('/proc/self/maps', 'latin1');
const vvar = BigInt(`0x${/^([0-9a-f]+)-[0-9a-f]+ .*\[vvar\]/m.exec(maps)[1]}`);
const vdsoEnd = BigInt(`0x${/^[0-9a-f]+-([0-9a-f]+) .*\[vdso\]/m.exec(maps)[1]}`);
const LOW = 0x10000n, LOW_LENGTH = vvar - 0x10000n, HIGH_LENGTH = 0x7ffffffff000n - vdsoEnd;
function forkWhole() {
  c.madvise(LOW, LOW_LENGTH, MADV_DOFORK);
  c.madvise(vdsoEnd, HIGH_LENGTH, MADV_DOFORK);
  return c.fork();
}

// A fork copies only the thread that calls it (so a driver has that one only). Node runs
// threads of its own beside the main one (the V8 platform's worker, its delayed-task scheduler, the
// inspector's signal thread; libuv's pool after the warm-up), asleep while the zygote waits for
// requests. One that runs at the fork (a collection task V8 posted) may hold a lock that its queue's
// next user in the child then waits for forever, so the zygote forks only while every other thread
// sleeps, and refuses the request after 100 ms. The platform's one worker (`--v8-pool-size=1`) stays
// a waiter on its queue's condition variable in the child: with a single such waiter glibc's
// signalling never waits for it to wake, where with several it may (measured: with Node's default
// of 4 workers, 1 to 2.5% of forked drivers hung in pthread_cond_signal on their first collection).
function untilOthersAsleep() {
  const self = String(c.getpid());
  for (let attempt = 0; attempt < 200; attempt += 1) {
    let awake = false;
    for (const task of fs.readdirSync('/proc/self/task')) {
      if (task === self) continue;
      let stat;
      try {
        stat = fs.readFileSync(`/proc/self/task/${task}/stat`, 'latin1');
      } catch {
        continue;  // it ended
      }
      if (stat[stat.lastIndexOf(')') + 2] !== 'S') awake = true;
    }
    if (!awake) return;
    c.usleep(500);
  }
  throw new Error('a thread of the zygote kept running');
}

// What loading reads of the environment is recorded (driver_environment.js): a requester whose
// environment differs there gets no forked driver, and starts its own.
const processEnv = process.env;
const environment = require('./driver_environment.js').recordingView(processEnv);
process.env = environment.view;
require(path.join(PACKAGE, 'lib', 'bootstrap.js'));
const core = require(path.join(PACKAGE, 'lib', 'coreBundle.js'));
const utils = require(path.join(PACKAGE, 'lib', 'utilsBundle.js'));
if (typeof core.libCli?.decorateProgram !== 'function' || typeof utils.program?.parse !== 'function') {
  throw new Error('the driver no longer starts as its cli.js did when this zygote was written');
}
// cli.js's commands are declared here, once, as part of loading (what it reads of the environment is
// recorded with the rest), not in each driver: about 4 ms of CPU each. A driver only parses its
// arguments against them.
process.argv = [process.execPath, path.join(PACKAGE, 'cli.js'), 'run-driver'];
// every driver it forks launches Chromium with its network service in the browser process
require('./driver_launch_flags.js').launchChromiumWith(core);
// and leaves Playwright's device list out of its connection when its worker asks (driver_devices.js)
const { takeAsk: takeDevicesAsk, leaveOutDevices } = require('./driver_devices.js');
core.libCli.decorateProgram(utils.program);
core.libCliTestStub.decorateProgram(utils.program);
process.env = processEnv;

// The variable read while loading whose value the requester's environment does not share (null: none).
function changedVariable(environ) {
  return environment.changedIn(new Map(environ.map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)])));
}

// The namespaces bubblewrap makes for a sandbox, and those a sandbox shares with the host. A requester
// must share the latter with the zygote: step code that made a user namespace of its own (and in it
// mount or PID namespaces) is refused, so the zygote, and a driver while it is still root, only ever
// enter namespaces that a process privileged on the host made (bubblewrap, started by the pool).
const SANDBOX_NAMESPACES = ['mnt', 'pid', 'ipc'], SHARED_NAMESPACES = ['user', 'net', 'uts', 'cgroup'];
const namespaces = (pid, names) => Object.fromEntries(names.map((name) => [name, fs.statSync(`/proc/${pid}/ns/${name}`).ino]));
const OWN = namespaces('self', [...SANDBOX_NAMESPACES, ...SHARED_NAMESPACES]);
const OWN_GROUPS = controlGroups('self');
const ROOT = c.getuid() === 0;
// read here: a driver reads no file of the requester's mount namespace (which step code may have made
// itself, inside its sandbox) while it still holds any privilege
const CAP_LAST_CAP = Number(fs.readFileSync('/proc/sys/kernel/cap_last_cap', 'utf8'));

function controlGroups(pid) {
  const groups = new Map();
  for (const line of fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n')) {
    const match = /^(\d+):([^:]*):(.*)$/.exec(line);
    if (match) groups.set(`${match[1]}:${match[2]}`, match[3]);
  }
  return groups;
}

// The cgroup.procs files that put a process in the requester's groups (those that differ from ours).
function groupFiles(peerGroups) {
  const mounts = [];
  for (const line of fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const [before, after] = line.split(' - ');
    if (!after) continue;
    const [type, , options] = after.split(' ');
    if (type !== 'cgroup' && type !== 'cgroup2') continue;
    const fields = before.split(' ');
    mounts.push({ type, options: options.split(','), root: fields[3], point: fields[4] });
  }
  const files = [];
  for (const [key, group] of peerGroups) {
    if (OWN_GROUPS.get(key) === group) continue;
    const controllers = key.split(':')[1];
    const mount = mounts.find((m) => (controllers === ''
      ? m.type === 'cgroup2'
      : m.type === 'cgroup' && controllers.split(',').every((name) => m.options.includes(name))));
    if (!mount) throw new Error(`no mount of the requester's ${key} hierarchy`);
    const relative = mount.root === '/' ? group : (group.startsWith(`${mount.root}/`) ? group.slice(mount.root.length) : null);
    if (relative === null || relative.split('/').includes('..')) throw new Error(`the requester's ${key} group is not under its mount`);
    files.push(path.join(mount.point, relative, 'cgroup.procs'));
  }
  return files;
}

let listener = -1;
function listen() {
  listener = check(c.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), 'socket');
  const address = Buffer.alloc(110);
  address.writeUInt16LE(AF_UNIX, 0);
  if (Buffer.byteLength(SOCKET) >= 108) throw new Error('the socket path is too long');
  address.write(SOCKET, 2);
  try { fs.unlinkSync(SOCKET); } catch {}
  check(c.bind(listener, address, address.length), 'bind');
  fs.chmodSync(SOCKET, 0o666);  // every run's user connects; the driver it gets is confined as that user
  check(c.listen(listener, 64), 'listen');
}
const loop = ffi.getCurrentEventLoop();

// The request: its descriptors come with its first bytes; the rest of a long one (a worker's own
// environment) may come in further reads. It is whole once it parses. A requester sends it as soon
// as it is connected: one that sends nothing, or not all of it however its bytes trickle in, holds
// the zygote (and every other run's request behind it) REQUEST_MS at most.
const MAX_REQUEST = 256 * 1024, REQUEST_MS = 500;
function receive(connection) {
  const deadline = Date.now() + REQUEST_MS;
  const data = Buffer.alloc(MAX_REQUEST), iov = Buffer.alloc(16), control = Buffer.alloc(64), message = Buffer.alloc(56);
  iov.writeBigUInt64LE(ffi.getRawPointer(data), 0);
  iov.writeBigUInt64LE(BigInt(data.length), 8);
  message.writeBigUInt64LE(ffi.getRawPointer(iov), 16);
  message.writeBigUInt64LE(1n, 24);
  message.writeBigUInt64LE(ffi.getRawPointer(control), 32);
  message.writeBigUInt64LE(BigInt(control.length), 40);
  let count = beforeDeadline(connection, deadline, () => c.recvmsg(connection, message, MSG_CMSG_CLOEXEC));
  const fds = [];
  if (count > 0 && Number(message.readBigUInt64LE(40)) >= 16 && control.readInt32LE(8) === SOL_SOCKET
      && control.readInt32LE(12) === SCM_RIGHTS) {
    const length = Number(control.readBigUInt64LE(0));
    for (let offset = 16; offset + 4 <= length; offset += 4) fds.push(control.readInt32LE(offset));
  }
  // a requester that closed its end before sending anything went away before asking (a worker
  // killed as its pool closes, say): not a request to refuse
  if (count === 0) return { request: null, fds, gone: true };
  let request = parsed(data, count);
  while (request === undefined && count > 0 && count < data.length) {
    const more = beforeDeadline(connection, deadline,
      () => c.recv(connection, ffi.getRawPointer(data) + BigInt(count), BigInt(data.length - count), 0));
    if (more <= 0) break;
    count += more;
    request = parsed(data, count);
  }
  return { request: request ?? null, fds, gone: false };
}

// One read of the request, waiting until the deadline at most (-1 once it has passed). A read a
// signal interrupts (SIGCHLD: a driver ended) is tried again: the kernel never restarts a read on a
// socket with a receive timeout (signal(7)), and a request refused for it would start its driver the
// ordinary way (seen: once in about every hundred runs with two workers).
function beforeDeadline(connection, deadline, read) {
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) return -1;
    receiveTimeout(connection, left);
    const count = Number(read());
    if (count >= 0 || errno() !== EINTR) return count;
  }
}

function receiveTimeout(connection, milliseconds) {
  const timeout = Buffer.alloc(16);  // struct timeval
  timeout.writeBigInt64LE(BigInt(Math.floor(milliseconds / 1000)), 0);
  timeout.writeBigInt64LE(BigInt((milliseconds % 1000) * 1000), 8);
  check(c.setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, timeout, 16), 'timeout');
}

function parsed(data, count) {
  try {
    return count > 0 ? JSON.parse(data.subarray(0, count).toString()) : null;
  } catch {
    return undefined;  // not whole yet (or never: refused once the reads end)
  }
}

// A request is `["run-driver"]` from the launcher, whose environment is its own (read from /proc), or
// `{"argv": ["run-driver"], "env": ["NAME=value", ...]}` from a worker that asks itself: its
// environment in /proc is the one its process was started with, not the run's. Either way the
// environment is the requester's own to choose, as it is for a driver it starts itself; nothing in a
// request decides where the driver runs, or as whom. Returns the environment given, or null.
function requestedEnvironment(request) {
  const whole = Array.isArray(request)
    || (request !== null && typeof request === 'object' && Object.keys(request).sort().join() === 'argv,env');
  const argv = Array.isArray(request) ? request : request?.argv;
  if (!whole || !Array.isArray(argv) || argv.length !== 1 || argv[0] !== 'run-driver') throw new Error('not a request for a driver');
  if (Array.isArray(request)) return null;
  if (!Array.isArray(request.env) || !request.env.every((entry) => typeof entry === 'string' && entry.indexOf('=') > 0)) {
    throw new Error('the environment is not a list of NAME=value');
  }
  return request.env;
}

function option(connection, name, size) {
  const value = Buffer.alloc(size), length = Buffer.alloc(4);
  length.writeUInt32LE(size);
  check(c.getsockopt(connection, SOL_SOCKET, name, value, length), 'getsockopt');
  return value;
}

// What the kernel says of the requester, read while its pidfd shows it alive (so its pid is still its).
function requester(connection, requestedEnviron) {
  const credentials = option(connection, SO_PEERCRED, 12);
  const pid = credentials.readInt32LE(0), uid = credentials.readUInt32LE(4), gid = credentials.readUInt32LE(8);
  const pidfd = check(option(connection, SO_PEERPIDFD, 4).readInt32LE(0), 'pidfd');
  const opened = [pidfd];
  try {
    const ns = namespaces(pid, SANDBOX_NAMESPACES);
    const shared = namespaces(pid, SHARED_NAMESPACES);
    // an ordinary user's bubblewrap puts the sandbox in a user namespace of its own (ownUser)
    const ownUser = shared.user !== OWN.user && USER_DEPTH !== null && madeByThisUser(pid, shared.user);
    for (const name of SHARED_NAMESPACES) {
      if (shared[name] !== OWN[name] && !(name === 'user' && ownUser)) throw new Error(`the requester is in a ${name} namespace of its own`);
    }
    if (ownUser) ns.user = shared.user;
    const sandboxed = ns.pid !== OWN.pid && ns.mnt !== OWN.mnt && ns.ipc !== OWN.ipc;
    if (MODE === 'sandboxed' && !sandboxed) throw new Error('the requester is not in a sandbox');
    if (MODE === 'unsandboxed' && (ns.pid !== OWN.pid || ns.mnt !== OWN.mnt)) throw new Error('the requester is in namespaces of its own');
    const limits = resourceLimits(pid);
    const cwd = check(c.open(`/proc/${pid}/cwd`, O_PATH | O_DIRECTORY | O_CLOEXEC, 0), 'cwd');
    opened.push(cwd);
    const root = fs.statSync(`/proc/${pid}/root/`);
    const environ = requestedEnviron ?? fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean);
    const withoutDevices = takeDevicesAsk(environ);  // the worker's word to the zygote, taken out
    const changed = changedVariable(environ);
    if (changed !== null) throw new Error(`${changed} differs from the zygote's, which the driver read while loading`);
    const files = groupFiles(controlGroups(pid));
    if (Number(c.syscall(SYS_PIDFD_SEND_SIGNAL, BigInt(pidfd), 0n, 0n, 0n)) !== 0) throw new Error('the requester is gone');
    return { pid, uid, gid, pidfd, ns, sandboxed, ownUser, limits, cwd, root, environ, withoutDevices, files };
  } catch (error) {
    opened.forEach((fd) => c.close(fd));
    throw error;
  }
}

// Whether the user namespace `inode` of process `pid` is one a sandbox of this service's has: exactly
// USER_DEPTH below the zygote's own (an ordinary user's bubblewrap makes one and another inside it),
// each made by the zygote's user. One that step code makes inside its sandbox is deeper, and one
// made by another user is owned by that user.
function madeByThisUser(pid, inode) {
  let current = check(c.open(`/proc/${pid}/ns/user`, O_RDONLY | O_CLOEXEC, 0), 'user namespace');
  try {
    if (fs.fstatSync(current).ino !== inode) return false;  // not the namespace it was a moment ago
    for (let depth = 0; depth < USER_DEPTH; depth += 1) {
      const owner = Buffer.alloc(4);
      if (c.ioctl(current, NS_GET_OWNER_UID, owner) !== 0 || owner.readUInt32LE(0) !== c.getuid()) return false;
      const parent = c.ioctl(current, NS_GET_PARENT, Buffer.alloc(8));
      if (parent < 0) return false;
      c.close(current);
      current = parent;
    }
    return fs.fstatSync(current).ino === OWN.user;
  } finally {
    c.close(current);
  }
}

// The requester's limits, from /proc/<pid>/limits (prlimit would need CAP_SYS_RESOURCE): its lines
// are the resources in their numbering's order, the soft and hard values in fixed columns.
function resourceLimits(pid) {
  const lines = fs.readFileSync(`/proc/${pid}/limits`, 'utf8').split('\n').slice(1, 1 + RLIMITS);
  if (lines.length !== RLIMITS) throw new Error("the requester's limits are not all listed");
  return lines.map((line) => {
    const [soft, hard] = line.slice(26).trim().split(/\s+/);
    const limit = Buffer.alloc(16);
    limit.writeBigUInt64LE(soft === 'unlimited' ? 0xffffffffffffffffn : BigInt(soft), 0);
    limit.writeBigUInt64LE(hard === 'unlimited' ? 0xffffffffffffffffn : BigInt(hard), 8);
    return limit;
  });
}

// V8's `gc`, which the zygote calls itself: after its warm-up (everything), after each fork (the young
// generation).
require('v8').setFlagsFromString('--expose-gc');
const collectGarbage = require('vm').runInNewContext('gc');

function reap() {
  const status = Buffer.alloc(4);
  while (c.waitpid(-1, status, 1 /* WNOHANG */) > 0);
}

// what serve() throws for a connection that ended with nothing in it
const GONE = new Error('the requester went away before asking');

// The zygote's loop: never returns in the zygote; returns the driver's arguments in a driver.
function serve() {
  // Standard input is a pipe whose other end only the service holds, and never writes to: it closes
  // when the service's process is gone, however it went, and then so does the zygote.
  const waiting = Buffer.alloc(16);  // struct pollfd[2]: the listener, standard input
  waiting.writeInt32LE(listener, 0);
  waiting.writeInt16LE(POLLIN, 4);
  waiting.writeInt32LE(0, 8);
  waiting.writeInt16LE(POLLIN, 12);
  for (;;) {
    reap();
    waiting.writeInt16LE(0, 6);
    waiting.writeInt16LE(0, 14);
    if (c.poll(waiting, 2n, -1) < 0) continue;  // EINTR: a driver ended, reaped above
    if (waiting.readInt16LE(14) !== 0) c._exit(0);
    if ((waiting.readInt16LE(6) & POLLIN) === 0) continue;
    const connection = c.accept4(listener, 0n, 0n, SOCK_CLOEXEC);
    if (connection < 0) continue;
    let request = { fds: [] }, peer = null;
    try {
      request = receive(connection);
      if (request.gone) throw GONE;
      if (request.fds.length !== 3) throw new Error('not a request for a driver');
      peer = requester(connection, requestedEnvironment(request.request));
      untilOthersAsleep();
      if (forkInto(peer) === 0) return becomeDriver(connection, request.fds, peer);
    } catch (error) {
      if (error !== GONE) fs.writeSync(2, `scenariokit driver zygote: request refused: ${error.message}\n`);
    }
    request.fds.forEach((fd) => c.close(fd));
    if (peer) [peer.pidfd, peer.cwd].forEach((fd) => c.close(fd));
    c.close(connection);
    // What this request allocated (buffers, /proc reads) would stay in the young generation until it
    // filled, and the buffers' memory outside the heap would grow with it: every driver forked later
    // inherits both, and reaches its own collections the sooner (measured: the zygote held 9.8 MiB
    // more after 150 forks). A scavenge of a generation holding no live object costs about 1 ms,
    // while the zygote waits for the next request.
    collectGarbage({ type: 'minor' });
  }
}

// The zygote's own PID namespace, which its children are born in again after each driver.
const OWN_PID_NAMESPACE = check(c.open('/proc/self/ns/pid', O_RDONLY | O_CLOEXEC, 0), 'pid namespace');

// Forks the driver, under bubblewrap straight into the requester's PID namespace: setns on a PID
// namespace moves none of the zygote's own processes, only where its next child is born, and the
// zygote moves that back right after the fork. (A go-between did this before, forked and then
// forking the driver: each fork of the zygote's image copies the page tables of its 120 MB, and each
// exit frees them again.) The driver is the zygote's child, reaped by it as soon as it ends: a
// sandbox's first process waits, as it ends, until every process of its namespace has been reaped.
// Returns 0 in the driver, the driver's pid in the zygote.
function forkInto(peer) {
  if (!peer.sandboxed) return check(forkWhole(), 'fork');
  if (peer.ownUser) return forkThroughUserNamespace(peer);
  check(c.setns(peer.pidfd, CLONE_NEWPID), 'setns');
  const driver = forkWhole();
  if (driver === 0) return 0;
  if (c.setns(OWN_PID_NAMESPACE, CLONE_NEWPID) !== 0) {
    // no later request may get a driver in this one's sandbox
    fs.writeSync(2, `scenariokit driver zygote: cannot return to its own PID namespace: errno ${errno()}\n`);
    c._exit(1);
  }
  return check(driver, 'fork');
}
// Forks the driver into a sandbox in a user namespace of its own (an ordinary user's). The zygote cannot
// enter one itself (it runs threads, and no process ever comes back out of a user namespace), so a
// go-between it forks enters the sandbox's user, PID, mount and IPC namespaces (its user owns that
// user namespace: it holds every capability there, and so may enter the others) and forks the driver,
// born in the sandbox's PID namespace. The go-between exits once it said the driver's pid; the zygote,
// a child subreaper meanwhile, becomes the orphaned driver's parent and reaps it as it reaps any. The
// driver gives up every capability entering gave it (becomeDriver). Returns as forkInto does.
function forkThroughUserNamespace(peer) {
  const ends = Buffer.alloc(8);
  check(c.pipe2(ends, O_CLOEXEC), 'pipe');
  const [readEnd, writeEnd] = [ends.readInt32LE(0), ends.readInt32LE(4)];
  check(c.prctl(PR_SET_CHILD_SUBREAPER, 1n, 0n, 0n, 0n), 'subreaper');
  let inDriver = false;
  try {
    const between = forkWhole();
    if (between === 0) {
      try {
        c.close(readEnd);
        check(c.setns(peer.pidfd, CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC), 'setns');
        const driver = check(c.fork(), 'fork');
        if (driver === 0) {
          c.close(writeEnd);
          peer.joined = true;
          inDriver = true;
          return 0;
        }
        fs.writeSync(writeEnd, String(driver));
        c._exit(0);
      } catch (error) {
        try { fs.writeSync(2, `scenariokit driver zygote: ${error.message}\n`); } catch {}
      }
      c._exit(1);
    }
    check(between, 'fork');
    c.close(writeEnd);
    const said = Buffer.alloc(16);
    let length = 0, read = 0;
    while ((read = fs.readSync(readEnd, said, length, said.length - length, null)) > 0) length += read;
    c.waitpid(between, Buffer.alloc(4), 0);  // its orphan, the driver, is the zygote's child from here
    const driver = Number(said.subarray(0, length).toString());
    if (!(driver > 0)) throw new Error('the go-between forked no driver');
    return driver;
  } finally {
    if (!inDriver) {  // the driver closed its ends already, and no subreaper setting is inherited
      c.prctl(PR_SET_CHILD_SUBREAPER, 0n, 0n, 0n, 0n);
      c.close(readEnd);
    }
  }
}

// Its SIGCHLD handler, which does nothing, is what makes its wait for requests end when a driver does.
process.on('SIGCHLD', () => {});

// In the forked driver (still outside the sandbox but for its PID namespace): join the requester's
// groups and namespaces, take its directory, limits, user and environment. Returns the connection.
function becomeDriver(connection, fds, peer) {
  try {
    [listener, OWN_PID_NAMESPACE].forEach((fd) => c.close(fd));
    for (const file of peer.files) fs.writeFileSync(file, '0');  // in the run's groups, as all it starts
    if (peer.sandboxed && !peer.joined) check(c.setns(peer.pidfd, CLONE_NEWNS | CLONE_NEWIPC), 'setns');
    c.close(peer.pidfd);
    keepHeapFromChildren();
    if (peer.sandboxed) {
      for (const [name, inode] of Object.entries(peer.ns)) {
        if (fs.statSync(`/proc/self/ns/${name}`).ino !== inode) throw new Error(`the driver is not in the requester's ${name} namespace`);
      }
    }
    const root = fs.statSync('/');
    if (root.dev !== peer.root.dev || root.ino !== peer.root.ino) throw new Error("the driver's root is not the requester's");
    check(c.fchdir(peer.cwd), 'chdir');
    c.close(peer.cwd);
    peer.limits.forEach((limit, resource) => check(c.setrlimit(resource, limit), `setrlimit ${resource}`));
    if (ROOT) {
      dropBoundingSet();
      check(c.setgroups(0n, 0n), 'setgroups');
      check(c.setresgid(peer.gid, peer.gid, peer.gid), 'setgid');
      check(c.setresuid(peer.uid, peer.uid, peer.uid), 'setuid');
      clearCapabilitySets();  // a requester that is root still gets a driver with no capability
    }
    if (peer.joined) dropCapabilities();
    if (process.getuid() !== peer.uid || process.geteuid() !== peer.uid || process.getgid() !== peer.gid) {
      throw new Error("the driver did not become the requester's user");
    }
    check(c.prctl(PR_SET_NO_NEW_PRIVS, 1n, 0n, 0n, 0n), 'no_new_privs');
    // as after an exec by that user: its own processes may read its /proc (a change of user cleared it)
    check(c.prctl(PR_SET_DUMPABLE, 1n, 0n, 0n, 0n), 'dumpable');
    check(c.uv_loop_fork(loop), 'uv_loop_fork');
    fds.forEach((fd, target) => check(c.dup2(fd, target), 'dup2'));
    fds.forEach((fd) => { if (fd > 2) c.close(fd); });
    for (const name of Object.keys(process.env)) delete process.env[name];
    for (const entry of peer.environ) {
      const at = entry.indexOf('=');
      if (at > 0) process.env[entry.slice(0, at)] = entry.slice(at + 1);
    }
    if (peer.withoutDevices) leaveOutDevices(core);
    // The zygote's platform threads are not in this process: Node's own teardown would wait for them.
    process.on('exit', (code) => c._exit(code ?? 0));
    check(c.send(connection, Buffer.from('started\n'), 8n, 0x4000 /* MSG_NOSIGNAL */), 'send');
    return connection;  // held (close-on-exec) until the driver exits: its end tells the requester
  } catch (error) {
    try { fs.writeSync(2, `scenariokit driver zygote: ${error.message}\n`); } catch {}
  }
  c._exit(127);
}

// Takes every capability out of the bounding set: no exec can bring one back.
function dropBoundingSet() {
  for (let cap = 0; cap <= CAP_LAST_CAP; cap += 1) check(c.prctl(PR_CAPBSET_DROP, BigInt(cap), 0n, 0n, 0n), 'capbset');
}

// Empties the permitted, effective and inheritable sets.
function clearCapabilitySets() {
  const header = Buffer.alloc(8), data = Buffer.alloc(24);
  header.writeUInt32LE(0x20080522, 0);  // _LINUX_CAPABILITY_VERSION_3, pid 0: this process
  check(c.capset(header, data), 'capset');
}

// Gives up every capability, as bubblewrap does for what it runs: a driver that entered its sandbox's
// user namespace holds them all there (the sandbox's mounts are locked against them, made in the
// outer of bubblewrap's two user namespaces, but nothing rests on that alone). None is left in any
// set, the bounding set included, and the kernel's own account of them is read back.
function dropCapabilities() {
  dropBoundingSet();
  check(c.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0n, 0n, 0n), 'ambient capabilities');
  clearCapabilitySets();
  const held = fs.readFileSync('/proc/self/status', 'latin1').split('\n').filter((line) => line.startsWith('Cap'));
  if (held.length < 5 || held.some((line) => BigInt(`0x${line.split(':')[1].trim()}`) !== 0n)) {
    throw new Error('the driver kept a capability');
  }
}

// What forked drivers inherit is warmed up (driver_warm_up.js) and collected: the functions a run
// calls first are compiled, with their feedback, and the warm-up's garbage is gone, so no driver
// compiles them or marks that garbage again. The warm-up leaves nothing running: its browser is
// closed, and libuv's thread pool (whose idle threads a fork does not copy) starts again in a child
// that needs it. A failed warm-up exits with WARM_UP_FAILED before `ready`: the pool starts the
// zygote again without one.
const { warmUpAsDriver, WARM_UP_FAILED } = require('./driver_warm_up.js');

// what the warm-up made, kept for the zygote's life (see warmUpAsDriver)
const keptFromWarmUp = [];
async function warmUp() {
  try {
    await warmUpAsDriver(core, processEnv, WARM_UP, keptFromWarmUp);
  } catch (error) {
    fs.writeSync(2, `scenariokit driver zygote: the warm-up failed: ${error?.stack ?? error}\n`);
    process.exit(WARM_UP_FAILED);
  }
}

// What every driver inherits is settled before the first fork, so that no driver redoes it, and the
// image each fork copies is no larger than it must be: the garbage of loading and warming up is
// collected; the sweeping that collection leaves to be done lazily, on allocation, is finished (V8
// finishes it to make the heap iterable for the code statistics), else every driver sweeps the same
// pages; and the memory malloc holds free (the compiler's zones, the warm-up's buffers: a third of
// its heap) goes back to the kernel, else every fork copies its page tables and every exit frees them.
function settle() {
  collectGarbage();
  require('v8').getHeapCodeStatistics();
  c.malloc_trim(0n);
  heapAreas = dontForkAreas();
}

// V8's own areas (its heap and its code), which V8 maps MADV_DONTFORK and the zygote's forks copy
// all the same (forkWhole). A driver marks them so again: the browser it starts is forked from it
// and runs exec at once, and a fork that leaves out V8's 80 MB copies a third of the page tables
// (and an exec frees a third). They are taken from smaps before the first fork (which marks every
// area inheritable) as the ranges of whole areas; a driver marks only those of its areas that are
// still exactly such a range, so nothing mapped there since (by malloc, say) is ever left out.
let heapAreas = new Set();
function dontForkAreas() {
  const areas = new Set();
  let range = null;
  for (const line of fs.readFileSync('/proc/self/smaps', 'latin1').split('\n')) {
    const area = /^([0-9a-f]+)-([0-9a-f]+) /.exec(line);
    if (area) range = `${area[1]}-${area[2]}`;
    else if (line.startsWith('VmFlags:') && line.split(' ').includes('dc') && range !== null) areas.add(range);
  }
  return areas;
}

function keepHeapFromChildren() {
  for (const line of fs.readFileSync('/proc/self/maps', 'latin1').split('\n')) {
    const range = line.slice(0, line.indexOf(' '));
    if (!heapAreas.has(range)) continue;
    const [start, end] = range.split('-').map((bound) => BigInt(`0x${bound}`));
    c.madvise(start, end - start, MADV_DONTFORK);
  }
}

async function main() {
  if (WARM_UP !== null) await warmUp();
  settle();
  listen();
  fs.writeSync(1, 'ready\n');
  const connection = serve();
  // The requester's end closing (it was killed) ends the driver, as its standard input closing does.
  const requesterEnd = new (require('net').Socket)({ fd: connection, readable: true, writable: false });
  requesterEnd.on('data', () => {}).on('end', () => process.exit(0)).on('error', () => process.exit(0));
  requesterEnd.unref();
  utils.program.parse(process.argv);
}

main();
