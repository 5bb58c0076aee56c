"""Outside parties that answer too much, forever or slowly, for the reply-limit tests
(Python's standard library only).

    outside.py --port PORT --calls FILE

- POST /v1/chat/completions: an OpenAI-compatible model. A user message "call NAME"
  makes it call the tool NAME; once the tool answered, it replies "heard: " and the
  start of what the tool said. "huge reply" answers 200 MiB, "endless reply" a body
  that never ends, "slow reply" answers after a second.
- POST /tool/huge (200 MiB of JSON, its length declared), /tool/endless (a chunked
  body without end), /tool/slow (after a second), /tool/ok: HTTP tools.
- POST /tool/two_mib: 2 MiB of JSON, {"data": "0123456789abcdef…"}, for a tool
  that saves large replies as artifacts (the test rebuilds the same bytes).
- POST /hook/huge: a hook answering 200 MiB.

Every call is appended to FILE as one JSON line (its path), so tests can count calls.
"""

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--calls", required=True)
options = parser.parse_args()
lock = threading.Lock()

HUGE = 200 * 1024 * 1024
CHUNK = b"x" * (64 * 1024)
TWO_MIB = b'{"data": "' + b"0123456789abcdef" * (2 * 1024 * 1024 // 16) + b'"}'


def completion(message):
    return {
        "id": "c",
        "object": "chat.completion",
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, value):
        body = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_huge(self):
        """{"data": "xxx…"} of HUGE bytes, its length declared."""
        head, tail = b'{"data": "', b'"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(head) + HUGE + len(tail)))
        self.end_headers()
        self.wfile.write(head)
        for _ in range(HUGE // len(CHUNK)):
            self.wfile.write(CHUNK)
        self.wfile.write(tail)

    def send_endless(self):
        """A chunked JSON body that never ends (until the reader goes away)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        first = b'{"data": "'
        self.wfile.write(b"%x\r\n%s\r\n" % (len(first), first))
        while True:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))

    def model(self, request):
        messages = request["messages"]
        last = messages[-1]
        if last["role"] == "tool":
            content = last["content"] if isinstance(last["content"], str) else json.dumps(last["content"])
            return self.send_json(completion({"role": "assistant", "content": "heard: " + content[:1000]}))
        text = last["content"] if isinstance(last["content"], str) else "".join(
            part.get("text", "") for part in last["content"]
        )
        if text.startswith("call "):
            name = text[len("call "):].strip()
            call = {"id": "call-" + name, "type": "function", "function": {"name": name, "arguments": "{}"}}
            return self.send_json(completion({"role": "assistant", "content": None, "tool_calls": [call]}))
        if text == "huge reply":
            return self.send_huge()
        if text == "endless reply":
            return self.send_endless()
        if text == "slow reply":
            time.sleep(1)
        return self.send_json(completion({"role": "assistant", "content": "fine: " + text}))

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"null")
        with lock, open(options.calls, "a") as calls:
            calls.write(json.dumps({"path": self.path, "body": None}) + "\n")
        try:
            if self.path.endswith("/chat/completions"):
                self.model(request)
            elif self.path in ("/tool/huge", "/hook/huge"):
                self.send_huge()
            elif self.path == "/tool/two_mib":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(TWO_MIB)))
                self.end_headers()
                self.wfile.write(TWO_MIB)
            elif self.path == "/tool/endless":
                self.send_endless()
            elif self.path == "/tool/slow":
                time.sleep(1)
                self.send_json({"ok": "slow"})
            elif self.path == "/tool/ok":
                self.send_json({"ok": True})
            else:
                self.send_error(404)
        except (BrokenPipeError, ConnectionResetError):
            # The runner stopped reading at its limit and closed the connection.
            self.close_connection = True


ThreadingHTTPServer.daemon_threads = True
# Hundreds of runs call the model at once: the default backlog of 5 would drop their connects.
ThreadingHTTPServer.request_queue_size = 1024
ThreadingHTTPServer(("127.0.0.1", options.port), Handler).serve_forever()
