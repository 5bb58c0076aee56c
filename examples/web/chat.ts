// The example chat page's script (bundled into dist/chat.js by `npm run build:web-example` in
// clients/node). It talks to the suite straight from the browser over gRPC-Web: the server runs
// with --grpc-web and --cors-allowed-origins naming this page's origin.
//
// Query parameters: server (default http://localhost:50051), app (default assistant).
import { AdkError, connectWeb, type EventView } from '../../clients/node/dist/web.js';

const params = new URLSearchParams(location.search);
const server = params.get('server') ?? 'http://localhost:50051';
const app = params.get('app') ?? 'assistant';
const user = `web-${crypto.randomUUID().slice(0, 8)}`;
const adk = connectWeb(server);

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const status = $<HTMLParagraphElement>('status');
const chat = $<HTMLDivElement>('chat');
const events = $<HTMLOListElement>('events');
const input = $<HTMLInputElement>('message');
const submit = $<HTMLButtonElement>('submit');

function bubble(role: 'user' | 'agent', text: string): HTMLDivElement {
  const div = document.createElement('div');
  div.className = `bubble ${role}`;
  div.textContent = text;
  chat.append(div);
  return div;
}

/** One line per event as it arrives: partial chunks too. */
function logEvent(event: EventView): void {
  const li = document.createElement('li');
  li.className = event.partial ? 'event partial' : 'event complete';
  li.dataset.sequence = String(event.sequence);
  li.textContent = `${event.partial ? 'partial' : `#${event.sequence}`} ${event.author}: ${event.text || '(no text)'}`;
  events.append(li);
  events.scrollTop = events.scrollHeight;
}

function fail(error: unknown): void {
  status.className = 'error';
  status.textContent = error instanceof AdkError ? `error ${error.code} ${error.reason}: ${error.rawMessage}` : String(error);
}

async function send(text: string, sessionId: string): Promise<void> {
  bubble('user', text);
  let reply: HTMLDivElement | undefined;
  for await (const event of adk.run(app, user, sessionId, text, { streaming: true })) {
    logEvent(event);
    if (event.author === 'user' || !event.text) continue;
    // Chunks grow one bubble live; the complete event then replaces its text.
    reply ??= bubble('agent', '');
    reply.textContent = event.partial ? (reply.classList.contains('streaming') ? reply.textContent : '') + event.text : event.text;
    reply.classList.toggle('streaming', event.partial);
    if (!event.partial) reply = undefined;
  }
}

async function main(): Promise<void> {
  const session = await adk.createSession(app, user);
  status.textContent = `session ${session.id} of ${app} (user ${user}) on ${server}`;
  status.dataset.sessionId = session.id;
  status.dataset.userId = user;
  input.disabled = submit.disabled = false;
  $<HTMLFormElement>('send').addEventListener('submit', (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    input.value = '';
    submit.disabled = true;
    send(text, session.id)
      .catch(fail)
      .finally(() => {
        submit.disabled = false;
      });
  });
}

main().catch(fail);
