// The fields every non-Modbus family's config block gives its devices the same way (Zigbee
// devices, GPIO lines): one id namespace, a display name, the load a device switches and
// its shed order. Each family's block (zigbee/config-schema.ts, gpio/config-schema.ts)
// takes them from here.
import { z } from "zod";

export const deviceId = z.string().min(1).max(128).describe("The device's id; one namespace with devices, zigbee and gpio");
export const deviceName = z.string().max(128).optional().describe("A name shown in device sync and on the status page");
export const ratedPower = z
  .number()
  .positive("must be > 0")
  .max(1e7, "is too large")
  .describe("The load the device switches (W): what a shed removes when it switches the device off");
export const shedPriority = z
  .number()
  .int("must be an integer 0..1000")
  .min(0, "must be 0..1000")
  .max(1000, "must be 0..1000")
  .describe("Shed order among loads: lower first, then device_id; default 100");
