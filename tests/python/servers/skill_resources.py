"""A server that serves a skill only as resources, without the skills extension: FastMCP
(Python SDK 1.x) with `skill://guide/SKILL.md` and a file beside it, and a tool that rewrites
the skill and says so (`notifications/resources/list_changed`).

Usage: skill_resources.py
"""

from __future__ import annotations

from mcp.server.fastmcp import Context, FastMCP

mcp = FastMCP("skill-resources")
state = {"description": "The first version."}


def skill_md() -> str:
    return f"---\nname: guide\ndescription: {state['description']}\n---\n\nSee notes.md.\n"


@mcp.resource("skill://guide/SKILL.md", mime_type="text/markdown")
def guide() -> str:
    return skill_md()


@mcp.resource("skill://guide/notes.md", mime_type="text/markdown")
def notes() -> str:
    return "# Notes\n\nWhat the guide leaves out.\n"


@mcp.resource("test://plain", mime_type="text/plain")
def plain() -> str:
    return "not a skill"


@mcp.tool()
async def rewrite_guide(description: str, ctx: Context) -> str:
    """Gives the guide skill a new description and tells the client its resources changed."""
    state["description"] = description
    await ctx.session.send_resource_list_changed()
    return "rewritten"


mcp.run()
