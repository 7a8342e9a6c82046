'use strict';
// Prototype: a Node process with Playwright's driver loaded, forking a driver per request.
// argv: PACKAGE SOCKET_PATH
const path = require('path');
const fs = require('fs');
const ffi = require('node:ffi');

const PACKAGE = process.argv[2];
const SOCKET = process.argv[3];

const { functions: c } = ffi.dlopen(null, {
  socket: { arguments: ['int32', 'int32', 'int32'], return: 'int32' },
  bind: { arguments: ['int32', 'buffer', 'uint32'], return: 'int32' },
  listen: { arguments: ['int32', 'int32'], return: 'int32' },
  accept4: { arguments: ['int32', 'pointer', 'pointer', 'int32'], return: 'int32' },
  recvmsg: { arguments: ['int32', 'buffer', 'int32'], return: 'int64' },
  getsockopt: { arguments: ['int32', 'int32', 'int32', 'buffer', 'buffer'], return: 'int32' },
  fork: { arguments: [], return: 'int32' },
  waitpid: { arguments: ['int32', 'pointer', 'int32'], return: 'int32' },
  dup2: { arguments: ['int32', 'int32'], return: 'int32' },
  close: { arguments: ['int32'], return: 'int32' },
  madvise: { arguments: ['uint64', 'uint64', 'int32'], return: 'int32' },
  uv_loop_fork: { arguments: ['pointer'], return: 'int32' },
  _exit: { arguments: ['int32'], return: 'void' },
  __errno_location: { arguments: [], return: 'pointer' },
});
const errno = () => ffi.getInt32(c.__errno_location(), 0);
const check = (r, what) => { if (r < 0) throw new Error(`${what}: errno ${errno()}`); return r; };

// V8 maps its heap MADV_DONTFORK: a child forked as it is finds no heap. Everything from the first
// 64 KiB up to [vvar] (VM_IO: madvise stops there), and from [vdso]'s end up, is made inheritable again
// right before each fork: one syscall each, and no JavaScript allocation between it and the fork.
const MADV_DOFORK = 11;
const special = fs.readFileSync('/proc/self/maps', 'latin1');
const vvar = /^([0-9a-f]+)-[0-9a-f]+ .*\[vvar/m.exec(special);
const vdso = /^[0-9a-f]+-([0-9a-f]+) .*\[vdso/m.exec(special);
const BELOW = [0x10000n, BigInt(`0x${vvar[1]}`) - 0x10000n];
const ABOVE = [BigInt(`0x${vdso[1]}`), 0x7ffffffff000n - BigInt(`0x${vdso[1]}`)];

require(path.join(PACKAGE, 'lib', 'bootstrap.js'));
const core = require(path.join(PACKAGE, 'lib', 'coreBundle.js'));
const utils = require(path.join(PACKAGE, 'lib', 'utilsBundle.js'));

const AF_UNIX = 1, SOCK_STREAM = 1, SOCK_CLOEXEC = 0o2000000, SOL_SOCKET = 1, SO_PEERCRED = 17;
const listener = check(c.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), 'socket');
const addr = Buffer.alloc(110);
addr.writeUInt16LE(AF_UNIX, 0);
addr.write(SOCKET, 2);
try { fs.unlinkSync(SOCKET); } catch {}
check(c.bind(listener, addr, 110), 'bind');
check(c.listen(listener, 64), 'listen');
fs.writeSync(2, 'zygote ready\n');

function receive(conn) {
  const data = Buffer.alloc(4096);
  const iov = Buffer.alloc(16);
  iov.writeBigUInt64LE(ffi.getRawPointer(data), 0);
  iov.writeBigUInt64LE(BigInt(data.length), 8);
  const control = Buffer.alloc(64);
  const msg = Buffer.alloc(56);
  msg.writeBigUInt64LE(ffi.getRawPointer(iov), 16);
  msg.writeBigUInt64LE(1n, 24);
  msg.writeBigUInt64LE(ffi.getRawPointer(control), 32);
  msg.writeBigUInt64LE(BigInt(control.length), 40);
  const n = Number(c.recvmsg(conn, msg, 0x40000000 /* MSG_CMSG_CLOEXEC */));
  if (n <= 0) return null;
  const controlLen = Number(msg.readBigUInt64LE(40));
  const fds = [];
  if (controlLen >= 16 && control.readInt32LE(8) === SOL_SOCKET && control.readInt32LE(12) === 1 /* SCM_RIGHTS */) {
    const len = Number(control.readBigUInt64LE(0));
    for (let off = 16; off + 4 <= len; off += 4) fds.push(control.readInt32LE(off));
  }
  return { text: data.subarray(0, n).toString(), fds };
}

function serve() {
  for (;;) {
    while (c.waitpid(-1, 0n, 1 /* WNOHANG */) > 0);
    const conn = c.accept4(listener, 0n, 0n, SOCK_CLOEXEC);
    if (conn < 0) continue;
    const cred = Buffer.alloc(12), credLen = Buffer.alloc(4);
    credLen.writeUInt32LE(12);
    c.getsockopt(conn, SOL_SOCKET, SO_PEERCRED, cred, credLen);
    const peer = cred.readInt32LE(0);
    const request = receive(conn);
    if (request === null || request.fds.length !== 3) {
      if (request) request.fds.forEach((fd) => c.close(fd));
      c.close(conn);
      continue;
    }
    c.madvise(BELOW[0], BELOW[1], MADV_DOFORK);
    c.madvise(ABOVE[0], ABOVE[1], MADV_DOFORK);
    const pid = c.fork();
    if (pid === 0) {
      c.close(listener);
      check(c.uv_loop_fork(ffi.getCurrentEventLoop()), 'uv_loop_fork');
      request.fds.forEach((fd, i) => check(c.dup2(fd, i), 'dup2'));
      request.fds.forEach((fd) => c.close(fd));
      process.chdir(fs.readlinkSync(`/proc/${peer}/cwd`));
      // The zygote's platform threads are not in this process: Node's own teardown would wait for them.
      process.on('exit', (code) => c._exit(code));
      return JSON.parse(request.text);
    }
    request.fds.forEach((fd) => c.close(fd));
    c.close(conn);
  }
}

const argv = serve();
// the driver, as cli.js runs it
process.argv = [process.execPath, path.join(PACKAGE, 'cli.js'), ...argv];
const { program } = utils;
core.libCli.decorateProgram(program);
core.libCliTestStub.decorateProgram(program);
program.parse(process.argv);
