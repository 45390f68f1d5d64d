"""A scripted stand-in for the Gemini REST API, served on 127.0.0.1.

It lets a test run ADK's real `Gemini` model class - and so google-genai's real
HTTP client - with no network: point `GOOGLE_GEMINI_BASE_URL` at `base_url`,
set `GOOGLE_API_KEY` to anything, and every `generateContent` (or
`streamGenerateContent`) request lands here. The server records each request
body as JSON and answers with the next scripted reply: a model turn, or an
error status as Gemini words it (`gemini_error`). A request beyond the
script gets HTTP 500 and is recorded in `errors`, so a call that should not
happen fails loudly and the test can assert on it.

Like Gemini 3, every functionCall part carries a `thoughtSignature`, which the
client must send back unchanged in later requests.

Usage:
    with FakeGemini([gemini_call("ask_for_approval", purpose="lunch", amount=250.0), gemini_text("Pending.")]) as fake:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.base_url)
        ...
    fake.requests[0].body["tools"]
"""

from __future__ import annotations

import base64
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ROUTE = re.compile(r"^/v[^/]+/models/(?P<model>[^:/]+):(?P<method>generateContent|streamGenerateContent)$")


@dataclass(frozen=True)
class Reply:
    """One scripted model turn: the `parts` of the candidate's content."""

    parts: list[dict[str, Any]]


def gemini_call(name: str, *, id: str | None = None, **args: Any) -> Reply:
    """A model turn that calls `name` with `args` (and, like newer models, an optional call id)."""
    function_call: dict[str, Any] = {"name": name, "args": args}
    if id is not None:
        function_call["id"] = id
    return Reply([{"functionCall": function_call}])


def gemini_text(value: str) -> Reply:
    """A model turn that answers with plain text."""
    return Reply([{"text": value}])


@dataclass(frozen=True)
class Failure:
    """One scripted error answer: the HTTP status and Gemini's error body."""

    code: int
    body: dict[str, Any]


def gemini_error(code: int, status: str, message: str, reason: str | None = None) -> Failure:
    """An error answer shaped like Gemini's: {"error": {code, message, status, details}}.

    `reason` adds an ErrorInfo detail, as Gemini's 400 for a bad key does (API_KEY_INVALID).
    """
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if reason is not None:
        error["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
                             "domain": "googleapis.com"}]
    return Failure(code, {"error": error})


# What Gemini answers for each thing that can be wrong on the caller's side, or on its own.
BAD_KEY = gemini_error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", "API_KEY_INVALID")
UNKNOWN_MODEL = gemini_error(404, "NOT_FOUND", "models/gemini-nope is not found for API version v1beta, or is not "
                             "supported for generateContent.")
QUOTA = gemini_error(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and "
                     "billing details.")
OUTAGE = gemini_error(500, "INTERNAL", "An internal error has occurred.")


@dataclass(frozen=True)
class Request:
    """One request as it arrived: the model, the method and the JSON body."""

    path: str
    model: str
    method: str
    body: dict[str, Any]
    api_key: str | None


@dataclass
class FakeGemini:
    """A Gemini REST API that answers from `script`, one reply per request."""

    script: list[Reply | Failure]
    requests: list[Request] = field(default_factory=list)
    responses: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeGemini is not running; use it as a context manager or call start().")
        return f"http://127.0.0.1:{self._server.server_port}"

    @property
    def unused(self) -> int:
        """How many scripted replies were never requested."""
        return len(self.script) - min(len(self.requests), len(self.script))

    def start(self) -> FakeGemini:
        handler = type("Handler", (_Handler,), {"fake": self})
        # Port 0: the OS picks a free port, so parallel test runs never collide.
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        # A short poll: shutdown() waits for it, and so does every test's teardown (0.5 s by default).
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fake-gemini",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeGemini:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _answer(self, request: Request) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(request)
            turn = len(self.requests)
            if turn > len(self.script):
                message = (
                    f"unexpected request #{turn} to {request.model}:{request.method}: "
                    f"only {len(self.script)} replies were scripted"
                )
                self.errors.append(message)
                return 500, {"error": {"code": 500, "message": message, "status": "INTERNAL"}}
            reply = self.script[turn - 1]
            if isinstance(reply, Failure):
                return reply.code, reply.body
            response = _response_json(reply, request, turn)
            self.responses.append(response)
        return 200, response

    def model_parts(self) -> list[dict[str, Any]]:
        """Every part this server has sent as the model, thought signatures included."""
        return [part for response in self.responses for part in response["candidates"][0]["content"]["parts"]]


def _response_json(reply: Reply, request: Request, turn: int) -> dict[str, Any]:
    parts = []
    for part in reply.parts:
        part = dict(part)
        if "functionCall" in part:
            part["thoughtSignature"] = base64.b64encode(f"signature-{turn}".encode()).decode()
        parts.append(part)
    prompt_tokens = len(json.dumps(request.body)) // 4
    output_tokens = max(1, len(json.dumps(parts)) // 4)
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": prompt_tokens + output_tokens,
        },
        "modelVersion": request.model,
        "responseId": f"fake-response-{turn}",
    }


class _Handler(BaseHTTPRequestHandler):
    fake: FakeGemini
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        route = _ROUTE.match(path)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if route is None:
            message = f"unknown route {self.command} {self.path}"
            self.fake.errors.append(message)
            self._send_json(404, {"error": {"code": 404, "message": message, "status": "NOT_FOUND"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as error:
            message = f"request body is not JSON: {error}"
            self.fake.errors.append(message)
            self._send_json(400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}})
            return
        request = Request(
            path=self.path, model=route["model"], method=route["method"], body=body,
            api_key=self.headers.get("x-goog-api-key"),
        )
        status, payload = self.fake._answer(request)
        if status == 200 and request.method == "streamGenerateContent":
            self._send_sse(payload)
        else:
            self._send_json(status, payload)

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_sse(self, payload: dict[str, Any]) -> None:
        # One chunk is a valid stream: `?alt=sse` answers are `data: <json>` events.
        data = f"data: {json.dumps(payload)}\r\n\r\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest output clean; requests are recorded instead
