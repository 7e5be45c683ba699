// Trust: the gateway refuses a partner or a fleet broker whose certificate its CA file
// (and the system store) do not vouch for, and delivers nothing to it. Real HTTPS sink,
// real mosquitto; the certificate is valid for 127.0.0.1, only not trusted.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { withTmpDir } from "../support/tmp.js";
import { startSink } from "../support/partner-sink.js";
import { snapshot, startUplink } from "../support/uplink-harness.js";
import { untrustedCert } from "../support/tls.js";
import { until } from "../support/wait.js";
import { startBroker, fleetConfig } from "../support/mosquitto.js";
import { startGateway } from "../support/gateway.js";
import type { Fleet } from "../../src/fleet/fleet.js";
import { HTTPS, queueCallback } from "../../src/uplink/callbacks.js";

test("a partner presenting a certificate the gateway does not trust gets nothing; the data waits in the store", async () => {
  await withTmpDir(async (dir) => {
    const sink = await startSink(untrustedCert(dir));
    try {
      const rig = await startUplink(join(dir, "data"), sink); // trusts the test CA only
      try {
        for (let i = 0; i < 3; i++) rig.samples.append(snapshot(i));
        queueCallback(rig.uplink.deliveryLog, "execution_response", `${sink.url}/exec`, { event_id: "e-tls", status: "completed" });
        await until(
          () => rig.uplink.stats().data_push.failures >= 2 && rig.uplink.stats().execution.failures >= 2,
          "refused attempts on both lanes",
        );
        assert.match(rig.uplink.stats().data_push.last_error ?? "", /SELF_SIGNED|self[- ]signed|certificate/i);
        assert.equal(sink.requests.length, 0, "no request reached the untrusted partner");
        assert.equal(rig.samples.stats().pending_snapshots, 3, "the snapshots wait");
        assert.equal(rig.uplink.deliveryLog.size(HTTPS), 1, "the execution response waits");
      } finally {
        await rig.stop();
      }
    } finally {
      await sink.stop();
    }
  });
});

test("a fleet broker presenting a certificate the gateway does not trust is never connected to", async () => {
  await withTmpDir(async (dir) => {
    const broker = await startBroker(join(dir, "broker"), { cert: untrustedCert(dir) });
    try {
      const gw = await startGateway(join(dir, "gw"), { fleet: fleetConfig(broker) }); // ca_file: the test CA
      try {
        const fleet = gw.daemon.part<{ current: Fleet } & import("../../src/lifecycle.js").Part>("fleet").current;
        // The TLS handshake fails: wait until the broker logged the refused handshake.
        await until(
          () => /OpenSSL Error|protocol error|Client .* disconnected|bad certificate|unknown ca/i.test(broker.log()),
          "the broker sees the handshake fail",
          20_000,
        );
        assert.equal(fleet.connected, false);
        assert.equal(fleet.stats().connects, 0, "never connected");
      } finally {
        await gw.stop();
      }
    } finally {
      await broker.stop();
    }
  });
});
