"""A stdio MCP server that misbehaves on purpose, written without the SDK so it can write what
the SDK never would. Each flag turns on one fault; without flags it is a plain server with an
`echo` tool (initialize era only).

  --flood SECONDS       after the handshake, write notifications/message in a tight loop for
                        SECONDS (0 = until killed); the count written goes to --report
  --burst N             after the handshake, write N notifications/message (data 1..N) in one write
  --hang-listing        answer initialize (and calls), never answer tools/list: a hung listing
  --garbage-first       before answering initialize, write a response and an error with ids
                        nobody sent, a stray request-less result and a non-JSON line
  --grandchild PIDFILE  start `sleep 1000` (same process group) and write its pid to PIDFILE
  --grandchild-ignores-term  the grandchild ignores SIGTERM (only SIGKILL ends it)
  --ignore-eof          keep running when stdin closes (only a signal ends it)
  --pidfile FILE        write this process's pid to FILE
  --stderr-junk         write a line with ANSI escapes, a NUL and 10 kB to stderr at start
  --tools N             list N tools besides `flood` (echo plus N-1 fillers)
A call of the `flood` tool ({"seconds": S}) starts a flood like --flood S.
  --report FILE         the flood's count, written when the flood ends
  --pings               the flood is of ping requests instead of notifications
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time

out_lock = threading.Lock()


def write(message):
    line = json.dumps(message, separators=(",", ":")) + "\n"
    with out_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def flood(seconds, report, pings=False):
    count = 0
    end = time.monotonic() + seconds if seconds > 0 else None
    line = (
        json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "logger": "flood", "data": "x" * 100},
            },
            separators=(",", ":"),
        )
        + "\n"
    )
    batch = line * 64
    if pings:
        batch = "".join(
            json.dumps({"jsonrpc": "2.0", "id": f"p{i}", "method": "ping"}) + "\n"
            for i in range(64)
        )
    try:
        while end is None or time.monotonic() < end:
            with out_lock:
                sys.stdout.write(batch)
                sys.stdout.flush()
            count += 64
    except BrokenPipeError:
        return
    if report:
        with open(report, "w") as f:
            f.write(str(count))
    write(
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "logger": "flood", "data": "flood over"},
        }
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--flood", type=float)
    parser.add_argument("--garbage-first", action="store_true")
    parser.add_argument("--hang-listing", action="store_true")
    parser.add_argument("--burst", type=int)
    parser.add_argument("--grandchild")
    parser.add_argument("--grandchild-ignores-term", action="store_true")
    parser.add_argument("--ignore-eof", action="store_true")
    parser.add_argument("--pidfile")
    parser.add_argument("--stderr-junk", action="store_true")
    parser.add_argument("--tools", type=int, default=1)
    parser.add_argument("--report")
    parser.add_argument("--pings", action="store_true")
    args = parser.parse_args()

    if args.pidfile:
        with open(args.pidfile, "w") as f:
            f.write(str(os.getpid()))
    if args.grandchild:
        command = ["sleep", "1000"]
        if args.grandchild_ignores_term:
            # An ignored signal stays ignored across exec.
            command = ["sh", "-c", "trap '' TERM; exec sleep 1000"]
        child = subprocess.Popen(command)
        with open(args.grandchild, "w") as f:
            f.write(str(child.pid))
    if args.stderr_junk:
        sys.stderr.write("red \x1b[31malert\x1b[0m nul \x00 end " + "z" * 10000 + "\n")
        sys.stderr.flush()

    tools = [
        {
            "name": "echo",
            "description": "Echoes its text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }
    ] + [
        {
            "name": "flood",
            "description": "Floods notifications/message for `seconds`.",
            "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
        }
    ] + [
        {"name": f"filler_{i}", "inputSchema": {"type": "object"}}
        for i in range(1, args.tools)
    ]

    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method = message.get("method")
        mid = message.get("id")
        if method == "initialize":
            if args.garbage_first:
                write({"jsonrpc": "2.0", "id": 987654, "result": {"stray": True}})
                write({"jsonrpc": "2.0", "id": "nobody", "error": {"code": -1, "message": "x"}})
                with out_lock:
                    sys.stdout.write("this is not JSON\n")
                    sys.stdout.flush()
            write(
                {
                    "jsonrpc": "2.0",
                    "id": mid,
                    "result": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {"tools": {}, "logging": {}},
                        "serverInfo": {"name": "misbehaving", "version": "1"},
                    },
                }
            )
        elif method is None:
            continue  # an answer (to a ping of the ping flood): nothing to do
        elif method == "notifications/initialized":
            if args.burst:
                burst = "".join(
                    json.dumps(
                        {"jsonrpc": "2.0", "method": "notifications/message",
                         "params": {"level": "info", "logger": "burst", "data": i}},
                        separators=(",", ":"),
                    )
                    + "\n"
                    for i in range(1, args.burst + 1)
                )
                with out_lock:
                    sys.stdout.write(burst)
                    sys.stdout.flush()
            if args.flood is not None:
                threading.Thread(
                    target=flood, args=(args.flood, args.report, args.pings), daemon=True
                ).start()
        elif method == "tools/list" and args.hang_listing:
            continue  # never answered: the listing hangs until roster gives up on it
        elif method == "tools/list":
            write({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools}})
        elif method == "tools/call" and message["params"].get("name") == "flood":
            seconds = message["params"].get("arguments", {}).get("seconds", 10)
            threading.Thread(
                target=flood, args=(seconds, args.report), daemon=True
            ).start()
            write(
                {
                    "jsonrpc": "2.0",
                    "id": mid,
                    "result": {"content": [{"type": "text", "text": "flooding"}]},
                }
            )
        elif method == "tools/call":
            text = message.get("params", {}).get("arguments", {}).get("text", "")
            write(
                {
                    "jsonrpc": "2.0",
                    "id": mid,
                    "result": {"content": [{"type": "text", "text": text}]},
                }
            )
        elif method == "ping" or method == "logging/setLevel":
            write({"jsonrpc": "2.0", "id": mid, "result": {}})
        elif mid is not None:
            write(
                {
                    "jsonrpc": "2.0",
                    "id": mid,
                    "error": {"code": -32601, "message": f"no method {method}"},
                }
            )
    if args.ignore_eof:
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
