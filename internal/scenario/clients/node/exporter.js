// An event exporter on a piscina worker pool, as a plugin server runs one.
//
// usage: node exporter.js DSN MODE
//   MODE broken: each task opens a transaction, fires its INSERT without
//     awaiting it, then blocks its worker's event loop with CPU work before
//     it commits. The request has a 1 s client-side timeout and is retried
//     when it runs out, although the database did the work: every retry
//     exports the event again.
//   MODE fixed: each task awaits an idempotent INSERT (ON CONFLICT DO
//     NOTHING) in autocommit, then does its CPU work outside any
//     transaction.
// Runs until it is killed; the caller counts the rows at the destination.
'use strict';
const path = require('path');
const Piscina = require('piscina');

const [dsn, mode] = process.argv.slice(2);
const pool = new Piscina({ filename: path.join(__dirname, 'export_task.js'), minThreads: 2, maxThreads: 2 });

async function main() {
  let event = 0;
  for (;;) {
    await Promise.all([pool.run({ dsn, mode, event: event++ }), pool.run({ dsn, mode, event: event++ })]);
  }
}

main().catch((err) => {
  console.error(String(err && err.stack || err));
  process.exit(1);
});
