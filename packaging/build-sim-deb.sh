#!/usr/bin/env bash
# build-sim-deb.sh ARCH VERSION OUTDIR: var/pkg/sitegate-sim_<version>_<debarch>.deb, the bench
# simulator as its own package (B8), from the workspace package hw-sim/ as `make build` emits it
# (hw-sim/dist: the simulator and the few src/util modules it imports). It carries no runtime
# and no node_modules: it runs on those of the sitegate package of the same version, which it
# depends on (/opt/sitegate/current/node/bin/node, node_modules a link to the release's), and
# installs the command, its unit, its system user, the bench scenario, the devices for the
# gateway's config and the gateway's bench drop-in (docs/packaging.md, "The simulator's package").
set -euo pipefail
arch=$1 version=$2 outdir=$3
# The first release whose gateway package no longer carries the simulator (0.1.0 did).
SPLIT=0.2.0
here=$(cd "$(dirname "$0")" && pwd)
project=$(cd "$here/.." && pwd)
sim=$here/sim
# shellcheck source=deb-common.sh
. "$here/deb-common.sh"
test -f "$project/hw-sim/dist/hw-sim/cli.js" || { echo "build-sim-deb: hw-sim/dist/hw-sim/cli.js is missing; make build first" >&2; exit 2; }
own=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$project/hw-sim/package.json")
[ "$own" = "$version" ] || { echo "build-sim-deb: hw-sim/package.json is at $own, the release at $version: give both one version" >&2; exit 2; }

deb_begin build-sim-deb "$arch"
lib=$root/usr/lib/sitegate-sim
install -d "$lib" "$root/usr/bin" "$root/lib/systemd/system/sitegate.service.d" "$root/usr/lib/sysusers.d" \
  "$root/usr/share/sitegate/scenarios" "$root/usr/share/sitegate/bench" "$root/usr/share/doc/sitegate-sim"
# the package's own package.json ("type": "module" for its .js files), without what a checkout needs
node -e '
  const p = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"));
  delete p.scripts; // its dependencies: those of the gateway release, /opt/sitegate/current/node_modules
  console.log(JSON.stringify(p, null, 2));' "$project/hw-sim/package.json" > "$lib/package.json"
cp -r "$project/hw-sim/dist" "$lib/dist"
find "$lib/dist" -type f \( -name '*.map' -o -name '*.d.ts' \) -delete
find "$lib" -type d -exec chmod 755 {} + && find "$lib" -type f -exec chmod 644 {} +
chmod 755 "$lib/dist/hw-sim/cli.js"
ln -s /opt/sitegate/current/node_modules "$lib/node_modules"
printf '#!/bin/sh\n# the bench simulator, on the runtime of the current sitegate release\nexec /opt/sitegate/current/node/bin/node /usr/lib/sitegate-sim/dist/hw-sim/cli.js "$@"\n' > "$root/usr/bin/sitegate-sim"
chmod 755 "$root/usr/bin/sitegate-sim"
install -m 644 "$project/systemd/sitegate-sim.service" "$root/lib/systemd/system/"
install -m 644 "$sim/sitegate-bench.conf" "$root/lib/systemd/system/sitegate.service.d/sitegate-bench.conf"
install -m 644 "$sim/sysusers.conf" "$root/usr/lib/sysusers.d/sitegate-sim.conf"
install -m 644 "$project/hw-sim/scenarios/bench.yaml" "$root/usr/share/sitegate/scenarios/bench.yaml"
install -m 644 "$sim/bench-devices.yaml" "$root/usr/share/sitegate/bench/devices.yaml"
install -m 644 "$sim/copyright" "$root/usr/share/doc/sitegate-sim/copyright"
deb_docs sitegate-sim "$version" "$project/hw-sim/dist/hw-sim/cli.js" "$sim/lintian-overrides"
# Replaces/Breaks: sitegate packages before $SPLIT carried these files
deb_pack sitegate-sim "$version" "$sim" "$outdir" <<CONTROL
Depends: sitegate (= $version), socat, adduser, init-system-helpers (>= 1.54~)
Replaces: sitegate (<< $SPLIT)
Breaks: sitegate (<< $SPLIT)
Description: bench simulator of a whole site for sitegate
 Simulated Modbus TCP and RTU devices (over a pty pair), a zigbee2mqtt bridge
 and a GPIO chip, driven by one site model, for installers' test benches.
 Installs sitegate-sim.service with a bench scenario and a drop-in that lets
 the gateway open the simulator's pty. Not for production controllers.
CONTROL
