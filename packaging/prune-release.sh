#!/usr/bin/env bash
# prune-release.sh ARCH DIR: what the package ships of a release (the bundle's payload in DIR):
# without what no controller runs or reads, each of which lintian names otherwise.
# - dot files and folders (VCS files, eslint and other tool configs, CI folders);
# - the dependencies' command-line scripts (package.json "bin": nothing here runs them),
#   shell scripts, HTML pages, node-addon-api's tools (its headers were for the build);
# - musl addons (Debian is glibc) and better-sqlite3's prebuilt fallback (build/Release is
#   the addon compiled here, and the one its loader takes);
# - dist/'s source maps and declarations (no .ts ships, and the unit runs no --enable-source-maps);
# then the modules' files become 0644 (no addon or licence is executable) and the Node
# runtime is stripped (its symbol table, about 19 MB; the dynamic symbols addons link
# against stay).
set -euo pipefail
arch=$1 rel=$2
case "$arch" in x64) strip=strip ;; arm64) strip=aarch64-linux-gnu-strip ;; *) echo "prune-release: no strip for $arch" >&2; exit 2 ;; esac
mods=$rel/node_modules
find "$mods" -name package.json -print0 | xargs -0 node -e '
  const { readFileSync, rmSync } = require("node:fs");
  const { dirname, join } = require("node:path");
  for (const file of process.argv.slice(1)) {
    let bin;
    try { bin = JSON.parse(readFileSync(file, "utf8")).bin; } catch { continue; }
    for (const b of typeof bin === "string" ? [bin] : Object.values(bin ?? {})) rmSync(join(dirname(file), b), { force: true });
  }'
find "$mods" -depth -name '.*' -exec rm -rf {} +
find "$mods" -type f \( -name '*.sh' -o -name '*.html' -o -name '*.musl.node' \) -delete
rm -rf "$mods/node-addon-api/tools"
if [ -d "$mods/better-sqlite3/build/Release" ]; then rm -rf "$mods/better-sqlite3/prebuilds"; fi
find "$rel/dist" -type f \( -name '*.map' -o -name '*.d.ts' \) -delete
find "$mods" -type f -exec chmod 0644 {} +
"$strip" --strip-all "$rel/node/bin/node"
find "$rel" -mindepth 1 -depth -type d -empty -delete
