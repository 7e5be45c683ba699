// A throwaway root for a test that installs a package with the machine's own dpkg: a new
// mount, network and PID namespace (unshare) in which the command runs chrooted into an
// overlay of /. Every write lands in the overlay's upper layer, a tmpfs of that namespace:
// dpkg's database, /etc (sysusers' user and group), /var/lib, /opt, /usr. /run is a fresh
// tmpfs (no systemd seen running, no udev), /sys is read-only, /dev is the machine's (ptys).
// The network namespace has only its own loopback, so fixed ports (8443) are free and
// nothing listens on the machine's. When the command ends, the namespace's PID 1 ends and
// the kernel kills what is left in it; the tmpfs, and with it every change, goes away.
//
// `prepare`: a command run first, chrooted in the same overlays, whose writes then become a
// read-only layer between the machine and the command's writable layer: the command sees the
// machine as if `prepare` had run on it (a package installed), and the machine is only read.
//
// Why not `dpkg --root`: it runs the maintainer scripts chrooted into that root, which then
// needs a whole Debian system (sh, adduser, systemd-sysusers) installed into it first. A
// plain chroot needs the same tree. The overlay borrows the machine's system read-only.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmdirSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** File systems that hold files: a mount of one of these is overlaid too (its own upper layer). */
const DATA_FS = new Set([
  "ext2",
  "ext3",
  "ext4",
  "xfs",
  "btrfs",
  "zfs",
  "f2fs",
  "vfat",
  "exfat",
  "tmpfs",
  "overlay",
  "squashfs",
  "9p",
  "virtiofs",
  "nfs",
  "nfs4",
]);
/** Handled as a whole: /dev bound, /proc the namespace's own, /sys read-only, /run a fresh tmpfs. */
const SPECIAL = ["/dev", "/proc", "/sys", "/run"];

const have = (cmd: string) => spawnSync("sh", ["-c", `command -v ${cmd}`]).status === 0;
const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** Why a throwaway root cannot be made here, or false. */
export function throwawayRootUnavailable(): string | false {
  if (process.getuid?.() !== 0) return "needs root (unshare, mount, chroot)";
  for (const cmd of ["unshare", "mount", "chroot", "ip"]) if (!have(cmd)) return `needs ${cmd}`;
  if (!readFileSync("/proc/filesystems", "utf8").includes("\toverlay\n")) spawnSync("modprobe", ["overlay"]);
  if (!readFileSync("/proc/filesystems", "utf8").includes("\toverlay\n")) return "needs overlayfs (modprobe overlay)";
  return false;
}

/** The machine's mounts below / as (mount point, file system type), from /proc/self/mountinfo. */
export function mounts(): { point: string; type: string }[] {
  const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
  return readFileSync("/proc/self/mountinfo", "utf8")
    .trim()
    .split("\n")
    .map((line) => {
      const f = line.split(" ");
      return { point: unescape(f[4]), type: f[f.indexOf("-") + 1] };
    });
}

/**
 * The script PID 1 of the namespace runs: the overlays, the special mounts, loopback up, then
 * the command chrooted. With `prepare`, that runs in them first; then they are unmounted, each
 * upper layer becomes stage sN, and the overlays are made again with sN under a fresh upper.
 */
export function setupScript(base: string, prepare?: string[]): string {
  const lines = [
    "set -eu",
    `base=${q(base)}`,
    'mount -t tmpfs -o mode=0700 sitegate-throwaway "$base"',
    'mkdir "$base/root"',
    'layer() { n=$((n+1)); low=$1; [ ! -d "$base/s$n" ] || low="$base/s$n:$1"; mkdir -p "$base/l$n/upper" "$base/l$n/work"; mount -t overlay "sitegate-throwaway-$n" -o "lowerdir=$low,upperdir=$base/l$n/upper,workdir=$base/l$n/work" "$base/root$2"; }',
    "mount_root() {",
    "n=0",
    'layer / ""',
  ];
  const under = (p: string, dir: string) => p === dir || p.startsWith(`${dir}/`);
  const seen = new Set<string>();
  for (const m of mounts().sort((a, b) => a.point.split("/").length - b.point.split("/").length)) {
    if (m.point === "/" || seen.has(m.point) || SPECIAL.some((d) => under(m.point, d)) || under(m.point, base)) continue;
    seen.add(m.point);
    let file = false;
    try {
      file = statSync(m.point).isFile();
    } catch {
      continue; // hidden under another mount
    }
    // a file bound over (e.g. /etc/resolv.conf in a container): visible, read-only
    if (file) lines.push(`mount --bind -o ro ${q(m.point)} "$base/root"${q(m.point)}`);
    // a file system mounted inside / gets its own upper layer; anything else stays an empty folder
    else if (DATA_FS.has(m.type)) lines.push(`layer ${q(m.point)} ${q(m.point)} || echo "throwaway root: ${m.point} not visible" >&2`);
  }
  lines.push(
    'mount --rbind /dev "$base/root/dev"',
    'mount --rbind /proc "$base/root/proc"',
    'mount -t sysfs -o ro sysfs "$base/root/sys"',
    'mount -t tmpfs -o mode=0755 tmpfs "$base/root/run"',
    "}",
    "mount_root",
  );
  if (prepare?.length) {
    lines.push(
      // its output goes to stderr: stdout is the command's alone
      `chroot "$base/root" ${prepare.map(q).join(" ")} >&2 || { s=$?; echo "throwaway root: prepare exited with $s" >&2; exit $s; }`,
      'umount -R "$base/root"',
      'i=1; while [ $i -le $n ]; do mv "$base/l$i/upper" "$base/s$i"; rm -rf "$base/l$i"; i=$((i+1)); done',
      "mount_root",
    );
  }
  lines.push(
    "ip link set lo up",
    // PID 1 waits: the shell reaps the daemons the command leaves to it
    'chroot "$base/root" "$@" &',
    "wait $!",
  );
  return lines.join("\n");
}

export interface RootRun {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs argv in a throwaway root (see above; `prepare` first, as a layer under it) and returns its exit status and output. */
export function inThrowawayRoot(
  argv: string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; prepare?: string[] } = {},
): Promise<RootRun> {
  const base = mkdtempSync(join(tmpdir(), "sitegate-root-"));
  const args = ["--mount", "--net", "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation", "private"];
  return new Promise((ok, fail) => {
    const child = spawn("unshare", [...args, "sh", "-c", setupScript(base, opts.prepare), "throwaway-root", ...argv], {
      env: opts.env ?? process.env,
      timeout: opts.timeoutMs,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", fail);
    child.on("close", (status) => {
      // the tmpfs went with the namespace; the folder it was mounted on is empty again
      if (existsSync(base)) rmdirSync(base);
      ok({ status, stdout, stderr });
    });
  });
}
