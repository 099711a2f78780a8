"""rayito code driver: one long-lived Python interpreter per code context.

The agent starts this program with ``python3 -c <source>`` and talks to it over
the process's original stdin/stdout with frames: a 4-byte big-endian length,
then one UTF-8 JSON object. Before any user code runs, the driver moves the
protocol to private descriptors and points fds 0/1/2 at /dev/null and two pipes
it reads itself, so that everything the user's code (or a subprocess it
starts) writes is forwarded as it is produced and can never corrupt a frame.

Requests (agent -> driver):
    {"op": "execute", "code": str, "envs": {str: str}, "count": int}
Frames (driver -> agent):
    {"t": "ready"}
    {"t": "running"}            (the cell started: SIGINT now interrupts it)
    {"t": "stdout" | "stderr", "text": str}
    {"t": "result", "main": bool, "data": {mime: str}}
    {"t": "error", "name": str, "value": str, "traceback": [str]}
    {"t": "done", "count": int}

Standard library only; Python 3.8 or newer.
"""

import ast
import base64
import builtins
import codecs
import io
import json
import linecache
import os
import signal
import struct
import sys
import threading
import traceback
import types

# inspect.CO_COROUTINE, without importing inspect at start.
_CO_COROUTINE = 0x80

_READ_SIZE = 32 * 1024
_SYNC_WAIT_S = 2.0
_CELL_PREFIX = "<cell-"
# A mime value larger than this is dropped and named under "rayito/omitted".
_MAX_VALUE_CHARS = 8 * 1024 * 1024
# Mime types whose content is a JSON document (a dict is sent as JSON text,
# never as its Python repr): E2B's chart and data documents among them.
_JSON_MIMES = ("application/json", "e2b/chart", "e2b/data")
# The agent refuses a frame larger than this (MAX_FRAME_BYTES in python.rs)
# and takes the kernel for dead: a frame that would be larger is shrunk.
_MAX_FRAME_BYTES = 32 * 1024 * 1024
# What is kept of an error's value and traceback when its frame is shrunk.
_SHRUNK_ERROR_CHARS = 1024 * 1024


def _shrunk(message):
    """A frame's message made small enough for the agent's cap."""
    kind = message.get("t")
    if kind == "result":
        data = message.get("data", {})
        return {
            "t": "result",
            "main": message.get("main", False),
            "data": {"rayito/omitted": ",".join(sorted(data))},
        }
    if kind == "error":
        value = message.get("value", "")[:_SHRUNK_ERROR_CHARS]
        lines = message.get("traceback", [])
        kept = []
        size = 0
        for line in reversed(lines):
            size += len(line)
            if size > _SHRUNK_ERROR_CHARS:
                break
            kept.append(line)
        kept.reverse()
        return {"t": "error", "name": message.get("name", ""), "value": value, "traceback": kept}
    if kind in ("stdout", "stderr"):
        return {"t": kind, "text": message.get("text", "")[:_SHRUNK_ERROR_CHARS]}
    return message


class _Protocol(object):
    """Framed JSON over two private descriptors; writes are serialised."""

    def __init__(self, fd_in, fd_out):
        self._in = fd_in
        self._out = fd_out
        self._lock = threading.Lock()

    def send(self, message):
        body = json.dumps(message, ensure_ascii=False).encode("utf-8", "replace")
        if len(body) > _MAX_FRAME_BYTES:
            body = json.dumps(_shrunk(message), ensure_ascii=False).encode("utf-8", "replace")
        data = struct.pack(">I", len(body)) + body
        with self._lock:
            view = memoryview(data)
            while view:
                written = os.write(self._out, view)
                view = view[written:]

    def _read_exact(self, size):
        parts = []
        while size > 0:
            chunk = os.read(self._in, size)
            if not chunk:
                return None
            parts.append(chunk)
            size -= len(chunk)
        return b"".join(parts)

    def recv(self):
        header = self._read_exact(4)
        if header is None:
            return None
        (size,) = struct.unpack(">I", header)
        body = self._read_exact(size)
        if body is None:
            return None
        return json.loads(body.decode("utf-8"))


class _Pump(object):
    """Forwards what is written to one of fds 1/2 as stdout/stderr frames.

    A sync marker (random per driver) written to the same pipe tells the main
    thread that everything written before it has been forwarded.
    """

    def __init__(self, proto, kind, read_fd, marker):
        self._proto = proto
        self._kind = kind
        self._fd = read_fd
        self._marker = marker
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._synced = threading.Semaphore(0)
        thread = threading.Thread(target=self._run, name="rayito-" + kind)
        thread.daemon = True
        thread.start()

    def _forward(self, data):
        text = self._decoder.decode(data)
        if text:
            self._proto.send({"t": self._kind, "text": text})

    def _held_back(self, buf):
        # Length of the longest tail of buf that could begin a marker.
        for size in range(min(len(buf), len(self._marker) - 1), 0, -1):
            if buf.endswith(self._marker[:size]):
                return size
        return 0

    def _run(self):
        pending = b""
        while True:
            try:
                data = os.read(self._fd, _READ_SIZE)
            except InterruptedError:
                continue
            if not data:
                return
            buf = pending + data
            while True:
                at = buf.find(self._marker)
                if at < 0:
                    break
                self._forward(buf[:at])
                buf = buf[at + len(self._marker):]
                self._synced.release()
            keep = self._held_back(buf)
            self._forward(buf[: len(buf) - keep])
            pending = buf[len(buf) - keep:]

    def sync(self, fd):
        try:
            os.write(fd, self._marker)
        except OSError:
            return
        self._synced.acquire(timeout=_SYNC_WAIT_S)


class _FdBinary(object):
    """``sys.stdout.buffer``: bytes straight to a descriptor (after any text
    still pending in the text layer, to keep the order)."""

    def __init__(self, fd, before_write):
        self._fd = fd
        self._before_write = before_write

    def write(self, data):
        self._before_write()
        _write_all(self._fd, bytes(data))
        return len(data)

    def flush(self):
        self._before_write()

    def fileno(self):
        return self._fd

    def isatty(self):
        return False


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class _FdText(io.TextIOBase):
    """``sys.stdout``/``sys.stderr``: text to a descriptor, written at each
    newline, every 50 ms (a background flusher) and at the end of the cell,
    so output streams as produced without splitting a print in two."""

    _FLUSH_SIZE = 8192

    def __init__(self, fd, name):
        super(_FdText, self).__init__()
        self._fd = fd
        self._name = name
        self._lock = threading.RLock()
        self._pending = []
        self._size = 0
        self.buffer = _FdBinary(fd, self.flush)

    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "replace"

    @property
    def name(self):
        return self._name

    def writable(self):
        return True

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not " + type(text).__name__)
        with self._lock:
            self._pending.append(text)
            self._size += len(text)
            if "\n" in text or self._size >= self._FLUSH_SIZE:
                self._flush_locked()
        return len(text)

    def flush(self):
        if self._pending:
            with self._lock:
                self._flush_locked()

    def _flush_locked(self):
        if not self._pending:
            return
        data = "".join(self._pending).encode("utf-8", "replace")
        self._pending = []
        self._size = 0
        _write_all(self._fd, data)

    def fileno(self):
        return self._fd

    def isatty(self):
        return False


def _flush_periodically(streams):
    while True:
        threading.Event().wait(0.05)
        for stream in streams:
            try:
                stream.flush()
            except Exception:
                pass


class _Driver(object):
    def __init__(self):
        proto_in = os.dup(0)
        proto_out = os.dup(1)
        self.proto = _Protocol(proto_in, proto_out)

        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        marker = b"\x00\x1brayito-sync-" + os.urandom(16).hex().encode("ascii") + b"\x00"
        self.pumps = {}
        for fd, kind in ((1, "stdout"), (2, "stderr")):
            read_fd, write_fd = os.pipe()
            os.dup2(write_fd, fd)
            os.close(write_fd)
            self.pumps[fd] = _Pump(self.proto, kind, read_fd, marker)
        sys.stdin = open(os.devnull, "r")
        sys.stdout = _FdText(1, "<stdout>")
        sys.stderr = _FdText(2, "<stderr>")
        self.streams = (sys.stdout, sys.stderr)
        sys.__stdout__ = sys.stdout
        sys.__stderr__ = sys.stderr
        flusher = threading.Thread(
            target=_flush_periodically, args=((sys.stdout, sys.stderr),), name="rayito-flush"
        )
        flusher.daemon = True
        flusher.start()

        self.running = False
        signal.signal(signal.SIGINT, self._on_sigint)

        module = types.ModuleType("__main__")
        module.__dict__["__builtins__"] = builtins
        module.__dict__["display"] = self.display
        sys.modules["__main__"] = module
        self.namespace = module.__dict__
        self.count = 0

    def _on_sigint(self, signum, frame):
        # An interrupt that lands between cells (a late timeout) is ignored so
        # it can never break the driver's own bookkeeping.
        if self.running:
            raise KeyboardInterrupt

    def sync_output(self):
        for stream in (sys.stdout, sys.stderr) + self.streams:
            try:
                stream.flush()
            except Exception:
                pass
        for fd, pump in self.pumps.items():
            pump.sync(fd)

    # -- results -----------------------------------------------------------

    def bundle(self, value):
        data = {"text/plain": self._safe_repr(value)}
        mimebundle = getattr(value, "_repr_mimebundle_", None)
        if callable(mimebundle) and not isinstance(value, type):
            try:
                found = mimebundle()
                if isinstance(found, tuple):
                    found = found[0]
                if isinstance(found, dict):
                    for mime, content in found.items():
                        encoded = self._encode(mime, content)
                        if encoded is not None:
                            data[str(mime)] = encoded
            except Exception:
                pass
        for method, mime in (
            ("_repr_html_", "text/html"),
            ("_repr_markdown_", "text/markdown"),
            ("_repr_latex_", "text/latex"),
            ("_repr_json_", "application/json"),
            ("_repr_javascript_", "application/javascript"),
            ("_repr_png_", "image/png"),
            ("_repr_jpeg_", "image/jpeg"),
            ("_repr_svg_", "image/svg+xml"),
            ("_repr_pdf_", "application/pdf"),
        ):
            if mime in data or isinstance(value, type):
                continue
            render = getattr(value, method, None)
            if not callable(render):
                continue
            try:
                content = render()
            except Exception:
                continue
            if isinstance(content, tuple):
                content = content[0]
            encoded = self._encode(mime, content)
            if encoded is not None:
                data[mime] = encoded
        omitted = sorted(mime for mime, value in data.items() if len(value) > _MAX_VALUE_CHARS)
        for mime in omitted:
            del data[mime]
        if omitted:
            data["rayito/omitted"] = ",".join(omitted)
        return data

    @staticmethod
    def _safe_repr(value):
        try:
            return repr(value)
        except Exception as exc:
            return "<repr failed: " + type(exc).__name__ + ">"

    @staticmethod
    def _encode(mime, content):
        if content is None:
            return None
        if isinstance(content, (bytes, bytearray)):
            if mime.startswith("text/") or mime == "image/svg+xml":
                return bytes(content).decode("utf-8", "replace")
            return base64.b64encode(bytes(content)).decode("ascii")
        if mime in _JSON_MIMES or mime.endswith("+json"):
            if isinstance(content, str):
                return content
            try:
                return json.dumps(content)
            except (TypeError, ValueError):
                return None
        if isinstance(content, str):
            return content
        return str(content)

    def display(self, *values):
        """Shows each value as a (non-main) result, like IPython's display()."""
        self.sync_output()
        for value in values:
            self.proto.send({"t": "result", "main": False, "data": self.bundle(value)})

    # -- errors ------------------------------------------------------------

    def error_frame(self, exc):
        tb = exc.__traceback__
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith(_CELL_PREFIX):
            tb = tb.tb_next
        lines = traceback.format_exception(type(exc), exc, tb)
        return {
            "t": "error",
            "name": type(exc).__name__,
            "value": self._safe_str(exc),
            "traceback": "".join(lines).rstrip("\n").split("\n"),
        }

    @staticmethod
    def _safe_str(exc):
        try:
            return str(exc)
        except Exception:
            return ""

    # -- one cell ----------------------------------------------------------

    def run_cell(self, code, count):
        filename = _CELL_PREFIX + str(count) + ">"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        value = None
        has_value = False
        error = None
        self.running = True
        try:
            # Tells the agent an interrupt would now reach this cell.
            self.proto.send({"t": "running"})
            tree = ast.parse(code, filename=filename, mode="exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            flags = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
            self._run(compile(tree, filename, "exec", flags=flags))
            if last is not None:
                value = self._run(compile(last, filename, "eval", flags=flags), True)
                has_value = True
        except BaseException as exc:  # the cell's failure is data, never fatal
            error = exc
        finally:
            self.running = False
        self.sync_output()
        if error is not None:
            self.proto.send(self.error_frame(error))
        elif has_value and value is not None:
            self.namespace["_"] = value
            self.proto.send({"t": "result", "main": True, "data": self.bundle(value)})

    def _run(self, code_object, is_eval=False):
        result = eval(code_object, self.namespace)
        if code_object.co_flags & _CO_COROUTINE:
            # Imported on the first top-level await: asyncio is about half of
            # the driver's start (docs/performance.md).
            import asyncio

            loop = asyncio.new_event_loop()
            try:
                result = loop.run_until_complete(result)
            finally:
                loop.close()
        return result if is_eval else None

    def serve(self):
        self.proto.send({"t": "ready"})
        while True:
            request = self.proto.recv()
            if request is None:
                return
            if request.get("op") != "execute":
                continue
            self.count = int(request.get("count", self.count + 1))
            envs = request.get("envs") or {}
            saved = {name: os.environ.get(name) for name in envs}
            os.environ.update(envs)
            try:
                self.run_cell(request.get("code", ""), self.count)
            finally:
                for name, old in saved.items():
                    if old is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = old
            self.proto.send({"t": "done", "count": self.count})


if __name__ == "__main__":
    _Driver().serve()
