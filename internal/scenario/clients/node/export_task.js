// One export, run on a piscina worker thread with its own connection.
'use strict';
const { Client } = require('pg');

const CPU_MS = 1500; // the plugin's own work per event
const TIMEOUT_MS = 1000; // the caller's timeout for one request
const TRIES = 3;

let client;

function busy(ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) { /* the event loop is blocked */ }
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

module.exports = async function exportEvent({ dsn, mode, event }) {
  if (!client) {
    client = new Client({ connectionString: dsn });
    await client.connect();
  }
  if (mode === 'fixed') {
    await client.query('INSERT INTO exported_ok (event_id) VALUES ($1) ON CONFLICT (event_id) DO NOTHING', [event]);
    busy(CPU_MS);
    return;
  }
  for (let attempt = 1; attempt <= TRIES; attempt++) {
    const work = (async () => {
      await client.query('BEGIN');
      const insert = client.query('INSERT INTO exported (event_id) VALUES ($1)', [event]); // not awaited
      busy(CPU_MS);
      await insert;
      await client.query('COMMIT');
    })();
    const done = await Promise.race([work.then(() => true), sleep(TIMEOUT_MS).then(() => false)]);
    await work.catch(() => {}); // it did succeed; the caller does not know
    if (done) {
      return;
    }
  }
};
