// The example chat page (examples/web) in headless Chromium, as docs/security-and-limits.md runs it: the page
// served by `python3 -m http.server` on one origin, adk-server with --grpc-web and
// --cors-allowed-origins naming that origin on another. The page creates a session, runs the
// mock-model assistant with streaming and shows the events live; the suite then holds them.
//
// Needs the system chromium and playwright-core, which scripts/setup-adk-web.sh installs (into
// ${XDG_CACHE_HOME:-~/.cache}/adk/adk-web-node, or ADK_WEB_NODE_DIR); the page's bundle is built
// by `npm run build:web-example` (scripts/test-clients.sh does both).
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { connect } from '../dist/index.js';
import { AGENTS_FILE, REPO, freePort, startAdkServer, waitFor } from './server.js';

const SETUP = 'scripts/setup-adk-web.sh';
const STEP_TIMEOUT_MS = 60_000;

function chromiumPath() {
  const found = process.env.ADK_CHROMIUM ?? execFileSync('sh', ['-c', 'command -v chromium || true']).toString().trim();
  assert.ok(found, `chromium not found (nor $ADK_CHROMIUM): run ${SETUP}`);
  return found;
}

function playwright() {
  const cache = process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache');
  const dir = process.env.ADK_WEB_NODE_DIR ?? path.join(cache, 'adk', 'adk-web-node');
  const module = path.join(dir, 'node_modules', 'playwright-core');
  assert.ok(existsSync(module), `playwright-core is not installed in ${dir}: run ${SETUP}`);
  return createRequire(import.meta.url)(module);
}

/** `python3 -m http.server` serving examples/web, as docs/security-and-limits.md says; resolves once it answers. */
async function serveExample() {
  const bundle = path.join(REPO, 'examples', 'web', 'dist', 'chat.js');
  assert.ok(existsSync(bundle), `${bundle} is missing: run npm run build:web-example in clients/node`);
  const port = await freePort();
  const child = spawn('python3', ['-m', 'http.server', '--bind', '127.0.0.1', '--directory', 'examples/web', String(port)], {
    cwd: REPO,
    stdio: 'ignore',
  });
  const origin = `http://127.0.0.1:${port}`;
  await waitFor('python3 -m http.server', 20_000, async () => {
    assert.equal(child.exitCode, null, 'python3 -m http.server exited');
    return fetch(`${origin}/index.html`).then((r) => r.ok, () => false);
  });
  return { origin, stop: () => child.kill() };
}

test('the_example_chat_page_runs_the_assistant_over_grpc_web_and_shows_events_live', async () => {
  const web = await serveExample();
  const server = await startAdkServer('adk-server', ['--agents', AGENTS_FILE, '--grpc-web', '--cors-allowed-origins', web.origin]);
  const { chromium } = playwright();
  const browser = await chromium.launch({ executablePath: chromiumPath(), args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    const server_url = `http://${server.address}`;
    await page.goto(`${web.origin}/index.html?server=${encodeURIComponent(server_url)}`);
    // The session exists once the page says so.
    const status = page.locator('#status[data-session-id]');
    await status.waitFor();
    const sessionId = await status.getAttribute('data-session-id');
    const userId = await status.getAttribute('data-user-id');

    await page.fill('#message', 'Hello from the browser');
    await page.click('#submit');
    await page.locator('.bubble.agent:not(.streaming)', { hasText: 'You said: Hello from the browser' }).waitFor();

    /** @type {{partial: boolean, text: string}[]} */
    const logged = await page.locator('#events li').evaluateAll((/** @type {HTMLElement[]} */ items) =>
      items.map((li) => ({ partial: li.classList.contains('partial'), text: li.textContent ?? '' })),
    );
    const partial = logged.filter((e) => e.partial);
    assert.ok(partial.length > 0, `the streamed chunks were shown: ${JSON.stringify(logged)}`);
    assert.match(logged.at(-1)?.text ?? '', /^#\d+ assistant: You said: Hello from the browser$/);
    assert.match(logged[0]?.text ?? '', /^#1 user: Hello from the browser$/);
    assert.equal(await page.locator('#status.error').count(), 0);

    // What the page showed is what the suite stored.
    const adk = connect(server.address);
    const stored = await adk.getSession('assistant', userId ?? '', sessionId ?? '');
    assert.deepEqual(
      stored.events.map((e) => `${e.author}: ${e.text}`),
      ['user: Hello from the browser', 'assistant: You said: Hello from the browser'],
    );
  } finally {
    await browser.close();
    await server.stop();
    web.stop();
  }
});

test('a_page_of_an_origin_not_allowed_cannot_call_the_suite', async () => {
  const web = await serveExample();
  const server = await startAdkServer('adk-server', ['--agents', AGENTS_FILE, '--grpc-web', '--cors-allowed-origins', 'https://elsewhere.example']);
  const { chromium } = playwright();
  const browser = await chromium.launch({ executablePath: chromiumPath(), args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    await page.goto(`${web.origin}/index.html?server=${encodeURIComponent(`http://${server.address}`)}`);
    await page.locator('#status.error').waitFor();
    assert.equal(await page.locator('#status[data-session-id]').count(), 0);
  } finally {
    await browser.close();
    await server.stop();
    web.stop();
  }
});
