// The example runs as documented against adk-server.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { test } from 'node:test';
import { startAdkServer } from './server.js';

test('examples/quickstart.js runs against adk-server, again and again', async () => {
  // The same server every time: each run must tell the whole tour, client tool included.
  const server = await startAdkServer();
  try {
    const script = fileURLToPath(new URL('../examples/quickstart.js', import.meta.url));
    for (let run = 1; run <= 2; run++) {
      const { stdout } = await promisify(execFile)(process.execPath, [script, server.address], { timeout: 60000 });
      assert.match(stdout, /assistant: You said: Hello, agent!\n/, `run ${run}`);
      assert.match(stdout, /booker: Booked: 2 nights at Hotel Sakura\./, `run ${run}`);
      assert.match(stdout, /invalid input -> code 3 \(INVALID_ARGUMENT is 3\) INVALID_ARGUMENT app_name: /, `run ${run}`);
    }
  } finally {
    await server.stop();
  }
});
