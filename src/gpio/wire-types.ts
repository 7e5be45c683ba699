// The GPIO family's device_type codes (device sync, DESIGN B5, and the config file's gpio
// entries), declared to the one table (model/roles.ts) when this module loads.
import { declareWireTypes, typed, type Role } from "../model/roles.js";

export const GPIO = "gpio";

declareWireTypes(GPIO, [
  { code: 40, role: "input", label: "GPIO input" },
  { code: 41, role: "switch", label: "GPIO output" },
]);

/** A GPIO line's role with the device_type device sync publishes for it. */
export function gpioTyped(role: Role): { role: Role; device_type: number } {
  return typed(role, GPIO);
}
