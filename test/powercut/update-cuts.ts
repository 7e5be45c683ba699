// The `update apply` part of `make powercut`: an install root and data dir on their own
// power-cut filesystem, fake releases (test/support/ota.ts) of ever higher versions, and a
// cut at a random moment of each apply. After the cut, the next boot's pre-start check
// (`sitegate update check`) must pass and `current` must be a release that starts; an
// apply that had exited 0 before the cut must have left its version current.
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { CLI, fakeBundle, makeKeys, updateCliEnv, type Keys, type UpdateEnv } from "../support/ota.js";
import { mountPowercut } from "../support/powercut-mount.js";

export interface UpdateCuts {
  /** One apply cut at a random moment (`random` in [0, 1)); returns the findings. */
  cut(random: () => number): Promise<{ checks: number; lost: string[]; broken: string[]; acked: number }>;
}

function envAt(base: string, keys: Keys): UpdateEnv {
  return { root: join(base, "root"), dataDir: join(base, "data"), keys, restartCmd: "true" };
}

function current(env: UpdateEnv): string | null {
  try {
    return readlinkSync(join(env.root, "current")).replace(/^releases\//, "");
  } catch {
    return null;
  }
}

/** The next boot: the unit's pre-start check, then the release's entry point (`--version`: it loads and answers). */
function boots(env: UpdateEnv): string | null {
  const check = spawnSync(process.execPath, [CLI, "update", "check"], { encoding: "utf8", env: updateCliEnv(env, "true") });
  if (check.status !== 0) throw new Error(`update check exited ${check.status}: ${check.stdout}${check.stderr}`.trim());
  const v = current(env);
  if (v === null) throw new Error("no current release");
  const run = spawnSync(process.execPath, [join(env.root, "current", "dist", "src", "cli.js"), "--version"], { encoding: "utf8" });
  if (run.status !== 0 || run.stdout.trim() !== v) throw new Error(`release ${v} does not start: ${run.status} ${run.stdout}${run.stderr}`);
  return v;
}

export async function updateCuts(work: string): Promise<UpdateCuts> {
  const backing = join(work, "update-disk");
  const mnt = join(work, "update-mnt");
  const fsWork = join(work, "update-fs");
  mkdirSync(fsWork, { recursive: true });
  const keys = makeKeys(work, "powercut");
  const env = envAt(mnt, keys);
  let minor = 1;
  const bundle = async () => {
    const version = `0.${minor++}.0`;
    return { version, file: await fakeBundle({ version, mode: "healthy", key: keys.privateKey, out: join(work, `${version}.bundle`) }) };
  };
  // The first install, kept whole (a clean shutdown), and how long an apply takes here.
  const first = await bundle();
  const m0 = await mountPowercut(backing, mnt, fsWork, { keep: true });
  mkdirSync(env.dataDir, { recursive: true });
  const t0 = Date.now();
  const r0 = spawnSync(process.execPath, [CLI, "update", "apply", first.file], { encoding: "utf8", env: updateCliEnv(env, "true") });
  const applyMs = Date.now() - t0;
  await m0.cut();
  if (r0.status !== 0) throw new Error(`installing ${first.version}: ${r0.stdout}${r0.stderr}`);

  return {
    async cut(random) {
      const b = await bundle();
      const mount = await mountPowercut(backing, mnt, fsWork);
      const child = spawn(process.execPath, [CLI, "update", "apply", b.file], { stdio: "ignore", env: updateCliEnv(env, "true") });
      let code: number | null = null;
      const exited = new Promise<void>((r) =>
        child.once("exit", (c) => {
          code = c;
          r();
        }),
      );
      // wait: the cut's random moment within an apply's usual time
      await Promise.race([exited, new Promise((r) => setTimeout(r, Math.floor(random() * applyMs * 1.2)))]);
      child.kill("SIGKILL");
      await exited;
      await mount.cut();
      const out = { checks: 1, lost: [] as string[], broken: [] as string[], acked: code === 0 ? 1 : 0 };
      // The next boot, on the disk the cut left (through the filesystem again: a crash then drops its writes too).
      const boot = await mountPowercut(backing, mnt, fsWork);
      try {
        const v = boots(env);
        if (code === 0 && v !== b.version) out.lost.push(`update apply of ${b.version} exited 0, yet ${v} is current`);
      } catch (e) {
        out.broken.push(`update apply of ${b.version} cut: ${(e as Error).message}`);
      } finally {
        await boot.cut();
      }
      return out;
    },
  };
}
