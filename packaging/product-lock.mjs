// product-lock.mjs FROM TO: package.json and package-lock.json of the gateway alone into TO,
// for a release's production install (`npm ci --omit=dev` in var/release/ARCH): the root of the
// npm workspace without its workspace package hw-sim (sitegate-sim, which is its own .deb and
// is in no release). Its dependencies are all the gateway's too, so the lock stays whole.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [from, to] = process.argv.slice(2);
const read = (f) => JSON.parse(readFileSync(join(from, f), "utf8"));
const pkg = read("package.json");
const lock = read("package-lock.json");
const workspaces = pkg.workspaces ?? [];
delete pkg.workspaces;
delete lock.packages[""].workspaces;
for (const [path, entry] of Object.entries(lock.packages)) {
  if (workspaces.includes(path) || (entry.link && workspaces.includes(entry.resolved))) delete lock.packages[path];
}
writeFileSync(join(to, "package.json"), JSON.stringify(pkg, null, 2) + "\n");
writeFileSync(join(to, "package-lock.json"), JSON.stringify(lock, null, 2) + "\n");
