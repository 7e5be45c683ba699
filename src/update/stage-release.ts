// Unpacking a verified bundle into releases/: a fresh .tmp-* folder, checked, fsynced and
// renamed to releases/<version>, so `current` only ever points at a complete release.
import { chmodSync, createReadStream, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { BundleRefused } from "./bundle-format.js";
import { exists, fsyncPath, fsyncTree, removeTree } from "./fsx.js";
import type { ReceivedBundle } from "./receive.js";
import { SafeUntar } from "./untar.js";
import { linkedVersion, type Layout } from "./update-state.js";
import { testHook } from "../util/test-hooks.js";

/** Unpacks the private copy into a fresh .tmp-* directory under releases/ and checks it is the release; returns that directory. */
export async function stageRelease(b: ReceivedBundle, l: Layout): Promise<string> {
  // The daemon's user runs the release, so its folders must be readable whatever umask the
  // installer runs under (the root units have 0077); the modes come from the signed payload.
  const umask = process.umask(0o022);
  try {
    return await stageReleaseFiles(b, l);
  } finally {
    process.umask(umask);
  }
}

async function stageReleaseFiles(b: ReceivedBundle, l: Layout): Promise<string> {
  const m = b.manifest;
  mkdirSync(l.releases, { recursive: true });
  pruneReleases(l);
  const tmp = join(l.releases, `.tmp-${m.version}-${randomBytes(4).toString("hex")}`);
  mkdirSync(tmp, { mode: 0o700 });
  try {
    await unpack(b.file, b.payloadOffset, b.payloadSize, tmp, m.unpacked_size);
    const pkg = JSON.parse(readFileSync(join(tmp, "package.json"), "utf8")) as { version?: string };
    if (
      pkg.version !== m.version ||
      !existsSync(join(tmp, "dist", "src", "cli.js")) ||
      (m.runtime === true && !existsSync(join(tmp, "node", "bin", "node")))
    ) {
      throw new BundleRefused(`refused: the payload is not release ${m.version} (package.json says ${pkg.version})`);
    }
    writeFileSync(join(tmp, "manifest.json"), JSON.stringify(m, null, 2) + "\n", { mode: 0o644 });
    chmodSync(tmp, 0o755); // the daemon's user reads the code; only root writes it
    fsyncTree(tmp);
  } catch (e) {
    removeTree(tmp);
    throw e;
  }
  return tmp;
}

/** Renames the staged release to releases/<version>, replacing one of that version; returns its path. */
export function placeRelease(l: Layout, version: string, tmp: string): string {
  const dest = join(l.releases, version);
  if (exists(dest)) {
    // a release of this version left from before (e.g. rolled back): replace it whole
    const aside = join(l.releases, `.tmp-old-${version}-${randomBytes(4).toString("hex")}`);
    renameSync(dest, aside);
    removeTree(aside);
  }
  renameSync(tmp, dest);
  fsyncPath(l.releases);
  return dest;
}

/** Streams the payload of the private copy through gunzip into the safe tar reader, in `dir`. */
async function unpack(file: string, offset: number, size: number, dir: string, limit: number): Promise<void> {
  const untar = new SafeUntar(dir, limit);
  let sent = 0;
  try {
    await pipeline(
      createReadStream(file, { start: offset, end: offset + size - 1, highWaterMark: 64 * 1024 }),
      async function* (src: AsyncIterable<Buffer>) {
        for await (const chunk of src) {
          sent += chunk.length;
          yield chunk;
          if (sent >= size / 2 && sent - chunk.length < size / 2) await testHook("unpack", () => readdirSync(dir).length > 0);
        }
      },
      createGunzip(),
      async function (src: AsyncIterable<Buffer>) {
        for await (const chunk of src) untar.push(chunk);
      },
    );
    untar.finish();
  } catch (e) {
    untar.abort();
    if (e instanceof BundleRefused) throw e;
    throw new BundleRefused(`refused: the payload cannot be unpacked: ${(e as Error).message}`);
  }
}

/** Removes unfinished unpacks and every release but `current` and `previous`. */
export function pruneReleases(l: Layout): void {
  const keep = new Set([linkedVersion(l.current), linkedVersion(l.previous)]);
  for (const name of readdirSync(l.releases)) {
    if (name.startsWith(".tmp-") || (!name.startsWith(".") && !keep.has(name))) removeTree(join(l.releases, name));
  }
}
