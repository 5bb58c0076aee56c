// The example runs as documented against adk-server.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { test } from 'node:test';
import { startAdkServer } from './server.js';

test('examples/quickstart.js runs against adk-server', async () => {
  // A server of its own: the mock model plays trip_planner's booking script once per server.
  const server = await startAdkServer();
  try {
    const script = fileURLToPath(new URL('../examples/quickstart.js', import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, [script, server.address], { timeout: 60000 });
    assert.match(stdout, /assistant: You said: Hello, agent!\n/);
    assert.match(stdout, /booker: Booked: 2 nights at Hotel Sakura\./);
    assert.match(stdout, /invalid input -> code 3 /);
  } finally {
    await server.stop();
  }
});
