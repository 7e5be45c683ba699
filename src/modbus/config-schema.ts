// The Modbus family's config block: the device configuration object of spec 2.7 / DESIGN
// B5 (the configure endpoint's entries and `devices:` in the config file, so both validate
// the same way) and `rtu_ports`. config/schema.ts composes these blocks into the file's
// schema; nothing outside src/modbus/ names the partner's mb_* fields.
import { z } from "zod";

export const checkWriteSchema = z.strictObject({
  reg_cmd_id: z.number().int().describe("The partner's id of this check write"),
  reg_fun: z
    .literal(6, { error: "only function 6 (write single register) is supported" })
    .describe("Modbus function: 6, write single register"),
  reg_reg: z.number().int().min(0).max(65535).describe("Register address"),
  reg_value: z.number().int().min(-32768).max(65535).describe("Value written (negative: 16-bit two's complement)"),
});

const base = {
  device_id: z.string().min(1).max(128).describe("The device's id, unique on the gateway"),
  device_type: z.literal("modbus", { error: 'device_type must be "modbus"' }).describe("Always modbus"),
  device_name: z.string().max(128).optional().describe("A name shown in device sync and on the status page"),
  device_integration: z
    .string()
    .regex(/^[^/\s]+\/[A-Za-z0-9._-]+$/, "must be <organization_id>/<integration name>")
    .describe("<organization_id>/<profile>: the profile that reads the device (docs/configuration.md#devices-and-profiles)"),
  mb_device_type: z
    .union([z.literal(1), z.literal(2), z.literal(3), z.literal(99)])
    .describe("The partner's device kind: 1 meter, 2 solar inverter, 3 storage inverter, 99 others (the profile decides)"),
  mb_check_write: z.array(checkWriteSchema).max(64).optional().describe("Registers written once when the device is configured"),
  rated_power_w: z
    .union(
      [
        z.number().positive("must be > 0").max(1e7, "is too large"),
        z.array(z.number().min(0, "must not be negative").max(1e7, "is too large")).min(1).max(64),
      ],
      {
        error: "must be a number of watts or an array of watts, one per coil",
      },
    )
    .optional()
    .describe(
      "Rated load a switch carries (W): one number, or one per coil of a multi-coil relay; estimates a shed without a grid meter. A battery whose profile reads no maximum power takes one number here as its nameplate",
    ),
  shed_priority: z
    .number()
    .int("must be an integer 0..1000")
    .min(0, "must be 0..1000")
    .max(1000, "must be 0..1000")
    .optional()
    .describe("Shed order among loads: lower first, then device_id; default 100 (PV 200)"),
};

const rtuDevice = z.strictObject({
  ...base,
  mb_type: z.literal(1).describe("1: Modbus RTU (RS-485), 2: Modbus TCP"),
  mb_slave_id: z.number().int().min(1).max(247).describe("Modbus unit id"),
  mb_baud: z.number().int().min(300).max(921600).describe("RTU: the baud, the same for every device of the port"),
  mb_rtu_no: z.number().int().min(0).describe("RTU: the port, a key of rtu_ports"),
  mb_ip: z.string().optional(),
  mb_port: z.number().int().optional(),
});

const tcpDevice = z.strictObject({
  ...base,
  mb_type: z.literal(2).describe("1: Modbus RTU (RS-485), 2: Modbus TCP"),
  mb_ip: z
    .union([z.ipv4(), z.ipv6(), z.string().regex(/^[A-Za-z0-9.-]+$/, "must be an IP address or host name")])
    .describe("TCP: the device's address or host name"),
  mb_port: z.number().int().min(1).max(65535).describe("TCP: the port, usually 502"),
  // A gateway behind a TCP bridge still needs a unit id; default 1 as most TCP devices use.
  mb_slave_id: z.number().int().min(0).max(255).default(1),
  mb_baud: z.number().int().optional(),
  mb_rtu_no: z.number().int().optional(),
});

export const deviceConfigSchema = z.discriminatedUnion("mb_type", [rtuDevice, tcpDevice]);
export type DeviceConfig = z.infer<typeof deviceConfigSchema>;
export type CheckWrite = z.infer<typeof checkWriteSchema>;

/** Integration name of a device: the part after "<organization_id>/"; it selects the profile. */
export function integrationName(d: Pick<DeviceConfig, "device_integration">): string {
  return d.device_integration.slice(d.device_integration.indexOf("/") + 1);
}

/** Organization of a device: the part of device_integration before the "/". */
export function organizationOf(d: Pick<DeviceConfig, "device_integration">): string {
  return d.device_integration.slice(0, d.device_integration.indexOf("/"));
}

/**
 * An RTU port: its device path, or the path with its line settings. The plain string
 * means 9600 baud 8N1. The baud is the line's until a device is configured on it: the
 * devices of one port share one baud (their mb_baud).
 */
const rtuPortObject = z.strictObject({
  path: z.string().min(1).describe("The serial device, e.g. /dev/ttyUSB0"),
  baud: z
    .number()
    .int()
    .min(300)
    .max(921600)
    .default(9600)
    .describe("The line's baud until a device is configured on the port; then its devices' mb_baud"),
  parity: z.enum(["none", "even", "odd"]).default("none").describe("Parity (8 data bits always)"),
  stop_bits: z
    .union([z.literal(1), z.literal(2)], { error: "must be 1 or 2" })
    .default(1)
    .describe("Stop bits"),
});
export type RtuPortConfig = z.output<typeof rtuPortObject>;
const rtuPort = z.union(
  [
    z
      .string()
      .min(1)
      .transform((path): RtuPortConfig => ({ path, baud: 9600, parity: "none", stop_bits: 1 })),
    rtuPortObject,
  ],
  { error: "must be a serial device path or { path, baud, parity, stop_bits }" },
);

/** The config file's `rtu_ports`: the RS-485 ports of the Modbus family, by the number its devices name. */
export const rtuPortsSchema = z
  .record(z.string().regex(/^\d+$/, "keys are RTU port numbers"), rtuPort)
  .default({})
  .describe("RS-485 ports by the mb_rtu_no devices use: a device path (9600 8N1) or { path, baud, parity, stop_bits }");

/** The config file's `devices`: the Modbus family's devices, each in the configure request's form. */
export const modbusDevicesSchema = z
  .array(deviceConfigSchema)
  .default([])
  .describe(
    "Modbus devices in the configure request's form, applied at start when changed; the partner configures them through the API otherwise",
  );

/** The device ids the `devices` block declares, by config path: what the one device_id check above the families (config/device-ids.ts) reads of it. */
export function modbusDeclaredIds(cfg: { devices: ReadonlyArray<{ device_id: string }> }) {
  return cfg.devices.map((d, i) => ({ device_id: d.device_id, family: "modbus", where: `devices[${i}]` }));
}
