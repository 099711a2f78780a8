# The HttpApp driver of rayito's agent runs: starts the app, waits for its
# health path, invokes it with the run request's prompt and writes the
# answer as protocol v1 lines on stdout. Written by the SDK into the sandbox;
# the app's own output goes to stderr, never into the events.
import json, os, secrets, subprocess, sys, time, urllib.request

def emit(kind, **fields):
    fields.update({"v": 1, "type": kind})
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()

def fail(reason, code):
    emit("agent_failed", reason=reason, detail_code=code)
    sys.exit(0)

def first_text(body, field):
    if field:
        value = body
        for part in field.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value if isinstance(value, str) else None
    for key in ("response", "answer", "output", "text", "result", "content"):
        if isinstance(body.get(key), str):
            return body[key]
    return None

def main():
    config = json.loads(os.environ["RAYITO_HTTP_APP"])
    request = json.loads(sys.stdin.readline())
    session = request.get("session_id") or "rda_" + secrets.token_hex(16)
    env = dict(os.environ)
    if config.get("port_env"):
        env[config["port_env"]] = str(config["port"])
    app = subprocess.Popen(config["command"], env=env, stdin=subprocess.DEVNULL,
                           stdout=sys.stderr, stderr=sys.stderr)
    base = "http://127.0.0.1:%d" % config["port"]
    try:
        deadline = time.monotonic() + 120
        while True:
            if app.poll() is not None:
                fail("runtime_error", "app_exited")
            try:
                with urllib.request.urlopen(base + config["health_path"], timeout=2) as r:
                    if r.status == 200:
                        break
            except Exception:
                pass
            if time.monotonic() > deadline:
                fail("runtime_error", "app_not_ready")
            time.sleep(0.1)
        emit("session", session_id=session)
        emit("step_started")
        protocol = config["protocol"]
        prompt = request["prompt"]
        if protocol == "openai-chat":
            body = {"messages": [{"role": "user", "content": prompt}], "stream": True,
                    "stream_options": {"include_usage": True}}
            if request.get("model", {}).get("id"):
                body["model"] = request["model"]["id"]
        elif protocol == "json":
            body = {config.get("request_field") or "prompt": prompt}
        else:
            body = {"prompt": prompt}
        data = json.dumps(body).encode()
        req = urllib.request.Request(base + config["invoke_path"], data=data, method="POST",
                                     headers={"content-type": "application/json"})
        try:
            response = urllib.request.urlopen(req, timeout=3600)
        except urllib.error.HTTPError as err:
            fail("runtime_error", "http_%d" % err.code)
        except Exception:
            fail("runtime_error", "app_unreachable")
        usage = None
        with response:
            if protocol == "openai-chat":
                text = []
                for raw in response:
                    line = raw.decode("utf-8", "replace").strip()
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        break
                    try:
                        chunk = json.loads(payload)
                    except ValueError:
                        continue
                    for choice in chunk.get("choices") or []:
                        delta = (choice.get("delta") or {}).get("content")
                        if isinstance(delta, str) and delta:
                            text.append(delta)
                            emit("text_delta", text=delta)
                    if isinstance(chunk.get("usage"), dict):
                        u = chunk["usage"]
                        usage = {"input": u.get("prompt_tokens", 0), "output": u.get("completion_tokens", 0)}
                answer = "".join(text)
            else:
                raw = response.read().decode("utf-8", "replace")
                answer = raw
                if protocol != "raw":
                    try:
                        parsed = json.loads(raw)
                    except ValueError:
                        parsed = None
                    if isinstance(parsed, dict):
                        found = first_text(parsed, config.get("response_field"))
                        if found is None and protocol == "json":
                            fail("protocol_error", "no_text_field")
                        answer = found if found is not None else raw
        emit("text", text=answer)
        finished = {"finish_reason": "stop"}
        if usage is not None:
            finished["usage"] = usage
        emit("step_finished", **finished)
        emit("done")
    finally:
        app.terminate()
        try:
            app.wait(timeout=5)
        except subprocess.TimeoutExpired:
            app.kill()

main()
