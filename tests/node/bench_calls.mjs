// The official TypeScript SDK client in bench/run: one session, WARMUP untimed then CALLS timed
// sequential `tools/call` of the echo tool, on one keep-alive connection (the SDK's fetch).
// Prints one JSON object in the shape `loadgen calls` prints, with the raw latencies
// (`latencies_ns`); bench-report computes the percentiles, so every client is summarised alike.
//
//   node bench_calls.mjs --npm-dir DIR [--label L] [--out FILE] [--calls N] [--warmup N]
//                        [--time-limit S] (--url URL | --sse URL | --stdio CMD ARGS...)

import { writeFileSync } from "node:fs";

import { loadSdk, parseArgs, transportFor } from "./sdk.mjs";

const opts = parseArgs(process.argv.slice(2));
const calls = Number(opts.calls ?? 1000);
const warmup = Number(opts.warmup ?? 50);
const timeLimitMs = Number(opts.timeLimit ?? 30) * 1000;

// The echo tool under its exposed name (`echo` direct, `SERVER__echo` behind a gateway) and the
// name of its one argument (`text` for the bench's echo server, `message` for server-everything).
function resolveEcho(tools) {
  const found = tools.find((t) => t.name === "echo") ?? tools.find((t) => t.name.endsWith("__echo"));
  if (!found) throw new Error(`no echo tool among ${JSON.stringify(tools.map((t) => t.name))}`);
  return { name: found.name, arg: found.inputSchema?.required?.[0] ?? "text" };
}

async function main() {
  const sdk = loadSdk(opts.npmDir ?? process.env.ROSTER_TEST_NPM_DIR);
  const transport = transportFor(sdk, opts);
  const client = new sdk.Client({ name: "roster-bench-ts", version: "1" });
  await client.connect(transport);
  const report = {
    kind: "calls",
    label: opts.label ?? "target",
    client: `typescript-sdk ${sdk.version}`,
    protocol_version: transport.protocolVersion ?? null,
    transport: opts.stdio ? "stdio" : opts.sse ? "sse" : "http",
    sessions: 1,
    calls_per_session: calls,
    ok: 0,
    errors: 0,
    first_error: null,
    timed_out: false,
  };
  try {
    const tool = resolveEcho((await client.listTools()).tools);
    report.tool = tool.name;
    const request = { name: tool.name, arguments: { [tool.arg]: "hello from session 0" } };
    for (let i = 0; i < warmup; i++) await client.callTool(request);
    const latencies = [];
    const started = process.hrtime.bigint();
    const deadline = started + BigInt(timeLimitMs) * 1_000_000n;
    for (let i = 0; i < calls; i++) {
      const t0 = process.hrtime.bigint();
      if (t0 >= deadline) {
        report.timed_out = true;
        break;
      }
      try {
        const result = await client.callTool(request);
        const took = process.hrtime.bigint() - t0;
        if (result.isError) {
          report.errors += 1;
          report.first_error ??= `tool error: ${JSON.stringify(result.content)}`;
        } else {
          latencies.push(Number(took));
        }
      } catch (e) {
        report.errors += 1;
        report.first_error ??= String(e?.message ?? e);
      }
    }
    const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
    report.ok = latencies.length;
    report.elapsed_s = elapsed;
    report.calls_per_s = elapsed > 0 ? latencies.length / elapsed : 0;
    report.latencies_ns = latencies;
  } finally {
    await client.close().catch(() => {});
  }
  return report;
}

try {
  const report = await main();
  const text = JSON.stringify(report);
  if (opts.out) writeFileSync(opts.out, `${text}\n`);
  // Exit only once stdout is flushed: a pipe takes writes asynchronously.
  process.stdout.write(`${text}\n`, () => process.exit(0));
} catch (e) {
  process.stderr.write(`bench_calls.mjs: ${e?.stack ?? e}\n`);
  process.exit(1);
}
