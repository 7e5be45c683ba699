// The request bodies the services validate, whichever front end received them; api/
// also turns them into its OpenAPI document.
import { z } from "zod";
import type { ConfigureEntry, DeviceConnector } from "../devices/types.js";

export const MAX_CONFIGURE_DEVICES = 64;

/** The configure body (spec 2.7): `devices`, each entry in the schema of the family that pairs them (its connector's). */
export function configureBody<E extends ConfigureEntry>(connector: Pick<DeviceConnector<E>, "entrySchema">) {
  return z.strictObject({
    devices: z.array(connector.entrySchema).min(1).max(MAX_CONFIGURE_DEVICES, `at most ${MAX_CONFIGURE_DEVICES} devices per request`),
  });
}
