// The `devices` of the config file, as a lifecycle part. The API owns device
// configuration: an entry is applied at start (like a configure request, in the
// background) only when its content changed since it was last applied, so an unchanged
// config never overwrites what the partner configured and check writes do not run on
// every boot. The hash of each applied entry is kept in the registry's database. An entry
// whose device does not answer yet (powered on after the gateway) is tried again, 5 s
// doubling to 5 min, until it pairs, the partner configures that device_id through the
// API, or the gateway stops.
import { createHash } from "node:crypto";
import type { DeviceConfig } from "../config-schema.js";
import { errorMessage } from "../../errors.js";
import type { Part } from "../../lifecycle.js";
import type { Logger } from "../../log.js";
import type { DeviceRegistry } from "./registry.js";
import type { DeviceConnector } from "../../devices/types.js";

/** Content hash of a device entry: stable across key order. */
export function deviceConfigHash(d: DeviceConfig): string {
  const canon = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(canon)
      : v && typeof v === "object"
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, canon((v as Record<string, unknown>)[k])]),
          )
        : v;
  return createHash("sha256")
    .update(JSON.stringify(canon(d)))
    .digest("hex");
}

const RETRY_MIN_MS = 5000;
const RETRY_MAX_MS = 300_000;

export class ConfigDevices implements Part {
  readonly name = "config-devices";
  private applying: Promise<void> = Promise.resolve();
  private first: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly devices: DeviceConfig[],
    private readonly deps: { connector: Pick<DeviceConnector<DeviceConfig>, "configure">; registry: DeviceRegistry; log: Logger },
  ) {}

  /** Resolves once this start's first applying is over (whatever its results). */
  get settled(): Promise<void> {
    return this.first;
  }

  start(): void {
    this.stopped = false;
    const { registry, log } = this.deps;
    const due: Array<{ device: DeviceConfig; hash: string }> = [];
    for (const device of this.devices) {
      const hash = deviceConfigHash(device);
      if (registry.appliedConfigHash(device.device_id) === hash) {
        log.debug({ device_id: device.device_id }, "config entry unchanged since applied; the registry's configuration stays");
        continue;
      }
      const held = registry.get(device.device_id);
      if (held && deviceConfigHash(held.config) === hash) {
        // Already configured exactly so (e.g. by a start before this table existed).
        registry.markConfigApplied(device.device_id, hash);
        continue;
      }
      due.push({ device, hash });
    }
    if (!due.length) return;
    this.first = this.applying = this.apply(due, 0);
  }

  private apply(due: Array<{ device: DeviceConfig; hash: string }>, attempt: number): Promise<void> {
    const { registry, log } = this.deps;
    return this.deps.connector
      .configure(due.map((d) => d.device))
      .then((results) => {
        const again: typeof due = [];
        due.forEach((d, i) => {
          const r = results[i];
          // The connector answers every entry; one it left unanswered is tried again, as one not paired.
          if (r === undefined) {
            again.push(d);
            return;
          }
          // Stored (accepted, or check writes failed): applied. Not paired: tried again later.
          if (r.status === "accepted" || r.code === "REGISTRY_WRITE_FAILED") registry.markConfigApplied(r.device_id, d.hash);
          else again.push(d);
          if (r.status === "accepted") log.info({ device_id: r.device_id }, r.message);
          else log.warn({ device_id: r.device_id, code: r.code }, r.message);
        });
        if (again.length && !this.stopped) this.retry(again, attempt);
      })
      .catch((e) => log.error({ err: errorMessage(e) }, "cannot apply the devices of the config file"));
  }

  private retry(due: Array<{ device: DeviceConfig; hash: string }>, attempt: number): void {
    const delay = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** attempt);
    this.deps.log.info({ devices: due.map((d) => d.device.device_id), retry_in_ms: delay }, "config devices not paired yet; trying again");
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.stopped) return;
      // The partner may have configured the device_id through the API meanwhile: that wins.
      const still = due.filter((d) => {
        const held = this.deps.registry.get(d.device.device_id);
        if (!held) return true;
        const h = deviceConfigHash(held.config);
        return h === d.hash || h === this.deps.registry.appliedConfigHash(d.device.device_id);
      });
      if (still.length) this.applying = this.apply(still, attempt + 1);
    }, delay);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.applying;
  }
}
