// Commands the fleet broker may send on {prefix}/{site_id}/cmd/{name}: the partner
// operations through the same service functions as the HTTPS routes (so both accept and
// reject the same requests), plus devicesync, events, ping and update (a request that a
// root unit carries out). Each answer is
// {status, data} or {status, error, message, details} (the B3 error body with a status).
import { SitegateError, errorMessage } from "../errors.js";
import { asSitegateError, errorAnswer } from "../services/errors.js";
import { configureService, deviceSyncView, syncedDevices, type ConfigureDeps } from "../services/devices.js";
import { listEvents } from "../services/events.js";
import { submitDispatch, type DispatchSubmit } from "../dispatch/submit.js";
import type { EventRow } from "../dispatch/store.js";
import type { DeviceDirectory } from "../model/device.js";
import { VERSION } from "../version.js";
import { requestPolicyRefusal, updateRequestSchema, writeUpdateRequest } from "../update/request.js";

export interface CommandDeps extends ConfigureDeps {
  dispatch: DispatchSubmit & { list(limit?: number): EventRow[] };
  /** Every device of the site, whatever its family: device sync lists them. */
  devices: DeviceDirectory;
  startedAt: number;
}

export interface CommandAnswer {
  status: number;
  body: Record<string, unknown>;
}

export const COMMANDS = ["dr", "configure", "devicesync", "events", "ping", "update"] as const;

const ok = (data: unknown): CommandAnswer => ({ status: 200, body: { status: 200, data } });

/**
 * Runs one command on an already parsed JSON payload (undefined when the payload was
 * empty). Synchronous where the operation is (the answer then leaves in the same write as
 * the command's PUBACK); `configure` talks to devices and answers later.
 */
export function runCommand(name: string, payload: unknown, deps: CommandDeps): CommandAnswer | Promise<CommandAnswer> {
  try {
    switch (name) {
      case "ping":
        return ok({
          pong: true,
          version: VERSION,
          uptime_s: Math.round((Date.now() - deps.startedAt) / 1000),
          at: new Date().toISOString(),
        });
      case "dr": {
        // A cancellation of a running event answers once its devices are released (B4).
        const receipts = submitDispatch(deps.dispatch, payload, deps.log);
        return receipts instanceof Promise ? receipts.then(ok, (e: unknown) => failure(name, e, deps)) : ok(receipts);
      }
      case "configure":
        return configureService(payload, deps).then(ok, (e) => failure(name, e, deps));
      case "devicesync":
        return ok(deviceSyncView(deps.config.site_id, syncedDevices(deps.devices)));
      case "events":
        return ok(listEvents(deps.dispatch, (payload as { limit?: unknown } | undefined)?.limit));
      case "update": {
        // Only recorded here: a root unit installs it (src/update/request.ts).
        const r = updateRequestSchema.safeParse(payload ?? {});
        if (!r.success) {
          const details = r.error.issues.map((i) => ({ path: i.path.join(".") || "body", message: i.message }));
          throw new SitegateError(
            "INVALID_REQUEST",
            "update takes {url: https://..., sha256: 64 hex digits, version: x.y.z, size?: bytes}",
            { details },
          );
        }
        // Refused here already (root checks again): who may ask, and from where it may download.
        const policy = requestPolicyRefusal(deps.config, r.data.url);
        if (policy) throw new SitegateError("FORBIDDEN", policy.message, { details: [policy] });
        writeUpdateRequest(deps.config.data_dir, r.data);
        deps.log.info({ version: r.data.version, url: r.data.url }, "update requested by the fleet");
        return { status: 202, body: { status: 202, data: { status: "requested", version: r.data.version } } };
      }
      default:
        throw new SitegateError("NOT_FOUND", `no command "${name}" (known: ${COMMANDS.join(", ")})`);
    }
  } catch (e) {
    return failure(name, e, deps);
  }
}

/**
 * A refused or failed command's answer: the one errorAnswer (services/errors.ts) as the B3
 * error body, with the status the HTTPS route would answer. A 500 is logged (a bug).
 */
export function failure(name: string, e: unknown, deps: Pick<CommandDeps, "log">): CommandAnswer {
  const a = errorAnswer(asSitegateError(e));
  if (a.status === 500) deps.log.error({ command: name, err: errorMessage(e) }, "command failed");
  return { status: a.status, body: { status: a.status, error: a.code, message: a.message, details: a.details } };
}
