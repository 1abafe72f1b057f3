#!/usr/bin/env bash
# Puts the data sets of data/sets (plain, or NAME.xz) into DEST (default
# build/datasets), each checked against data/sets/SHA256SUMS, and prints DEST.
# Tests and benchmarks read their data there (FSGD_DATA overrides), so a
# clone needs nothing beside it. Cheap when DEST is current: a stamp holding
# the SHA256SUMS it was checked against.
#   scripts/unpack-data.sh [DEST]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/data/sets
dest=${1:-$root/build/datasets}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
stamp=$dest/.sha256sums
part=
trap 'rm -f "$part"' EXIT

current() {
    cmp -s "$src/SHA256SUMS" "$stamp" || return 1
    local sum name
    while read -r sum name; do [ -f "$dest/$name" ] || return 1; done <"$src/SHA256SUMS"
}

if ! current; then
    rm -f "$stamp"
    while read -r sum name; do
        # Written under a temporary name and renamed once checked, so a
        # concurrent reader never sees a partial or wrong file.
        part=$(mktemp "$dest/.$name.XXXXXX")
        if [ -f "$src/$name" ]; then
            cp "$src/$name" "$part"
        elif [ -f "$src/$name.xz" ]; then
            command -v xz >/dev/null || { rm -f "$part"; echo "unpack-data: xz is not installed (apt-get install xz-utils)" >&2; exit 1; }
            xz -dc "$src/$name.xz" >"$part"
        else
            rm -f "$part"; echo "unpack-data: $src/$name(.xz) missing" >&2; exit 1
        fi
        got=$(sha256sum "$part" | cut -d' ' -f1)
        if [ "$got" != "$sum" ]; then
            rm -f "$part"
            echo "unpack-data: $name: sha256 $got, expected $sum (data/sets/SHA256SUMS)" >&2
            exit 1
        fi
        chmod 644 "$part"
        mv -f "$part" "$dest/$name"
    done <"$src/SHA256SUMS"
    cat "$src/SHA256SUMS" >"$stamp.tmp.$$" && mv -f "$stamp.tmp.$$" "$stamp"
fi
echo "$dest"
