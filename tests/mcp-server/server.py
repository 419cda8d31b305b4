"""A small MCP server for hermesd's end-to-end tests, built on the protocol project's own
Python SDK (`mcp` on PyPI), so the client is tested against a real implementation.

    python server.py stdio            # JSON-RPC on stdin/stdout
    python server.py http             # Streamable HTTP on 127.0.0.1, a port the OS picks;
                                      # prints "listening http://127.0.0.1:PORT/mcp"
    python server.py sse              # the legacy HTTP+SSE transport, the same way;
                                      # prints "listening http://127.0.0.1:PORT/sse"

Tools:
    echo(text)         -> "echo:<text>"
    add(a, b)          -> a + b
    (with MCP_TEST_TOKEN set, the server prints it on stderr at start, as a careless one would)
    env_names()        -> the names of the server's environment variables, comma separated
    pid()              -> the server's process id
    hang(marker)       -> writes the pid to the file `marker`, then waits until cancelled;
                          on cancellation writes "cancelled" to `marker + ".cancelled"`
    picture()          -> a 1x1 PNG image
    grow()             -> adds the tool `extra` and announces the changed tool list
    ask_model(question, hint="")
                       -> asks the client's model (sampling/createMessage, maxTokens 100000,
                          system prompt "Answer briefly.") and returns "<model>|<text>",
                          or "sampling failed: <error>"
Resource memo://greeting (text) and prompt review(topic).
"""

import asyncio
import base64
import os
import socket
import sys
import warnings

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Image

server = MCPServer("hermesd-test")

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@server.tool()
def echo(text: str) -> str:
    """Returns the text it was given, prefixed with 'echo:'."""
    return f"echo:{text}"


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
def env_names() -> str:
    """Names of the environment variables this server process sees."""
    return ",".join(sorted(os.environ))


@server.tool()
def pid() -> str:
    """This server's process id."""
    return str(os.getpid())


@server.tool()
async def hang(marker: str) -> str:
    """Writes the process id to `marker`, then never answers (until cancelled)."""
    with open(marker, "w") as f:
        f.write(str(os.getpid()))
    try:
        await asyncio.Event().wait()
    except BaseException:
        with open(marker + ".cancelled", "w") as f:
            f.write("cancelled")
        raise
    return "unreachable"


@server.tool()
def picture() -> Image:
    """A one-pixel PNG."""
    return Image(data=PNG, format="png")


@server.resource("memo://greeting")
def greeting() -> str:
    """A short text resource."""
    return "hello from a resource"


@server.prompt()
def review(topic: str) -> str:
    """A one-line review request."""
    return f"Please review {topic}."


def extra() -> str:
    """A tool that exists only after grow() ran."""
    return "extra!"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool 'extra' and tells the client its tool list changed."""
    server.add_tool(extra)
    # Subscribers (protocol 2026-07-28, `subscriptions/listen`) hear it from the bus; a
    # session on an earlier version gets the unsolicited notification.
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool()
async def ask_model(ctx: Context, question: str, hint: str = "") -> str:
    """Asks the client's model the question (sampling) and returns its answer."""
    from mcp import types

    preferences = types.ModelPreferences(hints=[types.ModelHint(name=hint)]) if hint else None
    try:
        with warnings.catch_warnings():
            # Sampling is deprecated in the newest protocol revision; clients still serve it.
            warnings.simplefilter("ignore")
            result = await ctx.session.create_message(
                messages=[
                    types.SamplingMessage(
                        role="user", content=types.TextContent(type="text", text=question)
                    )
                ],
                max_tokens=100000,
                system_prompt="Answer briefly.",
                model_preferences=preferences,
            )
    except Exception as error:  # the client's refusal comes back as an MCP error
        return f"sampling failed: {error}"
    return f"{result.model}|{result.content.text}"


async def serve_http(mode: str) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    if mode == "sse":
        app, path = server.sse_app(), "/sse"
    else:
        app, path = server.streamable_http_app(), "/mcp"
    config = uvicorn.Config(app, log_level="warning")
    print(f"listening http://127.0.0.1:{port}{path}", flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    # A careless server that prints its credential: the client must keep it out of its logs.
    if os.environ.get("MCP_TEST_TOKEN"):
        print(f"starting with token {os.environ['MCP_TEST_TOKEN']}", file=sys.stderr, flush=True)
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode in ("http", "sse"):
        asyncio.run(serve_http(mode))
    else:
        server.run("stdio")
