// The processes an end-to-end test file starts: each is killed when the test process ends,
// however it ends (exit, SIGINT, SIGTERM, SIGHUP; with util-linux's setpriv also SIGKILL or a
// crash, through the child's parent-death signal). Their logs go to a temporary directory that
// is removed at exit unless a test failed.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Polls `condition` until it returns something truthy (which it returns) or `timeoutMs` ends.
export async function waitFor(what, condition, timeoutMs = 20000, intervalMs = 25) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}

// One JSON-RPC call over HTTP; a JSON-RPC error is thrown.
export async function rawCall(url, method, params = []) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = await response.json();
  if (body.error) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.result;
}

// SIGTERM to a child (or to `proc.child`), SIGKILL after 5 s; resolves to its exit code or
// signal (null when there is no child).
export async function stop(proc) {
  if (!proc) return null;
  const child = proc.child ?? proc;
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode ?? child.signalCode;
  const exited = new Promise((resolve) => child.once('exit', (code, sig) => resolve(code ?? sig)));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  const result = await exited;
  clearTimeout(timer);
  return result;
}

const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => fs.existsSync(p));

// `prefix` names the temporary directory. Returns the directory, the started children,
// spawnLogged(bin, args, name) and logTail(name) (the last 20 lines of a child's log).
export function processSet(prefix) {
  const children = [];
  const killAll = () => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  };
  process.on('exit', killAll);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(signal, () => {
      killAll();
      process.exit(1);
    });
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  process.on('exit', (code) => {
    if (code === 0 && !process.exitCode) {
      fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
    } else {
      console.error(`# logs kept in ${dir}`);
    }
  });

  function spawnLogged(bin, args, name) {
    const log = fs.openSync(path.join(dir, `${name}.log`), 'w');
    const [command, argv] = SETPRIV ? [SETPRIV, ['--pdeathsig', 'KILL', bin, ...args]] : [bin, args];
    const child = spawn(command, argv, { stdio: ['ignore', log, log] });
    fs.closeSync(log);
    // A child left running never keeps this process alive; the exit handler kills it.
    child.unref();
    child.name = name;
    children.push(child);
    return child;
  }

  function logTail(name) {
    try {
      return fs.readFileSync(path.join(dir, `${name}.log`), 'utf8').split('\n').slice(-20).join('\n');
    } catch {
      return '';
    }
  }

  // The JSON a child writes to its ready file `file`, once it is complete; throws when the
  // child exits first or `timeoutMs` passes, with the end of its log.
  async function ready(child, file, timeoutMs = 20000) {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`${child.name} exited:\n${logTail(child.name)}`);
      }
      if (fs.existsSync(file)) {
        try {
          return JSON.parse(fs.readFileSync(file, 'utf8'));
        } catch {
          // not complete yet
        }
      }
      await sleep(20);
    }
    throw new Error(`${child.name} not ready within ${timeoutMs} ms:\n${logTail(child.name)}`);
  }

  return { dir, children, spawnLogged, logTail, ready };
}
