// Starts the real adk-server binary on a free port for the tests, and stops it.
// The binary comes from $ADK_BIN_DIR, else ${CARGO_TARGET_DIR:-target}/debug of the repository.
import { spawn } from 'node:child_process';
import { accessSync, constants, createWriteStream, mkdtempSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = fileURLToPath(new URL('../../../', import.meta.url));
export const AGENTS_FILE = path.join(REPO, 'examples', 'agents.yaml');

export function binDir() {
  if (process.env.ADK_BIN_DIR) return process.env.ADK_BIN_DIR;
  return path.join(path.resolve(REPO, process.env.CARGO_TARGET_DIR ?? 'target'), 'debug');
}

/** @returns {Promise<number>} */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {net.AddressInfo} */ (srv.address());
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Resolves once `condition()` is truthy, asking again every 20 ms (the poll interval of the
 * tests' one wait helper); throws naming `what` after `deadlineMs`, or at once when
 * `condition` throws (a process that died cannot start listening any more).
 * @param {string} what
 * @param {number} deadlineMs
 * @param {() => Promise<unknown>} condition
 */
export async function waitFor(what, deadlineMs, condition) {
  const deadline = Date.now() + deadlineMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what}: not ready within ${deadlineMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** @param {number} port */
function canConnect(port) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: '127.0.0.1', port }, () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

/**
 * Whether process `pid` holds a listening TCP socket on `port`, read from Linux's /proc
 * (its socket inodes, and the LISTEN rows of the TCP tables).
 * @param {number | undefined} pid
 * @param {number} port
 */
function listensOn(pid, port) {
  /** @type {Set<string>} */
  const inodes = new Set();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
        if (target.startsWith('socket:[')) inodes.add(target.slice('socket:['.length, -1));
      } catch {
        // The descriptor closed while being read.
      }
    }
  } catch {
    return false;
  }
  const localPort = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const LISTEN = '0A';
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let rows;
    try {
      rows = readFileSync(table, 'utf8').split('\n').slice(1);
    } catch {
      continue;
    }
    for (const row of rows) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      const fields = row.trim().split(/\s+/);
      if (fields[1]?.endsWith(localPort) && fields[3] === LISTEN && inodes.has(fields[9] ?? '')) return true;
    }
  }
  return false;
}

const running = new Set();
// Never leave a server behind, whatever way this test process ends.
const killAll = () => {
  for (const child of running) child.kill('SIGKILL');
};
process.on('exit', killAll);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(signal, () => {
    killAll();
    process.exit(128 + (signal === 'SIGHUP' ? 1 : signal === 'SIGINT' ? 2 : 15));
  });
}

/**
 * Starts `adk-server --agents examples/agents.yaml` on a free port (or on `port`, e.g. to
 * restart a server where its clients expect it).
 * @param {string} [binary]
 * @param {string[]} [extraArgs]
 * @param {{port?: number}} [options]
 * @returns {Promise<{address: string, port: number, stop: () => Promise<void>, kill: () => Promise<void>, log: () => string}>}
 */
export async function startAdkServer(binary = 'adk-server', extraArgs = ['--agents', AGENTS_FILE], options = {}) {
  const exe = path.join(binDir(), binary);
  try {
    accessSync(exe, constants.X_OK);
  } catch {
    throw new Error(`${exe} not found: run cargo build --workspace --bins first`);
  }
  const logPath = path.join(mkdtempSync(path.join(os.tmpdir(), 'adk-node-test-')), `${binary}.log`);
  let lastError;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = options.port ?? (await freePort());
    const logFile = createWriteStream(logPath);
    await new Promise((resolve) => logFile.once('open', resolve));
    const child = spawn(exe, [...extraArgs, '--listen', `127.0.0.1:${port}`, '--shutdown-grace-secs', '1'], {
      cwd: REPO,
      stdio: ['ignore', logFile, logFile],
      // No fixed ports besides --listen: the metrics endpoint (0.0.0.0:9464 by default) is off,
      // through the environment, which binaries without that flag ignore.
      env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? 'warn', ADK_METRICS_LISTEN: 'off' },
    });
    running.add(child);
    const exited = new Promise((resolve) => child.once('exit', resolve));
    const log = () => readFileSync(logPath, 'utf8').slice(-4000);
    const stop = async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10000);
        await exited;
        clearTimeout(timer);
      }
      running.delete(child);
      logFile.end();
    };
    // Gone at once, as a crash: no graceful end of its streams.
    const kill = async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
      running.delete(child);
      logFile.end();
    };
    const alive = () => child.exitCode === null && child.signalCode === null;
    try {
      await waitFor(`${binary} on port ${port}`, 30000, async () => {
        if (!alive()) throw new Error(`${binary} exited before listening on port ${port}`);
        // The child's own listening socket: the server is up, and the port is not another
        // process's that happened to take it first.
        return listensOn(child.pid, port);
      });
      return { address: `127.0.0.1:${port}`, port, stop, kill, log };
    } catch (error) {
      await stop();
      lastError = new Error(`${binary} did not start on port ${port}: ${error instanceof Error ? error.message : error}\n${log()}`);
    }
  }
  throw lastError;
}

/**
 * Starts a throwaway redis-server (no persistence) on a free port.
 * @returns {Promise<{url: string, stop: () => Promise<void>}>}
 */
export async function startRedis() {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  running.add(child);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  await waitFor(`redis-server on port ${port}`, 10_000, async () => {
    if (child.exitCode !== null) throw new Error(`redis-server exited (${child.exitCode}) before listening on ${port}`);
    return canConnect(port);
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
      running.delete(child);
    },
  };
}
