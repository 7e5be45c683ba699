#!/usr/bin/env bash
# build-deb.sh ARCH BUNDLE PUBKEY OUTDIR: var/pkg/sitegate_<version>_<debarch>.deb from a signed
# release bundle for ARCH (x64, arm64; `make bundle`), with dpkg-deb. The release (payload +
# manifest) goes to /usr/lib/sitegate/release; postinst hard-links it to
# /opt/sitegate/releases/<version> and points /opt/sitegate/current at it (docs/packaging.md).
set -euo pipefail
arch=$1 bundle=$2 pubkey=$3 outdir=$4
here=$(cd "$(dirname "$0")" && pwd)
project=$(cd "$here/.." && pwd)
# A development key is shipped marked as one (sitegate --version says so), and only when asked.
mark='# sitegate development update key: trust it on bench boxes only'
if [ "${DEV_UPDATE_KEY:-0}" != 1 ] && grep -qF "$mark" "$pubkey"; then
  echo "build-deb: $pubkey is a development key; give the release key, or DEV_UPDATE_KEY=1 for a bench package" >&2; exit 2
fi
# shellcheck source=deb-common.sh
. "$here/deb-common.sh"
deb_begin build-deb "$arch"
if [ "${DEV_UPDATE_KEY:-0}" = 1 ]; then
  { grep -qF "$mark" "$pubkey" || echo "$mark"; cat "$pubkey"; } > "$work/update-key.pub"
else
  cp "$pubkey" "$work/update-key.pub"
fi
rel=$root/usr/lib/sitegate/release
mkdir -p "$rel"
# the payload and manifest exactly as `sitegate update apply` would install them
version=$(node --input-type=module -e '
  import { parseHeader, MAX_HEADER } from "'"$project"'/dist/src/update/bundle-format.js";
  import { writeFileSync, createReadStream, createWriteStream, openSync, readSync, fstatSync, closeSync } from "node:fs";
  import { pipeline } from "node:stream/promises";
  const fd = openSync(process.argv[1], "r");
  const head = Buffer.alloc(Math.min(MAX_HEADER, fstatSync(fd).size));
  readSync(fd, head, 0, head.length, 0);
  const size = fstatSync(fd).size;
  closeSync(fd);
  const h = parseHeader(head, process.argv[1]);
  if (!h) { console.error(`build-deb: ${process.argv[1]} is cut short`); process.exit(2); }
  const b = { ...h, payloadSize: size - h.payloadOffset };
  if (b.manifest.payload_size !== b.payloadSize) { console.error(`build-deb: ${process.argv[1]} is damaged (payload ${b.payloadSize} bytes, manifest says ${b.manifest.payload_size})`); process.exit(2); }
  if (b.manifest.arch !== process.argv[2]) { console.error(`build-deb: ${process.argv[1]} is for ${b.manifest.arch}, not ${process.argv[2]}`); process.exit(2); }
  writeFileSync(process.argv[3] + "/manifest.json", JSON.stringify(b.manifest, null, 2) + "\n");
  await pipeline(createReadStream(process.argv[1], { start: b.payloadOffset, end: b.payloadOffset + b.payloadSize - 1 }), createWriteStream(process.argv[4]));
  console.log(b.manifest.version);
' "$bundle" "$arch" "$rel" "$work/payload.tar.gz")
tar -xzf "$work/payload.tar.gz" -C "$rel" --no-same-owner
chmod -R u+rwX,go+rX,go-w "$rel"
test -x "$rel/node/bin/node" || { echo "build-deb: $bundle carries no Node runtime (make bundle passes --runtime)" >&2; exit 2; }
"$here/prune-release.sh" "$arch" "$rel"

install -d "$root/usr/bin" "$root/lib/systemd/system" "$root/usr/lib/sysusers.d" "$root/usr/lib/tmpfiles.d" "$root/usr/lib/udev/rules.d" "$root/usr/lib/modules-load.d" \
  "$root/usr/share/doc/sitegate" "$root/etc/sitegate/update-keys"
printf '#!/bin/sh\n# sitegate of the current release, on its own Node runtime\nexec /opt/sitegate/current/node/bin/node /opt/sitegate/current/dist/src/cli.js "$@"\n' > "$root/usr/bin/sitegate"
chmod 755 "$root/usr/bin/sitegate"
# the bench simulator, its unit, scenario and drop-in are their own package (build-sim-deb.sh)
install -m 644 "$project"/systemd/sitegate.service \
  "$project"/systemd/sitegate-update-check.service "$project"/systemd/sitegate-update-check.timer \
  "$project"/systemd/sitegate-update-request.service "$project"/systemd/sitegate-update-request.path "$root/lib/systemd/system/"
install -m 644 "$here/sysusers.conf" "$root/usr/lib/sysusers.d/sitegate.conf"
install -m 644 "$here/tmpfiles.conf" "$root/usr/lib/tmpfiles.d/sitegate.conf"
install -m 644 "$here/60-sitegate-gpio.rules" "$root/usr/lib/udev/rules.d/60-sitegate-gpio.rules"
install -m 644 "$here/modules-load.conf" "$root/usr/lib/modules-load.d/sitegate.conf"
install -m 644 "$project/config.example.yaml" "$root/usr/share/doc/sitegate/config.example.yaml"
deb_docs sitegate "$version" "$project/dist/src/cli.js" "$here/debian/lintian-overrides"
install -m 644 "$work/update-key.pub" "$root/etc/sitegate/update-keys/sitegate-release.pub"
sed "s/@NODE_VERSION@/$(sed -n 's/.*"node_version": "\(.*\)".*/\1/p' "$rel/manifest.json")/" "$here/debian/copyright" > "$root/usr/share/doc/sitegate/copyright"
chmod 644 "$root/usr/share/doc/sitegate/copyright"

install -d "$root/DEBIAN"
echo /etc/sitegate/update-keys/sitegate-release.pub > "$root/DEBIAN/conffiles"
chmod 644 "$root/DEBIAN/conffiles"
deb_pack sitegate "$version" "$here/debian" "$outdir" <<CONTROL
Depends: libc6 (>= 2.34), libstdc++6, libjemalloc2, socat, openssl, adduser, init-system-helpers (>= 1.54~)
Description: site controller for distributed energy sites
 Modbus polling, dispatch of partner events, telemetry over HTTPS and MQTT,
 a partner HTTPS API and a status page. Carries its own Node.js runtime and
 native addons built for $debarch. The bench simulator is the package
 sitegate-sim.
CONTROL
