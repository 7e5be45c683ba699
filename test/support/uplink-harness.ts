// A sample store + uplink on a real database, sending to a real HTTPS partner sink.
import { StoragePart } from "../../src/storage/part.js";
import { SAMPLE_MIGRATIONS, SampleStore } from "../../src/telemetry/sample-store.js";
import { UPLINK_MIGRATIONS, Uplink } from "../../src/uplink/uplink.js";
import { silentLogger } from "../../src/log.js";
import { testConfig } from "./config.js";
import { testCert } from "./tls.js";
import type { PartnerSink } from "./partner-sink.js";
import type { Config } from "../../src/config/schema.js";

export interface UplinkRig {
  config: Config;
  storage: StoragePart;
  samples: SampleStore;
  uplink: Uplink;
  stop(): Promise<void>;
}

export { startSink } from "./partner-sink.js";

export async function startUplink(
  dataDir: string,
  sink: PartnerSink,
  over: {
    retentionBytes?: number;
    timeoutMs?: number;
    backoff?: (n: number) => number;
    idleRecheckMs?: number;
    /** telemetry.commit_interval_s in ms; by default every snapshot is committed at once (<= 1000). */
    commitIntervalMs?: number;
  } = {},
): Promise<UplinkRig> {
  const config = testConfig(dataDir, {
    partner: {
      headers: [
        { name: "X-Partner-Key", value: "k-123" },
        { name: "X-Trace", value: "bench" },
      ],
      execution_url: `${sink.url}/exec`,
      data_push_url: `${sink.url}/`,
      data_push_path: "telemetry",
      ca_file: testCert().certFile,
      timeout_ms: over.timeoutMs ?? 2000,
    },
  });
  const log = silentLogger();
  const storage = new StoragePart(dataDir, [SAMPLE_MIGRATIONS, UPLINK_MIGRATIONS], log);
  // The uplink hears of each append as the composition root's listener would tell it.
  const appended = () => uplink.samplesAppended();
  const samples = new SampleStore(storage, {
    retentionBytes: over.retentionBytes ?? 64 * 1024 * 1024,
    log,
    appended,
    ...(over.commitIntervalMs !== undefined ? { commitIntervalMs: over.commitIntervalMs } : {}),
  });
  const uplink = new Uplink(config, storage, samples, log, over.backoff ?? ((n) => Math.min(400, 50 * 2 ** (n - 1))), {
    idleRecheckMs: over.idleRecheckMs,
  });
  storage.start();
  samples.start();
  uplink.start();
  return {
    config,
    storage,
    samples,
    uplink,
    async stop() {
      await uplink.stop();
      samples.stop();
      storage.stop();
    },
  };
}

/** A snapshot of `n` devices at time ts with values derived from seq, so order is checkable. */
export function snapshot(seq: number, n = 3, ts = Date.UTC(2026, 10, 22, 12, 0, 0) + seq * 1000) {
  return {
    ts,
    devices: Array.from({ length: n }, (_, i) => ({
      device_id: `dev-${i}`,
      metrics: { power_w: seq * 10 + i, soc_pct: 50 + i / 10, energy_import_wh: 100000 + seq },
    })),
  };
}
