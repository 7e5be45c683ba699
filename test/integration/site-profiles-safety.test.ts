// Profiles from disk are read safely (DESIGN B9): the hostile files of a security
// review's table (100 MB, 400 KB of nested `[`, a symlink to /dev/zero, a FIFO) and a
// world-writable file or folder are each reported by path and left out, quickly and
// without echoing their content; the good profile beside them loads. check-config warns
// and exits 0 unless a device of the config file needs a broken profile, and never opens
// the database; the daemon starts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { siteProfiles } from "../../src/profiles/registry.js";
import { testConfigInput } from "../support/config.js";
import { CLI, writeConfig } from "../support/cli.js";
import { tcpDevice } from "../support/gateway.js";
import { withTmpDir } from "../support/tmp.js";

const GOOD = `name: site-meter
kind: fixed
role: meter
points:
  - { metric: power_w, address: 10, type: s16 }
`;
const SECRET = "hunter2-do-not-echo";

/** A profiles folder with the good profile; `hostile` adds the file under test. */
function folder(root: string, hostile: (dir: string) => void): string {
  const dir = join(root, "profiles");
  mkdirSync(dir, { mode: 0o755 });
  writeFileSync(join(dir, "good.yaml"), GOOD, { mode: 0o644 });
  hostile(dir);
  return dir;
}

/** check-config in a child, with a ceiling: a hang is a failure, not a stuck test. */
function checkConfig(file: string) {
  const r = spawnSync(process.execPath, [CLI, "check-config", "--config", file], { encoding: "utf8", timeout: 60_000 });
  assert.equal(r.signal, null, "check-config did not finish within 60 s");
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const CASES: Array<{ name: string; make: (dir: string) => void; file: string; why: RegExp }> = [
  {
    name: "a 100 MB file",
    file: "big.yaml",
    make: (dir) => {
      writeFileSync(join(dir, "big.yaml"), `name: big\nkind: fixed\n# ${SECRET}\n`, { mode: 0o644 });
      truncateSync(join(dir, "big.yaml"), 100 * 1024 * 1024); // sparse: no 100 MB written
    },
    why: /is 104857600 bytes, over the 256 KiB a profile may have/,
  },
  {
    name: "400 KB of nested [",
    file: "deep.yaml",
    make: (dir) => writeFileSync(join(dir, "deep.yaml"), `a: ${"[".repeat(400 * 1024)}`),
    why: /over the 256 KiB/,
  },
  {
    name: "200 KB of nested [ (under the size limit)",
    file: "deep.yaml",
    make: (dir) => writeFileSync(join(dir, "deep.yaml"), `name: deep\nk: ${"[".repeat(200 * 1024)}`),
    why: /nests deeper than 32 levels at line 2, column 36/,
  },
  {
    name: "a symlink to /dev/zero",
    file: "zero.yaml",
    make: (dir) => symlinkSync("/dev/zero", join(dir, "zero.yaml")),
    why: /symlink out of the profiles folder/,
  },
  {
    name: "a FIFO",
    file: "fifo.yaml",
    make: (dir) => assert.equal(spawnSync("mkfifo", [join(dir, "fifo.yaml")]).status, 0),
    why: /is a FIFO, not a regular file/,
  },
  {
    name: "a world-writable file",
    file: "open.yaml",
    make: (dir) => {
      writeFileSync(join(dir, "open.yaml"), GOOD.replace("site-meter", "open-meter"));
      chmodSync(join(dir, "open.yaml"), 0o666);
    },
    why: /the file is world-writable.*chmod o-w/,
  },
  {
    name: "YAML that does not parse",
    file: "broken.yaml",
    make: (dir) => writeFileSync(join(dir, "broken.yaml"), `name: x\nsecret: "${SECRET}\n  - [: :\n`),
    why: /is not valid YAML: [A-Z_]+ at line \d+, column \d+/,
  },
  {
    name: "a profile that fails validation",
    file: "invalid.yaml",
    make: (dir) => writeFileSync(join(dir, "invalid.yaml"), `name: "${SECRET} x"\nkind: fixed\nrole: meter\npoints: []\n`),
    why: /invalid profile: name: .*; points: /,
  },
  {
    name: "an alias bomb",
    file: "laughs.yaml",
    make: (dir) =>
      writeFileSync(
        join(dir, "laughs.yaml"),
        [
          "a: &a [x, x, x, x, x, x, x, x, x]",
          ...Array.from(
            { length: 9 },
            (_, i) => `${"bcdefghij"[i]}: &${"bcdefghij"[i]} [${Array(9).fill(`*${"abcdefghi"[i]}`).join(", ")}]`,
          ),
        ].join("\n"),
      ),
    why: /aliases are limited to 64|not valid YAML/,
  },
];

for (const c of CASES) {
  test(`profiles_dir with ${c.name}: reported by path without its content and left out; the good profile loads; check-config warns and exits 0`, async () => {
    await withTmpDir((root) => {
      const dir = folder(root, c.make);
      // First in a child with a ceiling (a FIFO that blocks fails there), then in this process.
      const dataDir = join(root, "var");
      const file = writeConfig(root, testConfigInput(dataDir, { profiles_dir: dir }));
      const cc = checkConfig(file);
      assert.equal(cc.code, 0, cc.stderr);
      assert.match(cc.stderr, new RegExp(`warning: ${join(dir, c.file).replace(/[.]/g, "\\.")}: site profile left out`));
      assert.ok(!cc.stderr.includes(SECRET));
      assert.match(cc.stdout, /config ok/);
      assert.ok(!existsSync(dataDir) || !readdirSync(dataDir).some((f) => f.startsWith("sitegate")), "no database opened");
      const r = siteProfiles(dir);
      assert.ok(r.has("site-meter"), "the good profile beside it loads");
      assert.equal(r.errors.length, 1, JSON.stringify(r.errors));
      assert.equal(r.errors[0]?.path, join(dir, c.file));
      assert.match(r.errors[0]?.message ?? "", c.why);
      assert.ok(r.errors[0]!.message.length < 400, "a short message");
      for (const leak of [SECRET, "[[[[", "x, x"])
        assert.ok(!r.errors[0]!.message.includes(leak), `no content echoed: ${r.errors[0]!.message}`);
    });
  });
}

test("a world-writable profiles folder: none of its profiles is loaded, and the report says why", async () => {
  await withTmpDir((root) => {
    const dir = folder(root, () => {});
    chmodSync(dir, 0o777);
    const r = siteProfiles(dir);
    assert.ok(!r.has("site-meter"));
    assert.deepEqual(r.errors, [
      {
        path: dir,
        message:
          "the profiles folder is world-writable: anyone on the machine could change what it holds (chmod o-w): none of its profiles is loaded",
      },
    ]);
  });
});

test("a symlink inside the folder to a profile in the folder is read; check-config exits 2 when a device of the file needs a broken profile", async () => {
  await withTmpDir((root) => {
    const dir = folder(root, (d) => {
      symlinkSync("good.yaml", join(d, "alias.yml"));
      mkdirSync(join(root, "elsewhere"));
      writeFileSync(join(root, "elsewhere", "battery.yaml"), GOOD.replace("site-meter", "site-battery"));
      symlinkSync(join(root, "elsewhere", "battery.yaml"), join(d, "battery.yaml"));
    });
    const r = siteProfiles(dir);
    // alias.yml (read first) is good.yaml: read through the link, so good.yaml's name is then taken.
    assert.ok(r.has("site-meter"));
    assert.deepEqual(
      r.errors.map((e) => e.path),
      [join(dir, "battery.yaml"), join(dir, "good.yaml")],
    );
    assert.match(r.errors[0]!.message, /symlink out of the profiles folder/);
    assert.match(r.errors[1]!.message, /"site-meter" is already taken/);
    const file = writeConfig(
      root,
      testConfigInput(join(root, "var"), { profiles_dir: dir, devices: [tcpDevice("b1", 1502, 1, "site-battery") as never] }),
    );
    const cc = checkConfig(file);
    assert.equal(cc.code, 2, cc.stdout + cc.stderr);
    assert.match(cc.stderr, /unknown integration "site-battery"/);
    assert.ok(cc.stderr.includes(`${join(dir, "battery.yaml")}: site profile left out`), cc.stderr);
  });
});
