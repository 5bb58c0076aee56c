// Drives ADK's dev UI (`adk web`) in headless Chromium, as a user would, for
// clients/python/tests/test_adk_web.py:
//
//   node drive-dev-ui.js '{"chromium": PATH, "web": URL, "otherWeb": URL, "app": APP,
//                          "message": TEXT, "reply": TEXT}'
//
// Opens the app in the UI at `web`, dismisses the telemetry question (the test runs
// `adk web` with a fresh HOME, so it is always asked), sends `message`, waits for
// `reply`, reloads the page (the UI keeps the session in the URL), and then opens that
// same URL on `otherWeb`, a second `adk web` process that never saw the session. Each
// time it reads the chat's message bubbles. Prints one JSON line:
//   {"url", "sessionId", "userId", "sent", "reloaded", "elsewhere"}, each of the last three
//   {"user": [texts], "bot": [texts]}.
// Waits are Playwright's (for an element or a URL, with a deadline); there are no sleeps.
'use strict';

const path = require('path');

const nodeDir = process.env.ADK_WEB_NODE_DIR;
if (!nodeDir) throw new Error('ADK_WEB_NODE_DIR is not set: run scripts/setup-adk-web.sh');
const { chromium } = require(path.join(nodeDir, 'node_modules', 'playwright-core'));

const STEP_TIMEOUT_MS = 60_000;
const options = JSON.parse(process.argv[2]);

// The chat's messages: the UI marks each text bubble with who wrote it.
async function bubbles(page) {
  const texts = (role) => page.locator(`.content-bubble.type-message.role-${role}`).allInnerTexts();
  return {
    user: (await texts('user')).map((t) => t.trim()),
    bot: (await texts('bot')).map((t) => t.trim()),
  };
}

// Waits until the conversation shows the message and the reply.
async function conversationShown(page) {
  await page.locator('.content-bubble.role-user', { hasText: options.message }).waitFor();
  await page.locator('.content-bubble.role-bot', { hasText: options.reply }).waitFor();
  return bubbles(page);
}

(async () => {
  // Playwright launches Chromium without its sandbox by default, which lets CI run as root.
  const browser = await chromium.launch({ executablePath: options.chromium, headless: true });
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    // The UI asks Google's font servers for its fonts; CI has no way out, and the test
    // needs none: only the two local servers are reachable.
    await page.route((url) => url.hostname !== '127.0.0.1', (route) => route.abort());

    await page.goto(`${options.web}/dev-ui/?app=${encodeURIComponent(options.app)}`);
    await page.getByRole('button', { name: 'No Thanks' }).click();

    const input = page.getByPlaceholder('Type a message...');
    await input.fill(options.message);
    await input.press('Enter');
    const sent = await conversationShown(page);
    // Once the run has a session, the UI writes it into the URL (app, userId, session).
    await page.waitForURL(/[?&]session=[^&]+/);
    const url = new URL(page.url());

    await page.reload();
    const reloaded = await conversationShown(page);

    await page.goto(`${options.otherWeb}/dev-ui/${url.search}`);
    const elsewhere = await conversationShown(page);

    console.log(JSON.stringify({
      url: url.href,
      sessionId: url.searchParams.get('session'),
      userId: url.searchParams.get('userId'),
      sent,
      reloaded,
      elsewhere,
    }));
  } finally {
    await browser.close();
  }
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
