#!/usr/bin/env bash
# vendor.sh checks the vendored files listed in VENDORED: each has its
# pinned SHA-256, and is byte for byte the file of that package version on
# the npm registry (npm pack, into a temporary folder).
#
#   internal/web/vendor.sh           check both
#   internal/web/vendor.sh --local   only the checksums (no network)
set -euo pipefail
cd "$(dirname "$0")"
local_only=${1:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
while IFS=$'\t' read -r name version file sum here; do
	[[ -z $name || $name == \#* ]] && continue
	got=$(sha256sum "$here" | cut -d' ' -f1)
	if [[ $got != "$sum" ]]; then
		echo "vendor: $here has SHA-256 $got, pinned $sum ($name $version)" >&2
		status=1
		continue
	fi
	if [[ $local_only != --local ]]; then
		(cd "$tmp" && npm pack --silent "$name@$version" >/dev/null && tar xzf "$name-$version.tgz" "package/$file")
		if ! cmp -s "$here" "$tmp/package/$file"; then
			echo "vendor: $here differs from $file in $name@$version on the registry" >&2
			status=1
			continue
		fi
		rm -rf "$tmp/package"
	fi
	echo "vendor: $here is $name $version ($file), SHA-256 $sum"
done <VENDORED
exit $status
