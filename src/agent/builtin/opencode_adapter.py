#!/usr/bin/env python3
"""rayito's OpenCode adapter: the run request on stdin, protocol v1 on stdout.

Written into the sandbox by the SDK (src/agent/builtin/opencode.rs) and
launched as the run's background command. Standard library only: the
sandbox's python3 is all it needs besides OpenCode itself.

1. Reads the run request: one JSON line (prompt, session, model,
   reasoning, workdir, the spec's OpenCode config and the gateways' URLs).
2. Takes the run lock (one run at a time per sandbox) or prints
   `{"type":"rayito.busy"}`; finds `opencode` or prints
   `{"type":"rayito.runtime_missing"}`.
3. Writes `opencode.json` (and the spec's AGENTS.md) under the agent's
   state directory and runs `opencode run --format json` with the prompt
   on stdin (never in argv, where the process list would show it).
4. Turns each line of OpenCode's JSON output into protocol v1 lines, then
   `done` (exit 0, no error seen, a session known) and OpenCode's exit code.

OpenCode's session ids (`ses_...`) are kept behind protocol v1's
`rda_<32 hex>` ids: the map lives in the state directory, so a later run
given an `rda_` id resumes the same OpenCode session.
"""

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

STATE_DIR = os.environ.get("RAYITO_AGENT_STATE_DIR", "/home/user/.rayito/agent")
OPENCODE_DIR = os.path.join(STATE_DIR, "opencode")
CONFIG_PATH = os.path.join(OPENCODE_DIR, "opencode.json")
INSTRUCTIONS_PATH = os.path.join(OPENCODE_DIR, "AGENTS.md")
SESSIONS_DIR = os.path.join(OPENCODE_DIR, "sessions")
LOG_PATH = os.path.join(OPENCODE_DIR, "opencode.log")
LOCK_PATH = os.path.join(STATE_DIR, "run.lock")
# Where AgentTemplate (and, without /opt, a warm-up step) installs
# OpenCode; PATH is asked first.
INSTALLED = ("/opt/agents/bin/opencode", "/home/user/.rayito/agent/runtimes/bin/opencode")
TITLE = "rayito"
TOOL_OUTPUT_MAX = 64 * 1024
# OpenCode's switches for an unattended run with no download and no
# update; the websocket transport stays off (the gateway forwards HTTP).
FLAG_ENVS = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_PURE": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_EXPERIMENTAL_WEBSOCKETS": "0",
}
OPENCODE_SESSION = re.compile(r"[A-Za-z0-9_-]{1,128}")
RAYITO_SESSION = re.compile(r"rda_[0-9a-f]{32}")
DETAIL_CODE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def emit(kind, **fields):
    """One protocol v1 line, flushed at once (the SDK streams them)."""
    line = {"v": 1, "type": kind}
    line.update(fields)
    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def script_line(kind):
    """The script's own failure lines, outside protocol v1's types."""
    sys.stdout.write(json.dumps({"type": "rayito." + kind}) + "\n")
    sys.stdout.flush()


def count(value):
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 0


def usage(tokens):
    if not isinstance(tokens, dict):
        return {"input": 0, "output": 0, "reasoning": 0, "cache_read": 0, "cache_write": 0}
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
    return {
        "input": count(tokens.get("input")),
        "output": count(tokens.get("output")),
        "reasoning": count(tokens.get("reasoning")),
        "cache_read": count(cache.get("read")),
        "cache_write": count(cache.get("write")),
    }


def rayito_session(opencode_id):
    """The protocol's id for an OpenCode session, remembered for resumes."""
    rda = "rda_" + hashlib.sha256(opencode_id.encode()).hexdigest()[:32]
    os.makedirs(SESSIONS_DIR, exist_ok=True)
    with open(os.path.join(SESSIONS_DIR, rda), "w") as out:
        out.write(opencode_id)
    return rda


def opencode_session(rda):
    """The OpenCode session behind an `rda_` id, or None when unknown."""
    if not RAYITO_SESSION.fullmatch(rda):
        return None
    try:
        with open(os.path.join(SESSIONS_DIR, rda)) as found:
            opencode_id = found.read().strip()
    except OSError:
        return None
    return opencode_id if OPENCODE_SESSION.fullmatch(opencode_id) else None


class Translator:
    """OpenCode's `--format json` lines to protocol v1 lines."""

    def __init__(self, reasoning):
        self.reasoning = reasoning
        self.session = None
        self.steps = 0
        self.failed = False

    def line(self, raw):
        try:
            payload = json.loads(raw)
        except ValueError:
            return
        if not isinstance(payload, dict):
            return
        session = payload.get("sessionID")
        if self.session is None and isinstance(session, str) and OPENCODE_SESSION.fullmatch(session):
            self.session = rayito_session(session)
            emit("session", session_id=self.session)
        kind = payload.get("type")
        part = payload.get("part") if isinstance(payload.get("part"), dict) else {}
        if kind == "step_start":
            self.steps += 1
            emit("step_started", index=self.steps)
        elif kind == "step_finish":
            reason = part.get("reason")
            emit(
                "step_finished",
                index=self.steps,
                usage=usage(part.get("tokens")),
                finish_reason=reason if isinstance(reason, str) else None,
            )
        elif kind == "text" and isinstance(part.get("text"), str):
            emit("text", text=part["text"])
        elif kind == "reasoning" and isinstance(part.get("text"), str):
            if self.reasoning:
                emit("reasoning", text=part["text"])
        elif kind == "tool_use":
            self.tool(part)
        elif kind == "error":
            error = payload.get("error") if isinstance(payload.get("error"), dict) else {}
            name = error.get("name")
            fields = {"reason": "model_error"}
            if isinstance(name, str) and DETAIL_CODE.fullmatch(name):
                fields["detail_code"] = name
            self.failed = True
            emit("agent_failed", **fields)

    def tool(self, part):
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        status = state.get("status")
        if status not in ("completed", "error"):
            return
        output = state.get("output") if status == "completed" else state.get("error")
        truncated = False
        if isinstance(output, str) and len(output) > TOOL_OUTPUT_MAX:
            output, truncated = output[:TOOL_OUTPUT_MAX], True
        emit(
            "tool_call",
            call_id=str(part.get("callID", "")),
            name=str(part.get("tool", "")),
            status=status,
            input=state.get("input") if isinstance(state.get("input"), dict) else None,
            output=output if isinstance(output, str) else None,
            output_truncated=truncated,
        )


def write_config(request):
    os.makedirs(OPENCODE_DIR, exist_ok=True)
    config = request.get("opencode_config")
    if not isinstance(config, dict):
        config = {}
    instructions = request.get("instructions")
    if isinstance(instructions, str):
        with open(INSTRUCTIONS_PATH, "w") as out:
            out.write(instructions)
        config["instructions"] = [INSTRUCTIONS_PATH]
    with open(CONFIG_PATH, "w") as out:
        json.dump(config, out, indent=2, sort_keys=True)
        out.write("\n")


def arguments(opencode, request, provider):
    workdir = request.get("workdir") if isinstance(request.get("workdir"), str) else "/home/user"
    args = [opencode, "run", "--format", "json", "--auto", "--title", TITLE, "--dir", workdir]
    model = request.get("model")
    if isinstance(model, str) and model and provider:
        args += ["-m", provider + "/" + model]
    if request.get("reasoning") is True:
        args.append("--thinking")
    return args


def main():
    request = json.loads(sys.stdin.buffer.readline() or b"{}")
    os.makedirs(STATE_DIR, exist_ok=True)
    lock = open(LOCK_PATH, "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        script_line("busy")
        return 0
    opencode = shutil.which("opencode") or next(
        (path for path in INSTALLED if os.access(path, os.X_OK)), None
    )
    if opencode is None:
        script_line("runtime_missing")
        return 0
    write_config(request)
    args = arguments(opencode, request, request.get("provider_id"))
    session = request.get("session_id")
    if isinstance(session, str) and session:
        resumed = opencode_session(session)
        if resumed is None:
            emit("agent_failed", reason="runtime_error", detail_code="unknown_session")
            return 0
        args += ["-s", resumed]
    env = dict(os.environ)
    env.update(FLAG_ENVS)
    env["OPENCODE_CONFIG"] = CONFIG_PATH
    extra = request.get("envs")
    if isinstance(extra, dict):
        env.update({k: v for k, v in extra.items() if isinstance(k, str) and isinstance(v, str)})
    translator = Translator(request.get("reasoning") is True)
    with open(LOG_PATH, "wb") as log:
        child = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env)
        child.stdin.write(str(request.get("prompt", "")).encode())
        child.stdin.close()
        for raw in child.stdout:
            translator.line(raw)
        code = child.wait()
    if code == 0 and not translator.failed and translator.session is not None:
        emit("done")
    return code


if __name__ == "__main__":
    sys.exit(main())
