// A tour of the ADK services from Node.js.
//
// Start a server first (from the repository root):
//   cargo run --release --bin adk-server -- --agents examples/agents.yaml
// then (from clients/node, after npm ci):
//   node examples/quickstart.js [localhost:50051]
// Every run uses a user of its own, so it prints the same tour however often it runs.
import { randomUUID } from 'node:crypto';
import { AdkClient, eventText, functionCalls, functionResponse } from '../src/index.js';

const target = process.argv[2] ?? 'localhost:50051';
const user = `alice-${randomUUID().slice(0, 6)}`; // a fresh user, so the tour can run again and again
const adk = new AdkClient(target);

try {
  // A session with state in every scope: temp: is dropped, the rest merged.
  const session = await adk.createSession('assistant', user, { state: { 'user:name': 'Alice', 'temp:draft': true } });
  console.log(`session ${session.id}: state ${JSON.stringify(session.state)}`);

  // An event with a state delta, applied atomically with the append.
  const event = await adk.appendEvent('assistant', user, session.id, { text: 'Note this.', stateDelta: { topic: 'demo' } });
  console.log(`appended event #${event.sequence} (${event.id})`);

  // Artifacts are versioned; user: names are shared by all of the user's sessions.
  const v1 = await adk.saveArtifact('assistant', user, session.id, 'user:notes.md', '# Notes\n');
  const v2 = await adk.saveArtifact('assistant', user, session.id, 'user:notes.md', '# Notes\n- more\n');
  const latest = await adk.loadArtifact('assistant', user, session.id, 'user:notes.md');
  console.log(`saved versions ${v1} and ${v2}; latest is v${latest.version}: ${JSON.stringify(latest.data)}`);

  // Run the agent and print the reply as it streams (SSE: partial events, then the whole).
  process.stdout.write('assistant: ');
  for await (const ev of adk.run('assistant', user, session.id, 'Hello, agent!', { streaming: true })) {
    if (ev.partial) process.stdout.write(eventText(ev));
  }
  process.stdout.write('\n');
  const { state } = await adk.getSession('assistant', user, session.id);
  console.log(`last_reply in state: ${JSON.stringify(state.last_reply)}`);

  // A client tool: the run pauses with a call for us to answer, then resumes.
  // (The booker's mock model plays its script afresh in every session.)
  let answer;
  for await (const ev of adk.run('trip_planner', user, 'trip', 'Two nights at Hotel Sakura', { createSession: true })) {
    console.log(`${ev.author}: ${eventText(ev) || '(tool call)'}`);
    for (const call of functionCalls(ev)) {
      if (ev.long_running_tool_ids.includes(call.id)) {
        console.log(`the agent asks: ${call.name}(${JSON.stringify(call.args)}) -> confirming`);
        answer = functionResponse(call.name, call.id, { confirmed: true });
      }
    }
  }
  if (answer) {
    for await (const ev of adk.run('trip_planner', user, 'trip', answer)) console.log(`${ev.author}: ${eventText(ev)}`);
  } else {
    console.log('(the agent asked for no confirmation)');
  }

  // Bad input fails with a status naming the field.
  try {
    await adk.createSession('not\tvalid', user);
  } catch (/** @type {any} */ err) {
    console.log(`invalid input -> code ${err.code} (INVALID_ARGUMENT is 3): ${err.details}`);
  }
} finally {
  adk.close();
}
