#!/bin/sh
# Vendors d3-flame-graph and the d3 modules it needs, from the npm
# registry, into internal/report/assets/flamegraph/: the HTML report
# embeds them inline, so a page with a flame graph still opens offline,
# from one file. Run it to update the versions below; commit the result.
set -eu
FLAMEGRAPH=5.0.0
dir=$(cd "$(dirname "$0")/.." && pwd)/internal/report/assets/flamegraph
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm init -y >/dev/null
npm install --no-audit --no-fund --ignore-scripts "d3-flame-graph@$FLAMEGRAPH" >/dev/null
mkdir -p "$dir"
# The d3 modules d3-flame-graph imports, and theirs, in dependency
# order: each UMD build adds itself to the global d3.
mods="d3-array d3-color d3-dispatch d3-ease d3-format d3-hierarchy d3-interpolate d3-time d3-time-format d3-scale d3-selection d3-timer d3-transition"
{
	for m in $mods; do
		v=$(node -p "require('./node_modules/$m/package.json').version")
		printf '// %s %s (%s), https://github.com/d3/%s\n' "$m" "$v" "$(node -p "require('./node_modules/$m/package.json').license")" "$m"
		cat "node_modules/$m/dist/$m.min.js"
		printf '\n'
	done
} >"$dir/d3.min.js"
{
	printf '// d3-flame-graph %s (Apache-2.0), https://github.com/spiermar/d3-flame-graph\n' "$FLAMEGRAPH"
	cat node_modules/d3-flame-graph/dist/d3-flamegraph.umd.min.js
	printf '\n'
} >"$dir/d3-flamegraph.min.js"
{
	printf 'Third-party code in d3.min.js and d3-flamegraph.min.js, from the npm\n'
	printf 'registry (scripts/vendor-flamegraph.sh), with their licences.\n'
	for m in d3-flame-graph $mods; do
		v=$(node -p "require('./node_modules/$m/package.json').version")
		printf '\n==== %s %s ====\n\n' "$m" "$v"
		cat "node_modules/$m/LICENSE"
	done
} >"$dir/LICENSES"
ls -l "$dir"
