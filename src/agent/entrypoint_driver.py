"""rayito's driver of a CustomRuntime entrypoint ("module:function").

Written into the sandbox by the SDK (src/agent/runtime.rs) and run as the
run's command: `python3 <this file> <module:function>`. Reads the run
request (one JSON line on stdin), calls the function with
`{"prompt", "session_id", "model", "reasoning"}` and writes protocol v1
lines on the original stdout; the function's own prints go to stderr, so
they never break the protocol.

The function returns a string (the final text), an iterable or async
iterable of strings (pieces, each sent as `text_delta` as it comes), or a
dict with `text` and optionally `usage` (`input`, `output`, `reasoning`,
`cache_read`, `cache_write`); it may be `async`. A failure ends the run
with `agent_failed`: `model_error` when the exception comes from a model
client library, else `runtime_error`, its detail the exception's class
name, never its message. Standard library only.
"""

import asyncio
import importlib
import inspect
import json
import os
import re
import sys
import uuid
from collections.abc import AsyncIterable, Iterable, Mapping

ENTRYPOINT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*")
SESSION = re.compile(r"rda_[0-9a-f]{32}")
MODEL_MODULES = ("anthropic", "boto3", "botocore", "google", "httpx", "openai")
USAGE_KEYS = ("input", "output", "reasoning", "cache_read", "cache_write")


class Failure(Exception):
    def __init__(self, reason, detail):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def protocol_stream():
    """The original stdout for the protocol; fd 1 and sys.stdout to stderr."""
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", encoding="utf-8", buffering=1)


def count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def load(entrypoint, roots):
    if not ENTRYPOINT.fullmatch(entrypoint):
        raise Failure("runtime_error", "invalid_entrypoint")
    for root in reversed([r for r in roots if r]):
        if root not in sys.path:
            sys.path.insert(0, root)
    module, attr = entrypoint.split(":", 1)
    try:
        handler = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        raise Failure("runtime_error", "entrypoint_not_found") from None
    if not callable(handler):
        raise Failure("runtime_error", "invalid_entrypoint")
    return handler


async def collect(result, emit):
    if inspect.isawaitable(result):
        result = await result
    if isinstance(result, str):
        return result, None
    if isinstance(result, Mapping):
        text = result.get("text")
        if not isinstance(text, str):
            raise Failure("protocol_error", "invalid_response")
        usage = result.get("usage")
        return text, usage if isinstance(usage, Mapping) else None
    parts = []

    def take(chunk):
        if not isinstance(chunk, str):
            raise Failure("protocol_error", "invalid_response")
        if chunk:
            parts.append(chunk)
            emit("text_delta", text=chunk)

    if isinstance(result, AsyncIterable):
        async for chunk in result:
            take(chunk)
    elif isinstance(result, Iterable):
        for chunk in result:
            take(chunk)
    else:
        raise Failure("protocol_error", "invalid_response")
    return "".join(parts), None


def main():
    out = protocol_stream()

    def emit(kind, **fields):
        out.write(json.dumps({"v": 1, "type": kind, **fields}, ensure_ascii=False,
                             separators=(",", ":")) + "\n")
        out.flush()

    session = None
    try:
        if len(sys.argv) != 2:
            raise Failure("runtime_error", "invalid_entrypoint")
        try:
            request = json.loads(sys.stdin.readline())
        except ValueError:
            raise Failure("protocol_error", "invalid_request") from None
        if not isinstance(request, dict) or not isinstance(request.get("prompt"), str):
            raise Failure("protocol_error", "invalid_request")
        session = request.get("session_id") or "rda_" + uuid.uuid4().hex
        if not isinstance(session, str) or not SESSION.fullmatch(session):
            session = None
            raise Failure("runtime_error", "invalid_session_id")
        model = request.get("model") or {}
        workdir = request.get("workdir")
        handler = load(sys.argv[1], [os.environ.get("RAYITO_AGENT_APP_DIR"), workdir])
        emit("session", session_id=session)
        emit("step_started", index=1)
        payload = {
            "prompt": request["prompt"],
            "session_id": session,
            "model": model.get("id") if isinstance(model, dict) else None,
            "reasoning": request.get("reasoning") is True,
        }
        text, usage = asyncio.run(collect(handler(payload), emit))
        emit("text", text=text)
        finished = {"index": 1, "finish_reason": "stop"}
        if usage is not None:
            finished["usage"] = {key: count(usage.get(key)) for key in USAGE_KEYS}
        emit("step_finished", **finished)
    except Failure as failure:
        emit("agent_failed", reason=failure.reason, detail_code=failure.detail,
             session_id=session)
        return 1
    except Exception as exc:  # the user's code: classified, its message never sent
        module = type(exc).__module__.split(".", 1)[0]
        reason = "model_error" if module in MODEL_MODULES else "runtime_error"
        emit("agent_failed", reason=reason, detail_code=type(exc).__name__[:64],
             session_id=session)
        return 1
    emit("done", session_id=session)
    return 0


if __name__ == "__main__":
    sys.exit(main())
