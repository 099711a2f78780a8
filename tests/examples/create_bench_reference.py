"""The reference SDK's side of `create_bench` (tests/examples/create_bench.rs).

Run by the bench with the reference's venv (`target/test-deps/venv`) and an
environment that points boto3 and gRPC at the bench's emulator. Reads one
line per round on stdin ("round"), then times `Sandbox.create(template=...)`
until it returns (ready) and the first `run_code("1 + 1")` until its result,
kills the sandbox (untimed) and prints "<create ms> <first result ms>".
A warm-up round runs before "ready" is printed (imports, boto3's client,
the gRPC runtime), as the Rust side warms up too.
"""

import sys
import time

from rayito import Sandbox


def one_round(template: str) -> tuple[float, float]:
    started = time.perf_counter()
    sandbox = Sandbox.create(template=template)
    created = time.perf_counter()
    try:
        execution = sandbox.run_code("1 + 1")
        first = time.perf_counter()
        if execution.text != "2":
            raise SystemExit(f"run_code('1 + 1') gave {execution.text!r}")
    finally:
        sandbox.kill()
    return (created - started) * 1000.0, (first - started) * 1000.0


def main() -> None:
    template = sys.argv[1]
    one_round(template)
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "round":
            break
        created, first = one_round(template)
        print(f"{created:.3f} {first:.3f}", flush=True)


if __name__ == "__main__":
    main()
