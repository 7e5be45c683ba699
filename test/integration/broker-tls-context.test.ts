// One TLS secure context per broker connection: 200 failed connects of the Zigbee bridge to
// a closed mqtts:// port build one context (a context per attempt leaked ~9 ms of CPU and
// native memory each, issue 43), and a changed ca_file builds a new one for the next attempt.
// The attempts follow a shortened reconnect policy (injected); real sockets, real MQTT.js.
import { test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { rootCertificates } from "node:tls";
import { withTmpDir } from "../support/tmp.js";
import { freePort } from "../support/net.js";
import { testCert } from "../support/tls.js";
import { until } from "../support/wait.js";
import { ZigbeeBridge } from "../../src/zigbee/bridge.js";
import { zigbeeSchema } from "../../src/zigbee/config-schema.js";
import { silentLogger } from "../../src/log.js";

const tlsModule = createRequire(import.meta.url)("node:tls") as typeof import("node:tls");

test("200 failed connects to an mqtts:// broker build one TLS context; a changed ca_file one more", async () => {
  await withTmpDir(async (dir) => {
    const ca = join(dir, "ca.pem");
    copyFileSync(testCert().certFile, ca);
    const port = await freePort(); // nothing listens there
    const original = tlsModule.createSecureContext;
    let built = 0;
    tlsModule.createSecureContext = (opts) => {
      if (Array.isArray(opts?.ca) && opts.ca.length === rootCertificates.length + 1) built++;
      return original(opts);
    };
    const cfg = zigbeeSchema.parse({ url: `mqtts://127.0.0.1:${port}`, ca_file: ca, devices: [] });
    const bridge = new ZigbeeBridge(cfg, silentLogger(), { baseMs: 1, capMs: 2, holdMs: 60_000 });
    try {
      await bridge.start();
      await until(() => bridge.attempts >= 200, "200 attempts", 60_000);
      assert.equal(bridge.connected, false);
      assert.equal(built, 1, `contexts built over ${bridge.attempts} attempts`);
      assert.equal(bridge.tls?.built, 1);
      // The CA file is replaced (a renewed certificate): the next attempt builds one more.
      writeFileSync(ca, readFileSync(ca, "utf8") + "\n");
      await until(() => built === 2, "a context with the new CA file", 30_000);
      const at = bridge.attempts;
      await until(() => bridge.attempts >= at + 50, "50 more attempts", 30_000);
      assert.equal(built, 2, "and only one");
    } finally {
      tlsModule.createSecureContext = original;
      await bridge.stop();
    }
  });
});
