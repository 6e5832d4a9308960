#!/usr/bin/env python3
"""Writes large EXPLAIN (ANALYZE, BUFFERS) plans in TEXT and JSON format,
in the layout PostgreSQL 15 prints, for bench/plans/run.sh.

usage: gen.py DIR

  wide: an Append over 2,000 partition scans (2,001 nodes), each scan
        filtering a column, as a query over a partitioned table shows;
  deep: 400 nested hash joins, each over a hash of a scan (1,201 nodes,
        401 levels), the shape of a long chain of joins;
  small: a hash join of two scans under a sort (5 nodes), the size of
        most plans people paste.
"""
import json
import sys


def scan(i):
    return {"Node Type": "Seq Scan", "Relation Name": "events_p%d" % i, "Alias": "events_%d" % (i + 1),
            "Startup Cost": 0.0, "Total Cost": 45.0, "Plan Rows": 1, "Plan Width": 8,
            "Actual Startup Time": 0.1, "Actual Total Time": 0.45, "Actual Rows": 1, "Actual Loops": 1,
            "Filter": "(user_id = 42)", "Rows Removed by Filter": 1999, "Shared Hit Blocks": 10, "Shared Read Blocks": 0}


def wide():
    kids = [dict(scan(i), **{"Parent Relationship": "Member"}) for i in range(2000)]
    return {"Node Type": "Append", "Startup Cost": 0.0, "Total Cost": 90000.0, "Plan Rows": 2000, "Plan Width": 8,
            "Actual Startup Time": 0.01, "Actual Total Time": 905.0, "Actual Rows": 2000, "Actual Loops": 1,
            "Shared Hit Blocks": 20000, "Shared Read Blocks": 0, "Plans": kids}


def deep(levels):
    node = dict(scan(levels), **{"Relation Name": "t%d" % levels, "Alias": "t%d" % levels})
    node.pop("Filter"), node.pop("Rows Removed by Filter")
    for i in range(levels - 1, -1, -1):
        s = dict(scan(i), **{"Relation Name": "t%d" % i, "Alias": "t%d" % i, "Parent Relationship": "Outer"})
        s.pop("Filter"), s.pop("Rows Removed by Filter")
        h = {"Node Type": "Hash", "Parent Relationship": "Inner", "Startup Cost": 45.0, "Total Cost": 45.0,
             "Plan Rows": 1, "Plan Width": 8, "Actual Startup Time": 0.5, "Actual Total Time": 0.5, "Actual Rows": 1,
             "Actual Loops": 1, "Hash Buckets": 1024, "Original Hash Buckets": 1024, "Hash Batches": 1,
             "Original Hash Batches": 1, "Peak Memory Usage": 9, "Shared Hit Blocks": 10, "Shared Read Blocks": 0, "Plans": [s]}
        node["Parent Relationship"] = "Outer"
        t = node["Actual Total Time"] + 0.7
        node = {"Node Type": "Hash Join", "Join Type": "Inner", "Startup Cost": 50.0, "Total Cost": node["Total Cost"] + 50,
                "Plan Rows": 1, "Plan Width": 8, "Actual Startup Time": 0.6, "Actual Total Time": round(t, 3), "Actual Rows": 1,
                "Actual Loops": 1, "Hash Cond": "(t%d.id = t%d.id)" % (i + 1, i),
                "Shared Hit Blocks": node["Shared Hit Blocks"] + 10, "Shared Read Blocks": 0, "Plans": [node, h]}
    node.pop("Parent Relationship", None)
    return node


def text(node, out, col=0):
    """One node in EXPLAIN's TEXT layout: the root at column 0 with its
    details at 2; a child's header at its parent's detail column behind an
    arrow, its details 6 further in."""
    pad = " " * col
    head = node["Node Type"]
    if head == "Seq Scan":
        head += " on %s %s" % (node["Relation Name"], node["Alias"])
    elif head == "Hash Join" and node.get("Join Type", "Inner") != "Inner":
        head = "Hash %s Join" % node["Join Type"]
    line = "%s  (cost=%.2f..%.2f rows=%d width=%d) (actual time=%.3f..%.3f rows=%d loops=%d)" % (
        head, node["Startup Cost"], node["Total Cost"], node["Plan Rows"], node["Plan Width"],
        node["Actual Startup Time"], node["Actual Total Time"], node["Actual Rows"], node["Actual Loops"])
    detail = col + 2 if col == 0 else col + 6
    out.append(pad + ("->  " if col else "") + line)
    d = " " * detail
    if "Hash Cond" in node:
        out.append(d + "Hash Cond: " + node["Hash Cond"])
    if "Filter" in node:
        out.append(d + "Filter: " + node["Filter"])
        out.append(d + "Rows Removed by Filter: %d" % node["Rows Removed by Filter"])
    if node["Node Type"] == "Hash":
        out.append(d + "Buckets: 1024  Batches: 1  Memory Usage: 9kB")
    if node["Node Type"] == "Sort":
        out.append(d + "Sort Key: " + ", ".join(node["Sort Key"]))
        out.append(d + "Sort Method: quicksort  Memory: 25kB")
    out.append(d + "Buffers: shared hit=%d" % node["Shared Hit Blocks"])
    for c in node.get("Plans", []):
        text(c, out, detail)


def small():
    join = deep(1)
    join["Parent Relationship"] = "Outer"
    return {"Node Type": "Sort", "Startup Cost": 95.0, "Total Cost": 95.1, "Plan Rows": 1,
            "Plan Width": 8, "Actual Startup Time": 1.4, "Actual Total Time": 1.4, "Actual Rows": 1, "Actual Loops": 1,
            "Sort Key": ["t0.id"], "Sort Method": "quicksort", "Sort Space Used": 25, "Sort Space Type": "Memory",
            "Shared Hit Blocks": 20, "Shared Read Blocks": 0, "Plans": [join]}


def main():
    d = sys.argv[1]
    sys.setrecursionlimit(10000)
    for name, root in (("small", small()), ("wide", wide()), ("deep", deep(400))):
        lines = []
        text(root, lines)
        lines += ["Planning:", "  Buffers: shared hit=120", "Planning Time: 30.000 ms", "Execution Time: %.3f ms" % (root["Actual Total Time"] + 1)]
        with open("%s/%s.txt" % (d, name), "w") as f:
            f.write("\n".join(lines) + "\n")
        doc = [{"Plan": root, "Planning": {"Shared Hit Blocks": 120}, "Planning Time": 30.0,
                "Triggers": [], "Execution Time": root["Actual Total Time"] + 1}]
        with open("%s/%s.json" % (d, name), "w") as f:
            json.dump(doc, f, indent=2)


main()
