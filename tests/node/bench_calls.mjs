// The official TypeScript SDK client in bench/run: one session, WARMUP untimed then CALLS timed
// sequential `tools/call` of the echo tool, on one keep-alive connection (the SDK's fetch).
// Prints one JSON object in the shape `loadgen calls` prints, with the raw latencies
// (`latencies_ns`); bench-report computes the percentiles, so every client is summarised alike.
//
//   node bench_calls.mjs --npm-dir DIR [--label L] [--out FILE] [--calls N] [--warmup N]
//                        [--time-limit S] [--total-limit S]
//                        (--url URL | --sse URL | --stdio CMD ARGS...)
//
// --time-limit bounds the timed calls; --total-limit, when given, bounds the whole run
// (connecting, the first listing, warm-up and calls): a step still unanswered then is an error,
// and the report is written with what was measured.

import { writeFileSync } from "node:fs";

import { loadSdk, parseArgs, transportFor } from "./sdk.mjs";

const opts = parseArgs(process.argv.slice(2));
const calls = Number(opts.calls ?? 1000);
const warmup = Number(opts.warmup ?? 50);
const timeLimitMs = Number(opts.timeLimit ?? 30) * 1000;
const hardAt = opts.totalLimit ? process.hrtime.bigint() + BigInt(Math.round(Number(opts.totalLimit) * 1e9)) : null;

// The echo tool under its exposed name (`echo` direct; behind a gateway, the shortest name that
// ends in a separator and `echo`: `SERVER__echo`, `SERVER/echo`, as loadgen resolves it) and the
// name of its one argument (`text` for the bench's echo server, `message` for server-everything).
function resolveEcho(tools) {
  const found =
    tools.find((t) => t.name === "echo") ??
    tools
      .filter((t) => /[_./-]echo$/.test(t.name))
      .sort((a, b) => a.name.length - b.name.length)[0];
  if (!found) throw new Error(`no echo tool among ${JSON.stringify(tools.map((t) => t.name))}`);
  return { name: found.name, arg: found.inputSchema?.required?.[0] ?? "text" };
}

class Unanswered extends Error {}

// `promise`, or an Unanswered error naming `what` once the total limit passes.
function bounded(promise, what) {
  if (hardAt === null) return promise;
  const left = Number(hardAt - process.hrtime.bigint()) / 1e6;
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Unanswered(`${what} unanswered at the total limit`)), Math.max(0, left));
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

const pastHard = () => hardAt !== null && process.hrtime.bigint() >= hardAt;

async function main() {
  const sdk = loadSdk(opts.npmDir ?? process.env.ROSTER_TEST_NPM_DIR);
  const transport = transportFor(sdk, opts);
  const client = new sdk.Client({ name: "roster-bench-ts", version: "1" });
  const report = {
    kind: "calls",
    label: opts.label ?? "target",
    client: `typescript-sdk ${sdk.version}`,
    protocol_version: null,
    transport: opts.stdio ? "stdio" : opts.sse ? "sse" : "http",
    sessions: 1,
    calls_per_session: calls,
    ok: 0,
    errors: 0,
    first_error: null,
    timed_out: false,
  };
  const latencies = [];
  let started = null;
  let ended = null;
  try {
    await bounded(client.connect(transport), "the connection");
    report.protocol_version = transport.protocolVersion ?? null;
    const listedFrom = process.hrtime.bigint();
    const tool = resolveEcho((await bounded(client.listTools(), "tools/list")).tools);
    report.list_ms = Number(process.hrtime.bigint() - listedFrom) / 1e6;
    report.tool = tool.name;
    const request = { name: tool.name, arguments: { [tool.arg]: "hello from session 0" } };
    let warmupMaxNs = 0n;
    for (let i = 0; i < warmup && !pastHard(); i++) {
      const t0 = process.hrtime.bigint();
      await bounded(client.callTool(request), "a warm-up call").catch((e) => {
        if (e instanceof Unanswered) throw e;
      });
      const took = process.hrtime.bigint() - t0;
      if (took > warmupMaxNs) warmupMaxNs = took;
    }
    if (warmup > 0) report.warmup_max_ms = Number(warmupMaxNs) / 1e6;
    started = process.hrtime.bigint();
    const deadline = started + BigInt(timeLimitMs) * 1_000_000n;
    for (let i = 0; i < calls; i++) {
      const t0 = process.hrtime.bigint();
      if (t0 >= deadline || pastHard()) {
        report.timed_out = true;
        break;
      }
      try {
        const result = await bounded(client.callTool(request), "a call");
        const took = process.hrtime.bigint() - t0;
        if (result.isError) {
          report.errors += 1;
          report.first_error ??= `tool error: ${JSON.stringify(result.content)}`;
        } else {
          latencies.push(Number(took));
        }
      } catch (e) {
        report.errors += 1;
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        report.first_error ??= `${String(e?.message ?? e)} (after ${ms.toFixed(0)} ms)`;
        if (e instanceof Unanswered) break;
      }
    }
    ended = process.hrtime.bigint();
  } catch (e) {
    // Only a step before the timed calls lands here: bounded by the total limit, it is
    // reported (a missing answer is a figure); anything else fails the run.
    if (!(e instanceof Unanswered)) throw e;
    report.errors += 1;
    report.first_error ??= e.message;
    report.timed_out = true;
  } finally {
    // A hung session may never close: the limit bounds this too.
    await bounded(client.close(), "close").catch(() => {});
  }
  const elapsed = started === null ? 0 : Number((ended ?? process.hrtime.bigint()) - started) / 1e9;
  report.ok = latencies.length;
  report.elapsed_s = elapsed;
  report.calls_per_s = elapsed > 0 ? latencies.length / elapsed : 0;
  report.latencies_ns = latencies;
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
