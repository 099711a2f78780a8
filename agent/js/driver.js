// rayito code driver for javascript and typescript: one long-lived node
// process per context, the counterpart of agent/python/driver.py.
//
// The agent starts it through `sh` with the protocol on private descriptors:
// requests are read from fd 4, frames written to fd 3, and fds 1 and 2 both
// lead to the agent's stderr pipe (so a subprocess that inherits them can
// never corrupt a frame). Frames are those of the Python driver: a 4-byte
// big-endian length, then one UTF-8 JSON object.
//
// Requests (agent -> driver):
//     {"op": "execute", "code": str, "envs": {}, "count": int}
// Frames (driver -> agent):
//     {"t": "ready"}
//     {"t": "running"}            (the cell started: SIGINT now interrupts it)
//     {"t": "stdout" | "stderr", "text": str}
//     {"t": "result", "main": bool, "data": {mime: str}}
//     {"t": "error", "name": str, "value": str, "traceback": [str]}
//     {"t": "done", "count": int}
//
// Cells run with vm.runInThisContext, so top-level declarations persist
// between cells (as in node's REPL) and the completion value of the last
// statement is the cell's result. A cell that uses top-level `await` runs as
// an async function instead: its declarations stay local to the cell.
//
// argv[1] is the language; a typescript context needs node's own type
// stripping (module.stripTypeScriptTypes, node 22.13 or newer): without it
// the driver exits with status 3 before saying ready.
'use strict';

const fs = require('fs');
const net = require('net');
const util = require('util');
const vm = require('vm');
const { StringDecoder } = require('string_decoder');

const PROTO_OUT = 3;
const PROTO_IN = 4;
const EXIT_NO_TYPESCRIPT = 3;

const language = process.argv[1] || 'javascript';
let transpile = (code) => code;
if (language === 'typescript') {
  const mod = require('module');
  if (typeof mod.stripTypeScriptTypes !== 'function') {
    process.exit(EXIT_NO_TYPESCRIPT);
  }
  transpile = (code) => mod.stripTypeScriptTypes(code, { mode: 'transform' });
}

function writeAll(buf) {
  let off = 0;
  while (off < buf.length) {
    try {
      off += fs.writeSync(PROTO_OUT, buf, off, buf.length - off);
    } catch (err) {
      if (err.code !== 'EAGAIN') {
        process.exit(1);
      }
    }
  }
}

// The agent refuses a frame larger than this (MAX_FRAME_BYTES in
// python.rs) and takes the kernel for dead: output is sent in pieces of at
// most TEXT_PIECE characters (6 bytes each at worst once escaped), other
// frames that would be larger are shrunk.
const MAX_FRAME_BYTES = 32 * 1024 * 1024;
const TEXT_PIECE = 1024 * 1024;
const SHRUNK_ERROR_CHARS = 1024 * 1024;

function shrunk(message) {
  if (message.t === 'result') {
    return {
      t: 'result',
      main: message.main,
      data: { 'rayito/omitted': Object.keys(message.data || {}).sort().join(',') },
    };
  }
  if (message.t === 'error') {
    const lines = message.traceback || [];
    return {
      t: 'error',
      name: message.name,
      value: String(message.value || '').slice(0, SHRUNK_ERROR_CHARS),
      traceback: lines.slice(-100).map((l) => String(l).slice(0, 4096)),
    };
  }
  return message;
}

function send(message) {
  if ((message.t === 'stdout' || message.t === 'stderr') && message.text.length > TEXT_PIECE) {
    for (let at = 0; at < message.text.length; at += TEXT_PIECE) {
      send({ t: message.t, text: message.text.slice(at, at + TEXT_PIECE) });
    }
    return;
  }
  let body = Buffer.from(JSON.stringify(message), 'utf8');
  if (body.length > MAX_FRAME_BYTES) {
    body = Buffer.from(JSON.stringify(shrunk(message)), 'utf8');
  }
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length, 0);
  writeAll(Buffer.concat([head, body]));
}

// process.stdout / process.stderr (and so console.*) become frames.
function capture(stream, kind) {
  const decoder = new StringDecoder('utf8');
  stream.write = function write(chunk, encoding, callback) {
    if (typeof encoding === 'function') {
      callback = encoding;
      encoding = undefined;
    }
    const text =
      typeof chunk === 'string' ? chunk : decoder.write(Buffer.from(chunk));
    if (text.length > 0) {
      send({ t: kind, text });
    }
    if (typeof callback === 'function') {
      process.nextTick(callback);
    }
    return true;
  };
}
capture(process.stdout, 'stdout');
capture(process.stderr, 'stderr');

// Errors that escape a cell later must not kill the context.
process.on('uncaughtException', (err) => {
  send({ t: 'stderr', text: 'Uncaught ' + describe(err) + '\n' });
});
process.on('unhandledRejection', (err) => {
  send({ t: 'stderr', text: 'Unhandled rejection ' + describe(err) + '\n' });
});

let interruptWaiting = null;
process.on('SIGINT', () => {
  // Between cells, or while a cell awaits: reject what it waits for.
  if (interruptWaiting) {
    interruptWaiting(interruptError());
  }
});

function interruptError() {
  const err = new Error('Script execution was interrupted by `SIGINT`');
  err.name = 'KeyboardInterrupt';
  return err;
}

function describe(err) {
  if (err instanceof Error) {
    return err.stack || String(err);
  }
  return util.inspect(err);
}

// Stack lines of the driver and of node's internals, dropped from tracebacks.
const DRIVER_FRAME = /^\s+at .*(\[eval\]|node:vm|node:internal|sigintHandlersWrap)/;

function errorFrame(err) {
  if (err instanceof Error || (err && typeof err === 'object' && 'stack' in err)) {
    return {
      t: 'error',
      name: String(err.name || 'Error'),
      value: String(err.message === undefined ? '' : err.message),
      traceback: String(err.stack || '')
        .split('\n')
        .filter((line) => !DRIVER_FRAME.test(line)),
    };
  }
  return { t: 'error', name: 'Error', value: util.inspect(err), traceback: [] };
}

function bundle(value) {
  const data = { 'text/plain': util.inspect(value) };
  if (value !== null && typeof value === 'object') {
    try {
      const json = JSON.stringify(value);
      if (json !== undefined) {
        data['application/json'] = json;
      }
    } catch (_) {
      // Cycles or BigInts: text only.
    }
  }
  return data;
}

function awaitInterruptible(promise) {
  return new Promise((resolve, reject) => {
    interruptWaiting = reject;
    promise.then(resolve, reject);
  }).finally(() => {
    interruptWaiting = null;
  });
}

function compile(code, filename) {
  try {
    return new vm.Script(code, { filename });
  } catch (err) {
    if (err instanceof SyntaxError && /\bawait\b/.test(code)) {
      // Top-level await: run the cell as an async function, as one
      // expression (keeping its value) when it is one.
      try {
        return new vm.Script('(async () => (\n' + code + '\n))()', { filename });
      } catch (_) {
        return new vm.Script('(async () => {\n' + code + '\n})()', { filename });
      }
    }
    throw err;
  }
}

async function execute(request) {
  const count = request.count;
  send({ t: 'running' });
  try {
    const script = compile(transpile(String(request.code)), '<cell-' + count + '>');
    let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
    if (value !== null && typeof value === 'object' && typeof value.then === 'function') {
      value = await awaitInterruptible(value);
    }
    if (value !== undefined) {
      send({ t: 'result', main: true, data: bundle(value) });
    }
  } catch (err) {
    if (err && err.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
      send(errorFrame(interruptError()));
    } else {
      send(errorFrame(err));
    }
  }
  // Let output written by callbacks that are already due reach this cell.
  await new Promise((resolve) => setImmediate(resolve));
  send({ t: 'done', count });
}

// Requests, one at a time, in arrival order.
let pending = Buffer.alloc(0);
let queue = Promise.resolve();
const input = new net.Socket({ fd: PROTO_IN, readable: true, writable: false });
input.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  while (pending.length >= 4) {
    const size = pending.readUInt32BE(0);
    if (pending.length < 4 + size) {
      break;
    }
    const body = pending.subarray(4, 4 + size);
    pending = pending.subarray(4 + size);
    let request;
    try {
      request = JSON.parse(body.toString('utf8'));
    } catch (_) {
      process.exit(1);
    }
    if (request && request.op === 'execute') {
      queue = queue.then(() => execute(request));
    }
  }
});
input.on('end', () => process.exit(0));
input.on('error', () => process.exit(0));

send({ t: 'ready' });
