// Loads the official TypeScript SDK (`@modelcontextprotocol/sdk`) from an npm folder given at
// run time (tests/npm or bench/peers), so these scripts need no node_modules of their own.
// The SDK's CommonJS build is loaded: `createRequire` resolves from any folder, where a bare ESM
// import resolves only from the script's own location.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

export function loadSdk(npmDir) {
  if (!npmDir) {
    throw new Error(
      "no npm folder given: pass --npm-dir DIR or set ROSTER_TEST_NPM_DIR (scripts/test installs tests/npm)",
    );
  }
  const require = createRequire(path.join(path.resolve(npmDir), "package.json"));
  const load = (sub) => {
    try {
      return require(`@modelcontextprotocol/sdk/${sub}`);
    } catch (e) {
      throw new Error(
        `@modelcontextprotocol/sdk is not installed in ${npmDir} (run \`npm ci\` there): ${e.message}`,
      );
    }
  };
  const sdk = {
    Client: load("client/index.js").Client,
    StreamableHTTPClientTransport: load("client/streamableHttp.js").StreamableHTTPClientTransport,
    SSEClientTransport: load("client/sse.js").SSEClientTransport,
    StdioClientTransport: load("client/stdio.js").StdioClientTransport,
    getDefaultEnvironment: load("client/stdio.js").getDefaultEnvironment,
  };
  // The package's exports hide its package.json; it sits above the resolved entry's dist/.
  const entry = require.resolve("@modelcontextprotocol/sdk/client/index.js");
  const manifest = path.join(entry.slice(0, entry.lastIndexOf(`${path.sep}dist${path.sep}`)), "package.json");
  sdk.version = JSON.parse(readFileSync(manifest, "utf8")).version;
  return sdk;
}

// --url URL (streamable HTTP), --sse URL (legacy HTTP+SSE) or --stdio CMD ARGS... (the rest of
// the command line) → a transport of the SDK.
export function transportFor(sdk, opts) {
  if (opts.url) return new sdk.StreamableHTTPClientTransport(new URL(opts.url));
  if (opts.sse) return new sdk.SSEClientTransport(new URL(opts.sse));
  if (opts.stdio && opts.stdio.length > 0) {
    const [command, ...args] = opts.stdio;
    return new sdk.StdioClientTransport({ command, args, stderr: "ignore" });
  }
  throw new Error("give --url URL, --sse URL or --stdio CMD [ARGS...]");
}

// Parses `--key value` pairs; `--stdio` takes every word after it.
export function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) throw new Error(`unexpected argument ${JSON.stringify(a)}`);
    const key = a.slice(2).replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (key === "stdio") {
      opts.stdio = argv.slice(i + 1);
      break;
    }
    if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
    opts[key] = argv[++i];
  }
  return opts;
}
