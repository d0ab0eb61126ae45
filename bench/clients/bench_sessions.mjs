// The official TypeScript SDK client with several sessions at once, for bench/replicas (the
// 1-session driver of bench/run is tests/node/bench_calls.mjs, whose loader this reuses).
//
//   calls: SESSIONS clients (one Client, one transport, one Mcp-Session-Id each) in one process,
//          each WARMUP untimed then CALLS timed sequential `tools/call` of TOOL with ARGS, all
//          started together; the shape `loadgen calls --sessions N` has.
//   churn: SESSIONS workers, each CALLS times: connect a new Client (initialize), one `echo`
//          call, end the session (DELETE) and close; latency is the whole turn, the shape of
//          `loadgen churn`.
//
// Prints one JSON object in loadgen's shape with the raw latencies (`latencies_ns`).
//
//   node bench_sessions.mjs --npm-dir DIR --url URL [--mode calls|churn] [--sessions N]
//        [--calls N] [--warmup N] [--time-limit S] [--tool NAME] [--args JSON] [--label L]
//        [--out FILE]

import { writeFileSync } from "node:fs";

import { loadSdk, parseArgs } from "../../tests/node/sdk.mjs";

const opts = parseArgs(process.argv.slice(2));
const mode = opts.mode ?? "calls";
const sessions = Number(opts.sessions ?? 16);
const calls = Number(opts.calls ?? 1000);
const warmup = Number(opts.warmup ?? 20);
const timeLimitMs = Number(opts.timeLimit ?? 30) * 1000;
const wanted = opts.tool ?? "echo";
const fixedArgs = opts.args === undefined ? null : JSON.parse(opts.args);

// The tool under its exposed name: `NAME` itself, else the shortest ending in a separator and
// NAME (`echo__storm`), as loadgen's resolve_tool finds it.
function resolve(tools, name) {
  if (tools.some((t) => t.name === name)) return name;
  const found = tools
    .map((t) => t.name)
    .filter((n) => n.endsWith(name) && "_.-/".includes(n.at(-name.length - 1) ?? ""))
    .sort((a, b) => a.length - b.length)[0];
  if (!found) throw new Error(`no tool ${name} among ${JSON.stringify(tools.map((t) => t.name))}`);
  return found;
}

async function connect(sdk) {
  const transport = new sdk.StreamableHTTPClientTransport(new URL(opts.url));
  const client = new sdk.Client({ name: "roster-bench-ts-sessions", version: "1" });
  await client.connect(transport);
  return { client, transport };
}

async function end({ client, transport }) {
  await transport.terminateSession().catch(() => {});
  await client.close().catch(() => {});
}

function failed(report, e) {
  report.errors += 1;
  report.first_error ??= String(e?.message ?? e);
}

async function main() {
  if (!opts.url) throw new Error("give --url URL (streamable HTTP)");
  const sdk = loadSdk(opts.npmDir ?? process.env.ROSTER_TEST_NPM_DIR);
  const report = {
    kind: mode,
    label: opts.label ?? "target",
    client: `typescript-sdk ${sdk.version}`,
    protocol_version: null,
    transport: "http",
    sessions,
    calls_per_session: calls,
    ok: 0,
    errors: 0,
    first_error: null,
    timed_out: false,
  };
  const first = await connect(sdk);
  report.protocol_version = first.transport.protocolVersion ?? null;
  const tool = resolve((await first.client.listTools()).tools, mode === "churn" ? "echo" : wanted);
  report.tool = tool;
  const argsFor = (i) => fixedArgs ?? { text: `hello from session ${i}` };
  const latencies = [];
  let deadline = 0n;
  let started = 0n;
  const timed = async (turn) => {
    const t0 = process.hrtime.bigint();
    if (t0 >= deadline) {
      report.timed_out = true;
      return false;
    }
    try {
      await turn();
      latencies.push(Number(process.hrtime.bigint() - t0));
    } catch (e) {
      failed(report, e);
    }
    return true;
  };
  let workers;
  if (mode === "calls") {
    const clients = [first];
    while (clients.length < sessions) clients.push(await connect(sdk));
    const call = async (c, i) => {
      const result = await c.client.callTool({ name: tool, arguments: argsFor(i) });
      if (result.isError) throw new Error(`tool error: ${JSON.stringify(result.content)}`);
    };
    await Promise.all(clients.map(async (c, i) => {
      for (let k = 0; k < warmup; k++) await call(c, i).catch(() => {});
    }));
    started = process.hrtime.bigint();
    deadline = started + BigInt(timeLimitMs) * 1_000_000n;
    workers = clients.map(async (c, i) => {
      for (let k = 0; k < calls; k++) if (!(await timed(() => call(c, i)))) break;
    });
    await Promise.all(workers);
    report.elapsed_s = Number(process.hrtime.bigint() - started) / 1e9;
    await Promise.all(clients.map(end));
  } else if (mode === "churn") {
    await end(first);
    const turn = async (i) => {
      const c = await connect(sdk);
      try {
        const result = await c.client.callTool({ name: tool, arguments: { text: `hello from worker ${i}` } });
        if (result.isError) throw new Error(`tool error: ${JSON.stringify(result.content)}`);
      } finally {
        await end(c);
      }
    };
    await Promise.all(Array.from({ length: sessions }, async (_, i) => {
      for (let k = 0; k < warmup; k++) await turn(i).catch(() => {});
    }));
    started = process.hrtime.bigint();
    deadline = started + BigInt(timeLimitMs) * 1_000_000n;
    workers = Array.from({ length: sessions }, async (_, i) => {
      for (let k = 0; k < calls; k++) if (!(await timed(() => turn(i)))) break;
    });
    await Promise.all(workers);
    report.elapsed_s = Number(process.hrtime.bigint() - started) / 1e9;
  } else {
    throw new Error(`--mode must be calls or churn, not ${mode}`);
  }
  report.ok = latencies.length;
  report.calls_per_s = report.elapsed_s > 0 ? latencies.length / report.elapsed_s : 0;
  report.latencies_ns = latencies;
  return report;
}

try {
  const report = await main();
  const text = JSON.stringify(report);
  if (opts.out) writeFileSync(opts.out, `${text}\n`);
  process.stdout.write(`${text}\n`, () => process.exit(0));
} catch (e) {
  process.stderr.write(`bench_sessions.mjs: ${e?.stack ?? e}\n`);
  process.exit(1);
}
