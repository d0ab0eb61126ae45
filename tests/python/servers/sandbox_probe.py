"""An MCP server (stdio) that tries what a sandbox should refuse, and says what happened: each
tool answers `ok: ...` when the attempt worked and `refused: <error>` when it did not. Run
sandboxed and not (the control) by crates/roster/tests/sandbox.rs.

Tools: read_file(path), write_file(path), connect(host, port), connect_unix(path) (a UNIX
socket, as a local daemon's), getenv(name), spawn(count)
(starts `count` sleeping child processes at once), allocate(mib) (allocates and touches that
much memory), signal_parent() (sends signal 0 to its parent process).

Usage: sandbox_probe.py
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("sandbox-probe")


def attempt(action) -> str:
    try:
        return f"ok: {action()}"
    except BaseException as error:  # MemoryError and OSError alike: the answer says which
        return f"refused: {type(error).__name__}: {error}"


@mcp.tool()
def read_file(path: str) -> str:
    """Reads the first bytes of a file."""
    return attempt(lambda: open(path, "rb").read(64).decode("utf-8", "replace"))


@mcp.tool()
def write_file(path: str) -> str:
    """Writes a file."""

    def write() -> str:
        with open(path, "w") as file:
            file.write("written by the sandbox probe\n")
        return path

    return attempt(write)


@mcp.tool()
def connect(host: str, port: int) -> str:
    """Opens a TCP connection."""

    def dial() -> str:
        with socket.create_connection((host, port), timeout=5):
            return f"{host}:{port}"

    return attempt(dial)


@mcp.tool()
def connect_unix(path: str) -> str:
    """Connects to a UNIX socket."""

    def dial() -> str:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(path)
            return path

    return attempt(dial)


@mcp.tool()
def getenv(name: str) -> str:
    """Reads an environment variable."""

    def read() -> str:
        value = os.environ.get(name)
        if value is None:
            raise KeyError(f"{name} is not set")
        return value

    return attempt(read)


@mcp.tool()
def spawn(count: int) -> str:
    """Starts `count` child processes at once (each sleeps), then ends them."""

    def start() -> str:
        children = []
        try:
            for _ in range(count):
                children.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]))
            return f"{len(children)} processes"
        finally:
            for child in children:
                child.kill()
                child.wait()

    return attempt(start)


@mcp.tool()
def allocate(mib: int) -> str:
    """Allocates and touches `mib` MiB."""

    def grab() -> str:
        block = bytearray(mib * 1024 * 1024)
        block[:: 4096] = b"x" * len(block[:: 4096])
        return f"{len(block) // (1024 * 1024)} MiB"

    return attempt(grab)


@mcp.tool()
def signal_parent() -> str:
    """Sends signal 0 (a check, nothing delivered) to its parent process: roster."""
    return attempt(lambda: os.kill(os.getppid(), 0) or f"pid {os.getppid()}")


if __name__ == "__main__":
    mcp.run("stdio")
