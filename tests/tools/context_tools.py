"""HTTP tools for the runner's tool-context tests (Python's standard library only).

    context_tools.py --port PORT --calls FILE

Each tool takes the tool-context envelope (docs/tools.md, "The tool context
of HTTP and MCP tools"): the body is {"args": ..., "context": ...} and the reply
{"result": ..., "actions": ..., "parts": [...]}. Every call is appended to FILE as one
JSON line (path and body), so tests can count calls and see what each was sent.
"""

import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--calls", required=True)
options = parser.parse_args()


def set_theme(args, context):
    """Sets the user's theme and saves a note of it as an artifact."""
    theme = args["theme"]
    return {
        "result": {"previous": context["state"].get("user:theme"), "seen": context},
        "actions": {
            "state_delta": {"user:theme": theme, "temp:scratch": "gone after the turn"},
            "artifacts": {"theme.txt": {"text": f"the theme is {theme}"}},
        },
    }


def finish(args, context):
    """Ends the enclosing loop."""
    return {"result": {"finished": True}, "actions": {"escalate": True}}


def misspelt(args, context):
    """Asks for an action that does not exist: nothing it asks for may happen."""
    return {"result": "ok", "actions": {"state_delta": {"user:misspelt": 1}, "escalated": True}}


def transfer(args, context):
    """Moves money; notes the last transfer in user: state and saves a receipt."""
    note = f"{args['amount']} to {args['account']}"
    return {
        "result": {"done": True},
        "actions": {
            "state_delta": {"user:last_transfer": note},
            "artifacts": {"receipt.txt": {"text": f"receipt: {note}"}},
        },
    }


def remember(args, context):
    """Writes args["state"] to the state, whatever it holds (state_schema tests)."""
    return {"result": {"written": sorted(args["state"])}, "actions": {"state_delta": args["state"]}}


def plain(args):
    """Not an envelope tool: the body is the arguments, the reply the result."""
    return {"echo": args}


def forecast(args):
    """Not an envelope tool: the weather of args["city"], after args["wait_secs"] seconds
    (so a test can kill the runner while the call is in flight; the call is recorded
    on arrival)."""
    time.sleep(args.get("wait_secs", 0))
    return {"city": args["city"], "sky": "sunny"}


TOOLS = {"/set_theme": set_theme, "/finish": finish, "/misspelt": misspelt, "/transfer": transfer, "/remember": remember}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with open(options.calls, "a") as calls:
            calls.write(json.dumps({"path": self.path, "body": body}) + "\n")
        if self.path == "/plain":
            reply = plain(body)
        elif self.path == "/forecast":
            reply = forecast(body)
        else:
            reply = TOOLS[self.path](body["args"], body["context"])
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", options.port), Handler).serve_forever()
