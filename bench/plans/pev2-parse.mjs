// pev2-parse.mjs FILE...: parse each EXPLAIN plan with pev2's own plan
// service (the code its web page runs: fromSource, then createPlan) and
// print one line per file: the name, the milliseconds it took and the
// nodes it found. pev2 exports only its Vue component, so the service is
// reached by re-exporting it from a copy of the bundle; the class is
// found by its fields, not by its minified name.
import { readFileSync, writeFileSync, rmSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";

const here = dirname(fileURLToPath(import.meta.url));
const bundle = join(here, "node_modules/pev2/dist/pev2.es.js");
const src = readFileSync(bundle, "utf8");
// The service is the class with both createPlan and fromSource.
const m = [...src.matchAll(/^class (\w+) \{$/gm)].find((c) => {
  const body = src.slice(c.index, src.indexOf("\n}\n", c.index));
  return body.includes("\n  createPlan(") && body.includes("\n  fromSource(");
});
if (!m) {
  console.error("pev2-parse: the plan service class was not found in " + bundle + " (another pev2 version?)");
  process.exit(2);
}
const copy = join(here, "node_modules/pev2/dist/pev2-with-service.mjs");
writeFileSync(copy, src + `\nexport { ${m[1]} as PlanService };\n`);
let PlanService;
try {
  ({ PlanService } = await import(pathToFileURL(copy).href));
} finally {
  rmSync(copy, { force: true });
}

for (const file of process.argv.slice(2)) {
  const text = readFileSync(file, "utf8");
  const t0 = performance.now();
  const svc = new PlanService();
  const content = svc.fromSource(text);
  const plan = svc.createPlan("", content, content["Query Text"] || "");
  const ms = performance.now() - t0;
  let nodes = 0;
  const walk = (n) => { nodes++; for (const c of n.Plans || []) walk(c); };
  walk(plan.content.Plan);
  console.log(`${file}\t${ms.toFixed(1)}\t${nodes}`);
}
