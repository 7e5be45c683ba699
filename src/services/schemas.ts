// The request bodies the services validate, whichever front end received them; api/
// also turns them into its OpenAPI document.
import { z } from "zod";
import { deviceConfigSchema } from "../config/device-schema.js";

export const MAX_CONFIGURE_DEVICES = 64;
export const configureBody = z.strictObject({
  devices: z.array(deviceConfigSchema).min(1).max(MAX_CONFIGURE_DEVICES, `at most ${MAX_CONFIGURE_DEVICES} devices per request`),
});
