#!/usr/bin/env bash
# Vendors uPlot (MIT) for the HTML report: the report is one file that
# opens offline, so the chart library is inlined from the repository, not
# fetched. Run from the repository root; needs npm and network once.
set -euo pipefail
version=1.6.32
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
(cd "$dir" && npm pack "uplot@$version" >/dev/null && tar xzf "uplot-$version.tgz")
out=internal/report/assets/vendor/uplot
mkdir -p "$out"
cp "$dir/package/dist/uPlot.iife.min.js" "$dir/package/dist/uPlot.min.css" "$dir/package/LICENSE" "$out/"
echo "uPlot $version from npm (uplot@$version), MIT licence: see LICENSE" > "$out/VERSION"
