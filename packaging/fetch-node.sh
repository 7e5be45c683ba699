#!/usr/bin/env bash
# fetch-node.sh VERSION ARCH DEST: installs Node VERSION for ARCH (x64, arm64) from the npm
# registry package node-linux-ARCH into DEST (DEST/bin/node, DEST/include/node), after
# checking the tarball against the integrity pinned in packaging/node-runtime.lock.
set -euo pipefail
version=$1 arch=$2 dest=$3
here=$(cd "$(dirname "$0")" && pwd)
spec="node-linux-$arch@$version"
want=$(awk -v s="$spec" '$1 == s { print $2 }' "$here/node-runtime.lock")
if [ -z "$want" ]; then echo "fetch-node: $spec is not pinned in packaging/node-runtime.lock" >&2; exit 2; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# npm pack downloads through the npm cache and verifies the registry's integrity; check it
# against the pin as well, so a changed registry entry cannot slip in.
( cd "$tmp" && npm pack --silent "$spec" >/dev/null )
tgz=$(ls "$tmp"/*.tgz)
got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
if [ "$got" != "$want" ]; then echo "fetch-node: $spec integrity $got, pinned $want" >&2; exit 1; fi
mkdir -p "$tmp/x"
tar -xzf "$tgz" -C "$tmp/x"
rm -rf "$dest.tmp" && mkdir -p "$(dirname "$dest")"
mv "$tmp/x/package" "$dest.tmp"
rm -rf "$dest" && mv "$dest.tmp" "$dest"
echo "node $version ($arch) in $dest"
