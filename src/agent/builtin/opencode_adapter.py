#!/usr/bin/env python3
"""rayito's OpenCode adapter: the run request on stdin, protocol v1 on stdout.

Written into the sandbox by the SDK (src/agent/builtin/opencode.rs) and
launched as the run's background command. Standard library only: the
sandbox's python3 is all it needs besides OpenCode itself.

1. Reads the run request: one JSON line (src/agent/builtin/mod.rs).
2. Finds `opencode` or prints `{"type":"rayito.runtime_missing"}` (the
   SDK's run script already holds the run lock and ran the check).
3. Builds `opencode.json` from the request (the model behind the
   gateway's URL with the placeholder key, permissions, subagents, MCP
   servers, the raw config), writes it and the spec's AGENTS.md under the
   agent's state directory, and runs `opencode run --format json` with the
   prompt on stdin (never in argv, where the process list would show it).
4. Turns each line of OpenCode's JSON output into protocol v1 lines, then
   `done` (exit 0, no error seen, a session known) and OpenCode's exit code.

OpenCode's session ids (`ses_...`) are kept behind protocol v1's
`rda_<32 hex>` ids: the map lives in the state directory, so a later run
given an `rda_` id resumes the same OpenCode session.
"""

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


# AgentModel's providers as OpenCode's provider ids.
PROVIDER_IDS = {
    "bedrock": "amazon-bedrock",
    "anthropic": "anthropic",
    "openai-compatible": "rayito-openai",
    "openai": "openai",
    "google": "google",
    "azure": "azure",
}
# The AI SDK package of the providers declared with their models (OpenCode
# bundles them; nothing is downloaded).
PROVIDER_NPM = {
    "openai-compatible": "@ai-sdk/openai-compatible",
    "openai": "@ai-sdk/openai",
    "google": "@ai-sdk/google",
    "azure": "@ai-sdk/azure",
}
# What each provider's SDK expects in baseURL before its own path, beyond
# the request's base_url (which already carries /v1 for openai and
# /openai/v1 for azure).
EXTRA_BASE_PATH = {"anthropic": "/v1", "google": "/v1beta"}


def text(value):
    return value if isinstance(value, str) and value else None


def provider_config(model, model_ids):
    provider = model.get("provider")
    base_url = text(model.get("base_url")) or ""
    key = text(model.get("api_key")) or "placeholder"
    if provider == "bedrock":
        options = {"endpoint": base_url}
        if text(model.get("region")):
            options["region"] = model["region"]
        return {"options": options}
    entry = {"options": {"baseURL": base_url + EXTRA_BASE_PATH.get(provider, ""), "apiKey": key}}
    if provider in PROVIDER_NPM:
        entry["npm"] = PROVIDER_NPM[provider]
        entry["models"] = {model_id: {} for model_id in sorted(model_ids)}
    return entry


def permission(rules):
    if not isinstance(rules, dict):
        return None
    out = {"*": rules.get("default", "allow")}
    tools = rules.get("tools")
    if isinstance(tools, dict):
        out.update(tools)
    return out


def merge(base, extra):
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(merged.get(key), dict) and isinstance(value, dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def opencode_config(request):
    """The `opencode.json` of the run (OpenCode's config schema)."""
    model = request.get("model") if isinstance(request.get("model"), dict) else {}
    provider = PROVIDER_IDS.get(model.get("provider"), "rayito-openai")
    model_id = text(model.get("id")) or "default"
    small_id = text(model.get("small_id")) or model_id
    agents = request.get("agents") if isinstance(request.get("agents"), dict) else {}
    model_ids = {model_id, small_id}
    model_ids.update(a["model"] for a in agents.values() if isinstance(a, dict) and text(a.get("model")))
    build = {}
    if permission(request.get("permissions")) is not None:
        build["permission"] = permission(request.get("permissions"))
    config_agents = {"build": build}
    for name, agent in agents.items():
        if not isinstance(agent, dict):
            continue
        entry = {"mode": "subagent", "description": agent.get("description", ""), "prompt": agent.get("instructions", "")}
        if text(agent.get("model")):
            entry["model"] = provider + "/" + agent["model"]
        if permission(agent.get("permissions")) is not None:
            entry["permission"] = permission(agent.get("permissions"))
        config_agents[name] = entry
    config = {
        "$schema": "https://opencode.ai/config.json",
        "model": provider + "/" + model_id,
        "small_model": provider + "/" + small_id,
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
        "enabled_providers": [provider],
        "provider": {provider: provider_config(model, model_ids)},
        "agent": config_agents,
    }
    mcp = request.get("mcp") if isinstance(request.get("mcp"), dict) else {}
    servers = {}
    for name, server in mcp.items():
        if not isinstance(server, dict):
            continue
        if server.get("type") == "local":
            entry = {"type": "local", "command": server.get("command", []), "enabled": True}
            if server.get("envs"):
                entry["environment"] = server["envs"]
            if isinstance(server.get("timeout_ms"), int):
                entry["timeout"] = server["timeout_ms"]
        else:
            entry = {"type": "remote", "url": server.get("url", ""), "enabled": True}
        servers[name] = entry
    if servers:
        config["mcp"] = servers
    if isinstance(request.get("raw_config"), dict):
        config = merge(config, request["raw_config"])
    return config, provider


def write_config(request):
    os.makedirs(OPENCODE_DIR, exist_ok=True)
    config, provider = opencode_config(request)
    instructions = request.get("instructions")
    if isinstance(instructions, str):
        with open(INSTRUCTIONS_PATH, "w") as out:
            out.write(instructions)
        config["instructions"] = [INSTRUCTIONS_PATH]
    with open(CONFIG_PATH, "w") as out:
        json.dump(config, out, indent=2, sort_keys=True)
        out.write("\n")
    return provider


def arguments(opencode, request):
    workdir = request.get("workdir") if isinstance(request.get("workdir"), str) else "/home/user"
    args = [opencode, "run", "--format", "json", "--auto", "--title", TITLE, "--dir", workdir]
    if request.get("reasoning") is True:
        args.append("--thinking")
    return args


def main():
    request = json.loads(sys.stdin.buffer.readline() or b"{}")
    os.makedirs(STATE_DIR, exist_ok=True)
    opencode = shutil.which("opencode") or next(
        (path for path in INSTALLED if os.access(path, os.X_OK)), None
    )
    if opencode is None:
        script_line("runtime_missing")
        return 0
    write_config(request)
    args = arguments(opencode, request)
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
    model = request.get("model") if isinstance(request.get("model"), dict) else {}
    if model.get("provider") == "bedrock":
        # The bearer token OpenCode's Bedrock provider sends: the
        # placeholder, which the gateway replaces with the key.
        env["AWS_BEARER_TOKEN_BEDROCK"] = text(model.get("api_key")) or "placeholder"
        if text(model.get("region")):
            env["AWS_REGION"] = model["region"]
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
