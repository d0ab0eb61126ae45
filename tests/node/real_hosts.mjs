// A host built on the official TypeScript SDK (`Client` + `StreamableHTTPClientTransport`, what
// most desktop hosts are built on) in front of roster, which fronts real servers from the
// registries given as a Claude Desktop config: the reference filesystem and memory servers,
// PyPI's mcp-server-time and the MCP Apps server `@modelcontextprotocol/server-system-monitor`.
//
// It lists the tools, calls one tool of each server, reads the app's `ui://` resource and
// makes the app's own call by the server's own tool name (`poll-system-stats`), as an MCP Apps
// host relays it from the app's iframe. It also starts each server of the config on its own and
// lists its tools (and reads the app's resource), so the test can check that roster lists every
// tool and passes `_meta` and the resource unchanged.
//
// Prints one JSON object of what it observed; the Rust test asserts on it.
//
//   node real_hosts.mjs --npm-dir DIR --url ROSTER_URL --config CLAUDE_JSON --file PATH

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

import { loadSdk, parseArgs } from "./sdk.mjs";

const opts = parseArgs(process.argv.slice(2));
const APP_URI = "ui://system-monitor/mcp-app.html";

// Resource contents with each text as its length and SHA-256: the app's HTML is large, and
// equal digests say the same as equal texts.
function digest(contents) {
  return contents.map(({ text, ...rest }) =>
    text === undefined
      ? rest
      : { ...rest, text_len: text.length, text_sha256: createHash("sha256").update(text).digest("hex") },
  );
}

// `{texts, isError, structured}` of a result, or `{code, message}` of a JSON-RPC error.
async function outcome(promise) {
  try {
    const r = await promise;
    return {
      texts: (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text),
      isError: r.isError === true,
      structured: r.structuredContent ?? null,
    };
  } catch (e) {
    return { code: e?.code ?? null, message: String(e?.message ?? e) };
  }
}

async function listAll(client) {
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}

async function main() {
  const sdk = loadSdk(opts.npmDir ?? process.env.ROSTER_TEST_NPM_DIR);
  const report = { sdk: sdk.version };

  // Each server on its own, started as the config says: the reference for what roster must
  // list (every tool, as `server__tool`) and pass through unchanged (`_meta`, the app's UI).
  const servers = JSON.parse(readFileSync(opts.config, "utf8")).mcpServers;
  report.own_tools = {};
  for (const [name, server] of Object.entries(servers)) {
    const own = new sdk.Client({ name: "roster-real-hosts-direct", version: "1" });
    await own.connect(
      new sdk.StdioClientTransport({
        command: server.command,
        args: server.args ?? [],
        env: { ...sdk.getDefaultEnvironment(), ...(server.env ?? {}) },
        stderr: "ignore",
      }),
    );
    try {
      report.own_tools[name] = (await listAll(own)).map((t) => ({ name: t.name, _meta: t._meta ?? null }));
      if (name === "system-monitor") {
        report.app_own_resource = digest((await own.readResource({ uri: APP_URI })).contents);
      }
    } finally {
      await own.close().catch(() => {});
    }
  }

  const client = new sdk.Client({ name: "roster-real-hosts", version: "1" });
  const transport = new sdk.StreamableHTTPClientTransport(new URL(opts.url));
  await client.connect(transport);
  try {
    report.protocol_version = transport.protocolVersion ?? null;
    // The servers start beside roster (Node and Python processes, slow on a busy machine): list
    // until each has tools there, bounded; a turn waits for them only up to `turn_wait`.
    const prefixes = Object.keys(servers).map((name) => `${name}__`);
    const deadline = Date.now() + 60_000;
    let tools = await listAll(client);
    report.list_attempts = 1;
    while (!prefixes.every((p) => tools.some((t) => t.name.startsWith(p))) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      tools = await listAll(client);
      report.list_attempts += 1;
    }
    report.tools = tools.map((t) => ({ name: t.name, _meta: t._meta ?? null }));
    report.calls = {
      filesystem: await outcome(
        client.callTool({ name: "filesystem__read_text_file", arguments: { path: opts.file } }),
      ),
      memory_create: await outcome(
        client.callTool({
          name: "memory__create_entities",
          arguments: {
            entities: [{ name: "roster", entityType: "gateway", observations: ["fronts real servers"] }],
          },
        }),
      ),
      memory_read: await outcome(client.callTool({ name: "memory__read_graph", arguments: {} })),
      time: await outcome(
        client.callTool({ name: "time__get_current_time", arguments: { timezone: "Etc/UTC" } }),
      ),
      app_tool: await outcome(client.callTool({ name: "system-monitor__get-system-info", arguments: {} })),
      // What the app in the iframe sends through the host: the server's own tool name.
      app_own_name: await outcome(client.callTool({ name: "poll-system-stats", arguments: {} })),
    };
    const resources = [];
    let cursor;
    do {
      const page = await client.listResources(cursor ? { cursor } : {});
      resources.push(...page.resources.map((r) => r.uri));
      cursor = page.nextCursor;
    } while (cursor);
    report.resources = resources;
    try {
      report.app_resource = digest((await client.readResource({ uri: APP_URI })).contents);
    } catch (e) {
      report.app_resource = { code: e?.code ?? null, message: String(e?.message ?? e) };
    }
  } finally {
    await client.close().catch(() => {});
  }
  return report;
}

// Exit only once stdout is flushed: a pipe takes writes asynchronously.
const finish = (report, code) => process.stdout.write(`${JSON.stringify(report)}\n`, () => process.exit(code));
try {
  finish(await main(), 0);
} catch (e) {
  finish({ error: String(e?.stack ?? e) }, 1);
}
