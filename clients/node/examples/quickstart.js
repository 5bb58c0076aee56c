// A tour of the ADK services from Node.js.
//
// Start a server first (from the repository root):
//   cargo run --profile quick --bin adk-server -- --agents examples/agents.yaml
// then (from clients/node, after npm ci, which builds the client):
//   node examples/quickstart.js [localhost:50051]
// Every run uses a user of its own, so it prints the same tour however often it runs.
import { randomUUID } from 'node:crypto';
import { AdkError, connect } from '../dist/index.js';

const target = process.argv[2] ?? 'localhost:50051';
const user = `alice-${randomUUID().slice(0, 6)}`; // a fresh user, so the tour can run again and again
const adk = connect(target);

// A session with state in every scope: temp: is dropped, the rest merged. State is plain JSON.
const session = await adk.createSession('assistant', user, { state: { 'user:name': 'Alice', 'temp:draft': true } });
console.log(`session ${session.id}: state ${JSON.stringify(session.state)}`);

// An event with a state delta, applied atomically with the append. Sequences are bigints.
const event = await adk.appendEvent('assistant', user, session.id, { text: 'Note this.', stateDelta: { topic: 'demo' } });
console.log(`appended event #${event.sequence} (${event.id})`);

// Artifacts are versioned; user: names are shared by all of the user's sessions.
const v1 = await adk.saveArtifact('assistant', user, session.id, 'user:notes.md', { data: '# Notes\n' });
const v2 = await adk.saveArtifact('assistant', user, session.id, 'user:notes.md', { data: '# Notes\n- more\n' });
const latest = await adk.loadArtifact('assistant', user, session.id, 'user:notes.md');
console.log(`saved versions ${v1} and ${v2}; latest is v${latest.version}: ${JSON.stringify(latest.data)}`);

// Run the agent and print the reply as it streams (SSE: partial events, then the whole).
process.stdout.write('assistant: ');
for await (const ev of adk.run('assistant', user, session.id, 'Hello, agent!', { streaming: true })) {
  if (ev.partial) process.stdout.write(ev.text);
}
process.stdout.write('\n');
const { state } = await adk.getSession('assistant', user, session.id);
console.log(`last_reply in state: ${JSON.stringify(state.last_reply)}`);

// A client tool: the run pauses with a call for us to answer; runWithTools answers and resumes.
// (The booker's mock model plays its script afresh in every session.)
const confirm = (/** @type {import('../dist/index.js').FunctionCallView} */ call) => {
  console.log(`the agent asks: ${call.name}(${JSON.stringify(call.args)}) -> confirming`);
  return { confirmed: true };
};
for await (const ev of adk.runWithTools('trip_planner', user, 'trip', 'Two nights at Hotel Sakura', confirm, { createSession: true })) {
  if (ev.text) console.log(`${ev.author}: ${ev.text}`);
}

// Errors are typed: a gRPC code, and the server's reason and the request field at fault.
try {
  await adk.createSession('not\tvalid', user);
} catch (err) {
  if (!(err instanceof AdkError)) throw err;
  const field = err.fieldViolations[0]?.field ?? '';
  console.log(`invalid input -> code ${err.code} (INVALID_ARGUMENT is 3) ${err.reason} ${field}: ${err.rawMessage}`);
}
