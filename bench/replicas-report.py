#!/usr/bin/env python3
"""bench/replicas-report.py — turns one run of bench/replicas (its bench/out/<stamp>-replicas/
folder) into REPLICAS.md. Every number in it comes from that folder; nothing is typed by hand.

  bench/replicas-report.py --dir bench/out/<stamp>-replicas --out REPLICAS.md
"""

import argparse
import glob
import json
import math
import os
import statistics

SETUPS = {
    "a": ("1 replica, no `[store]`, direct", "the baseline"),
    "b": ("1 replica, `[store]`, direct", "the store's added cost"),
    "c": ("1 replica, `[store]`, behind HAProxy", "+ the balancer's hop"),
    "d": ("2 replicas, `[store]`, behind HAProxy", "round-robin per request"),
    "e": ("3 replicas, `[store]`, behind HAProxy", "round-robin per request"),
    "f": ("1 replica, `[store]`, `synchronous_commit = off`, direct",
          "(b) without waiting for the WAL flush at commit"),
}
CLIENTS = {"loadgen": "loadgen (rmcp)", "ts": "TypeScript SDK"}


def p50_us(report):
    """Median latency in µs: loadgen's own percentile, or nearest rank over the SDK client's
    raw latencies (as bench/src/stats.rs computes it)."""
    if report.get("latency_us"):
        return report["latency_us"]["p50"]
    samples = sorted(report.get("latencies_ns") or [])
    if not samples:
        return None
    idx = min(max(math.ceil(0.5 * len(samples)), 1), len(samples)) - 1
    return samples[idx] / 1000.0


def load(folder):
    """{(setup, measure, client): [report per round]}"""
    runs = {}
    for path in sorted(glob.glob(os.path.join(folder, "*-*-*-*.json"))):
        name = os.path.basename(path)[: -len(".json")]
        if "." in name:
            continue
        parts = name.split("-")
        if len(parts) != 4 or not parts[0].isdigit():
            continue
        round_, setup, measure, client = parts
        with open(path) as f:
            report = json.load(f)
        report["_round"] = int(round_)
        report["_p50"] = p50_us(report)
        runs.setdefault((setup, measure, client), []).append(report)
    return runs


def store_work(folder):
    """{(setup, measure, client): [{"statements": [...], "audit": lines added} per round]}"""
    work = {}
    path = os.path.join(folder, "counts.jsonl")
    rows = [json.loads(line) for line in open(path) if line.strip()] if os.path.exists(path) else []
    last = {}
    for row in rows:
        round_, setup, measure, *client = row["name"].split("-")
        if measure != "up" and (round_, setup) in last:
            statements = None
            stmt_path = os.path.join(folder, f"{row['name']}.statements.json")
            if os.path.exists(stmt_path):
                text = open(stmt_path).read().strip()
                statements = json.loads(text) if text else []
            work.setdefault((setup, measure, client[0] if client else ""), []).append({
                "round": int(round_),
                "statements": statements,
                "audit": row["audit_lines"] - last[(round_, setup)],
            })
        last[(round_, setup)] = row["audit_lines"]
    return work


def fmt_rate(x):
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def fmt_us(x):
    return "–" if x is None else (f"{x:,.0f}" if x >= 100 else f"{x:,.1f}")


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def spread(values, fmt):
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return ""
    return f" ({fmt(min(values))}–{fmt(max(values))})"


def ratio(x, base):
    if x is None or not base:
        return "–"
    return f"{x / base:.2f}"


def table(runs, measure, setups, base_setup="a", what="calls/s"):
    lines = [
        f"| setup | client | {what} | × (a) | p50 µs | × (a) | ok | errors |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    missing = []
    for client, client_name in CLIENTS.items():
        base = runs.get((base_setup, measure, client), [])
        base_rate = median([r["calls_per_s"] for r in base])
        base_p50 = median([r["_p50"] for r in base])
        for setup in setups:
            reports = runs.get((setup, measure, client))
            if not reports:
                missing.append(f"{setup} / {client_name}")
                continue
            rate = median([r["calls_per_s"] for r in reports])
            p50 = median([r["_p50"] for r in reports])
            ok = sum(r["ok"] for r in reports)
            errors = sum(r["errors"] for r in reports)
            first = next((r["first_error"] for r in reports if r.get("first_error")), None)
            err = f"{errors}" + (f" ({first[:80]})" if first else "")
            lines.append(
                f"| ({setup}) {SETUPS[setup][0]} | {client_name} | "
                f"{fmt_rate(rate)}{spread([r['calls_per_s'] for r in reports], fmt_rate)} | "
                f"{ratio(rate, base_rate)} | {fmt_us(p50)}{spread([r['_p50'] for r in reports], fmt_us)} | "
                f"{ratio(p50, base_p50)} | {ok:,} | {err} |"
            )
    if missing:
        lines.append("")
        lines.append("Not measured: " + ", ".join(missing) + " (see skipped.tsv).")
    return "\n".join(lines)


def shorten(query, width=70):
    query = " ".join(query.split())
    return query if len(query) <= width else query[: width - 1] + "…"


def work_table(runs, work, measures, meta):
    """Per run (first round): the store's statements per call and their execution time."""
    sessions = int(meta["sessions"])
    lines = [
        "| figure | setup | client | calls made | store statements | per call | store time per call µs | most run (calls) | audit.jsonl lines |",
        "|---|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for measure in measures:
        for setup in SETUPS:
            for client, client_name in CLIENTS.items():
                done = work.get((setup, measure, client))
                reports = runs.get((setup, measure, client))
                if not done or not reports:
                    continue
                first = min(done, key=lambda d: d["round"])
                report = next((r for r in reports if r["_round"] == first["round"]), reports[0])
                # Timed calls plus the warm-up (churn: 2 turns a worker), which the counters saw.
                warm = sessions * (2 if measure == "churn" else int(meta["warmup"]))
                made = report["ok"] + report["errors"] + warm
                stmts = first["statements"]
                if stmts is None:
                    counted, per, time_per, top = "no store", "–", "–", "–"
                else:
                    total = sum(s["calls"] for s in stmts)
                    ms = sum(s["ms"] for s in stmts)
                    counted = f"{total:,}"
                    per = f"{total / made:.2f}" if made else "–"
                    time_per = f"{ms * 1000 / made:.1f}" if made else "–"
                    top = "; ".join(f"`{shorten(s['query'])}` ({s['calls']:,})" for s in stmts[:3]) or "none"
                lines.append(
                    f"| {measure} | ({setup}) | {client_name} | {made:,} | {counted} | {per} | "
                    f"{time_per} | {top} | {first['audit']:+,} |"
                )
    return "\n".join(lines)


def glance(runs, setups):
    cols = [("calls", "loadgen"), ("calls", "ts"), ("churn", "loadgen"), ("churn", "ts"),
            ("notify", "loadgen"), ("notify", "ts"), ("unread", "loadgen"), ("unread", "ts")]
    head = "| setup | " + " | ".join(f"{m} ({CLIENTS[c].split(' (')[0]})" for m, c in cols) + " |"
    lines = [head, "|---|" + "---:|" * len(cols)]
    for setup in setups:
        cells = []
        for measure, client in cols:
            base = median([r["calls_per_s"] for r in runs.get(("a", measure, client), [])])
            mine = runs.get((setup, measure, client))
            cells.append(ratio(median([r["calls_per_s"] for r in mine]), base) if mine else "")
        lines.append(f"| ({setup}) {SETUPS[setup][0]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    folder = args.dir
    meta = json.load(open(os.path.join(folder, "meta.json")))
    runs = load(folder)
    work = store_work(folder)
    setups = [s for s in meta["setups"].split() if s in SETUPS]
    skipped = []
    if os.path.exists(os.path.join(folder, "skipped.tsv")):
        skipped = [line.rstrip("\n").split("\t", 1) for line in open(os.path.join(folder, "skipped.tsv")) if line.strip()]
    protocols = sorted({r.get("protocol_version") for rs in runs.values() for r in rs if r.get("protocol_version")})
    rel = os.path.relpath(os.path.abspath(folder), os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(folder)))))
    n = meta["sessions"]
    out = []
    w = out.append
    w("# Replicas: tools/call with 1, 2 and 3 roster replicas behind one load balancer")
    w("")
    w(f"Issue 21 item 5. Generated by `bench/replicas` ({rel}/, raw JSON and logs) from that one run; "
      "every figure below is read from its files and every ratio is against setup (a) of the same "
      "run, with the same client. Nothing here is typed by hand.")
    w("")
    w(f"- {meta['date']}, {meta['nproc']} × {meta['cpu']}; command `{meta['command']}`; "
      f"{meta['wall_s']} s wall")
    w(f"- load average (1, 5, 15 min) {meta['load_start']} at the start, {meta['load_end']} at the end")
    w(f"- roster: {meta['roster']} ({meta['profile']} build, `{meta['roster_bin']}`)")
    w(f"- {meta['postgres']}, {meta['pg_durability']}; HAProxy {meta['haproxy']}; "
      f"node {meta['node'] or '–'}, @modelcontextprotocol/sdk {meta['ts_sdk'] or '–'}"
      + (f" (negotiated {', '.join(protocols)}: initialize-era sessions with Mcp-Session-Id)" if protocols else ""))
    w("- clients: `loadgen` (rmcp's client; `calls`, `churn`) and the official TypeScript SDK "
      "client (`bench/clients/bench_sessions.mjs`: one `Client` per session, all in one node "
      "process); both open initialize-era sessions (`initialize`, then `Mcp-Session-Id` on every "
      "request), the sessions `[store]` shares")
    w(f"- each run: {n} concurrent sessions, {meta['warmup']} untimed calls each, then as many calls as fit "
      f"in {meta['seconds']} s; {meta['rounds']} round(s) of every setup, interleaved "
      f"({' '.join(setups)}, then again). "
      "A figure is the median over rounds (with 2 rounds, their mean), the range over rounds in "
      "brackets.")
    w("")
    w("**Read this first: one machine cannot show scale-out.** Every replica, its echo server, "
      f"PostgreSQL, HAProxy and the client share the same {meta['nproc']} cores, so a second or third "
      "replica adds no capacity: they split the same CPU, and the balancer and the store add work. "
      "What (c)–(e) show is the overhead of balancing and of sharing state between replicas, not "
      "what replicas on their own machines would serve. The client runs on the same cores too, so a "
      "client that needs more CPU per call (the TypeScript SDK in one node process) shows a smaller "
      "difference between setups than loadgen does.")
    w("")
    w("## At a glance")
    w("")
    w("Throughput as a ratio to (a), same client, same run (medians over rounds; below 1 is slower).")
    w("")
    w(glance(runs, setups))
    w("")
    w("## Setups")
    w("")
    w("Each replica is `roster --config CONFIG serve --http 127.0.0.1:PORT` in front of its own "
      "`echo-server` over stdio (as in `bench/run`), with its own `state_dir`; with `[store]` all "
      "replicas share one throwaway PostgreSQL cluster (a fresh database per setup, password auth "
      "over TCP through `password_env`). HAProxy balances every HTTP request on its own, "
      "round-robin, with no stickiness, so consecutive requests of one session go to different "
      "replicas. `notification_rate`/`notification_burst` are raised so the inbox records every "
      "notification of the notify figure (the default keeps 100 a second).")
    w("")
    w("| setup | what | |")
    w("|---|---|---|")
    for s in setups:
        w(f"| ({s}) | {SETUPS[s][0]} | {SETUPS[s][1]} |")
    w("")
    w(f"## tools/call on open sessions ({n} sessions)")
    w("")
    w("`echo` calls on sessions opened before timing. With `[store]` a replica reads the store on "
      "this path only for a session it has not served yet (one query, then it holds it) and marks a "
      "session used now and then in the background; behind HAProxy every replica meets every "
      "session.")
    w("")
    w(table(runs, "calls", setups))
    w("")
    w(f"## A session's whole life ({n} workers)")
    w("")
    w("Each turn opens a session (`initialize`, `notifications/initialized`), makes one `echo` "
      "call and ends it (`DELETE`); the figure is sessions per second and a turn's p50. With "
      "`[store]` the session is written at `initialize`, claimed when answered, adopted by each "
      "other replica it reaches (one query) and deleted (with a `NOTIFY` to every replica) at "
      "`DELETE`.")
    w("")
    w(table(runs, "churn", setups, what="sessions/s"))
    w("")
    w(f"## The inbox paths ({n} sessions)")
    w("")
    w("- **notify**: the echo server has a tool that sends notifications during the call, "
      "`storm`; called with `{\"count\": 1}` it sends exactly one "
      "`notifications/tools/list_changed`, which roster records in the inbox (one `INSERT` into "
      "the shared log with `[store]`, an `audit.jsonl` line without) besides re-listing the "
      "server (debounced) as it does with or without the store.")
    w("- **unread**: roster's native `channels` tool with `{\"action\": \"unread\"}`: with "
      "`[store]` each read first catches up with the shared log (one query).")
    w("")
    w("Ratios against (a) of the same call: the store's added cost on that path.")
    w("")
    for measure in ("notify", "unread"):
        if any(k[1] == measure for k in runs):
            w(f"### {measure}")
            w("")
            planned = ("a", "b", "f") if measure == "notify" else ("a", "b")
            w(table(runs, measure, [s for s in setups if s in planned]))
            w("")
    w("## What the store ran")
    w("")
    w("Per run of the first round: the statements PostgreSQL executed for the database `roster` "
      "(`pg_stat_statements`, reset before each run), divided by the calls the run made (timed "
      "calls plus the warm-up, which the counters also saw; churn: sessions), with their summed "
      "execution time (inside PostgreSQL, without the network and the commit's WAL flush), the "
      "statements run most often, and the lines the run added to the replicas' `audit.jsonl`. "
      "This tells which paths touch the store and how often.")
    w("")
    w(work_table(runs, work, ["calls", "churn", "notify", "unread"], meta))
    w("")
    if skipped:
        w("## Not measured")
        w("")
        for what, why in skipped:
            w(f"- {what}: {why}")
        w("")
    with open(args.out, "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main()
