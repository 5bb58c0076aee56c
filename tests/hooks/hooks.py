"""Hooks for the runner's hook tests, and a plain HTTP tool (Python's standard library only).

    hooks.py --port PORT --calls FILE

Each path is one hook of docs/hooks.md ("Hooks"): the body is
{"point", "hook", "agent_name", "context", ...the point's payload} and the reply what
the hook decides (empty: it only observed). Every call is appended to FILE as one
JSON line (path and body), so tests can count calls and see what each was sent.
"""

import argparse
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--calls", required=True)
options = parser.parse_args()

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
lock = threading.Lock()


def guard(call):
    """before_tool: refuses a transfer from the frozen account; the tool never runs."""
    if call["tool"] == "transfer" and call["args"].get("account") == "frozen":
        return {"result": {"error": "refused by the guard: account frozen is frozen"}}
    return {}


def redact(call):
    """after_model: e-mail addresses never leave the model's reply."""
    content = (call["response"] or {}).get("content")
    if not content:
        return {}
    changed = False
    for part in content["parts"]:
        if "text" in part and EMAIL.search(part["text"]):
            part["text"] = EMAIL.sub("[e-mail redacted]", part["text"])
            changed = True
    return {"response": {"content": content}} if changed else {}


# The cache: question -> answer, filled by after_model, read by before_model.
answers = {}
asked = {}


def question(request):
    """The text of the latest user message of a model request."""
    for content in reversed(request["contents"]):
        if content["role"] == "user":
            return "".join(part.get("text", "") for part in content["parts"])
    return ""


def cache(call):
    """before_model: answers a question asked before; after_model: remembers the answer."""
    invocation = call["context"]["invocation_id"]
    with lock:
        if call["point"] == "before_model":
            key = question(call["request"])
            if key in answers:
                return {"response": {"content": {"role": "model", "parts": [{"text": answers[key]}]}}}
            asked[invocation] = key
            return {}
        key = asked.pop(invocation, None)
        content = (call["response"] or {}).get("content") or {}
        text = "".join(part.get("text", "") for part in content.get("parts", []))
        if key is not None and text:
            answers[key] = text
        return {}


def slow(call):
    """Answers after its caller's timeout."""
    time.sleep(3)
    return {}


def visits(call):
    """before_agent: counts the user's visits in user: state, from the state it is sent."""
    seen = call["context"]["state"].get("user:visits", 0)
    return {"actions": {"state_delta": {"user:visits": seen + 1, "user:last_agent": call["agent_name"]}}}


def fallback(call):
    """on_model_error: an unavailable model is answered with an apology; other errors stand."""
    if call["error"]["code"] == "UNAVAILABLE":
        text = "The assistant is busy; please try again in a minute."
        return {"response": {"content": {"role": "model", "parts": [{"text": text}]}}}
    return {}


def tool_fallback(call):
    """on_tool_error: a failed lookup is answered from a stale copy, saying so."""
    return {"result": {"stale": True, "tool": call["tool"], "because": call["error"]["message"]}}


def scope(call):
    """before_tool and after_tool on calls of the researcher (a single_turn sub-agent): a
    secret topic is refused (the agent never runs), a colour question asks for one word,
    and every answer is marked as checked."""
    if call["tool"] != "researcher":
        return {}
    if call["point"] == "before_tool":
        request = call["args"].get("request", "")
        if "secret" in request:
            return {"result": {"error": "refused: no research on secret topics"}}
        if "colour" in request:
            return {"args": {"request": request + " (answer in one word)"}}
        return {}
    return {"result": dict(call["response"], checked=True)}


def tally(call):
    """before_agent: writes a tally that is not a number (the agent's state_schema wants one)."""
    return {"actions": {"state_delta": {"tally": "many"}}}


def transfer(args):
    """A plain HTTP tool: moves money (in the test, it only answers)."""
    return {"moved": args.get("amount"), "from": args.get("account")}


HOOKS = {
    "/guard": guard,
    "/redact": redact,
    "/cache": cache,
    "/slow": slow,
    "/visits": visits,
    "/fallback": fallback,
    "/tool_fallback": tool_fallback,
    "/scope": scope,
    "/tally": tally,
}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with lock:
            with open(options.calls, "a") as calls:
                calls.write(json.dumps({"path": self.path, "body": body}) + "\n")
        status = 200
        if self.path == "/tool/transfer":
            reply = transfer(body)
        elif self.path == "/tool/broken":
            status, reply = 500, {"error": "the lookup service is down"}
        else:
            reply = HOOKS[self.path](body)
        data = json.dumps(reply).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the caller gave up (a timeout test)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", options.port), Handler).serve_forever()
