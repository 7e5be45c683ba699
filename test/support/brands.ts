// The brand devices of hw-sim/scenarios/brands.yaml for tests: the site on free ports,
// and, per battery model, how its own registers say its battery power (in the brand's
// sign, turned to positive = discharging) and whether it is in its own self-consumption
// mode. These are the simulator's reading of each manufacturer's document, kept apart
// from the gateway's profiles so that a test compares the two readings.
import { join } from "node:path";
import { loadScenario } from "../../hw-sim/scenario.js";
import { SIM_DIR } from "../../hw-sim/sim.js";
import type { ScenarioInput } from "./site.js";

export const BRANDS_YAML = join(SIM_DIR, "..", "..", "hw-sim", "scenarios", "brands.yaml");

/** Where brandsOnTcp puts the devices whose brands.yaml unit another device of the file also has. */
const MOVED: Record<string, number> = { sma: 30, em24e1: 14 };

/**
 * brands.yaml with every device on one Modbus TCP port on a free port (no socat), PV
 * off and no load noise. SMA moves from unit 3 to 30 and the EM24 Ethernet from 1 to 14
 * (the RTU bus has those units). The GX's system unit 100 answers on this shared port as
 * it would on a gateway in front of all of them; identification still names each unit by
 * its own registers.
 */
export function brandsOnTcp(): ScenarioInput {
  const sc = loadScenario(BRANDS_YAML);
  const devices = sc.ports.flatMap((p) => p.devices).map((d) => (d.name in MOVED ? { ...d, unit: MOVED[d.name] } : d));
  return {
    ...sc,
    control: { listen: "127.0.0.1:0" },
    site: { ...sc.site, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [{ kind: "tcp", listen: "127.0.0.1:0", devices }],
  };
}

type Read = (unit: number, table: "holding" | "input", address: number, count: number) => Promise<number[]>;

const s16 = (w: number) => (w >= 0x8000 ? w - 0x10000 : w);
const s32hi = (w: number[]) => {
  const u = w[0] * 0x10000 + w[1];
  return u >= 0x80000000 ? u - 0x100000000 : u;
};
const f32lo = (w: number[]) => {
  const b = Buffer.alloc(4);
  b.writeUInt16BE(w[1], 0);
  b.writeUInt16BE(w[0], 2);
  return b.readFloatBE(0);
};

export interface BatteryRegisters {
  /** The device's battery power from its own registers, W, positive = discharging. */
  powerW(read: Read, unit: number): Promise<number>;
  /** The device's own mode registers say it is in its self-consumption mode. */
  selfConsumption(read: Read, unit: number): Promise<boolean>;
}

export const BATTERY_REGISTERS: Record<string, BatteryRegisters> = {
  "sungrow-sh": {
    powerW: async (read, u) => {
      const [mag] = await read(u, "input", 13021, 1);
      const [flow] = await read(u, "input", 13000, 1);
      return flow & 2 ? -mag : mag;
    },
    selfConsumption: async (read, u) => (await read(u, "holding", 13049, 1))[0] === 0,
  },
  "huawei-sun2000": {
    powerW: async (read, u) => -s32hi(await read(u, "holding", 37765, 2)),
    selfConsumption: async (read, u) => (await read(u, "holding", 47100, 1))[0] === 0 && (await read(u, "holding", 47086, 1))[0] === 2,
  },
  "sma-storage": {
    powerW: async (read, u) => {
      const cha = await read(u, "holding", 31393, 2);
      const dis = await read(u, "holding", 31395, 2);
      return dis[0] * 0x10000 + dis[1] - (cha[0] * 0x10000 + cha[1]);
    },
    selfConsumption: async (read, u) => {
      const ctl = await read(u, "holding", 40151, 2);
      const mode = await read(u, "holding", 40236, 2);
      return ctl[0] * 0x10000 + ctl[1] !== 802 && mode[0] * 0x10000 + mode[1] === 2424;
    },
  },
  "solaredge-storedge": {
    powerW: async (read, u) => -f32lo(await read(u, "holding", 0xe174, 2)),
    selfConsumption: async (read, u) => {
      const [ctl] = await read(u, "holding", 0xe004, 1);
      const [cmd] = await read(u, "holding", 0xe00d, 1);
      return ctl === 1 || (ctl === 4 && cmd === 7);
    },
  },
  "goodwe-et": {
    powerW: async (read, u) => s32hi(await read(u, "holding", 35182, 2)),
    selfConsumption: async (read, u) => (await read(u, "holding", 47511, 1))[0] === 1,
  },
  /** The system and settings service answer on unit 100, whatever the VE.Bus unit the device is paired on. */
  "victron-gx": {
    powerW: async (read) => -s16((await read(100, "holding", 842, 1))[0]),
    selfConsumption: async (read) => (await read(100, "holding", 2902, 1))[0] !== 3,
  },
  /**
   * The three-phase SG04LP3 map, as brands.yaml has it at unit 4. Its own mode: the timer
   * off, or on with no program charging from the grid or selling and the load limit not
   * at "allow export" (selling first).
   */
  "deye-hybrid": {
    powerW: async (read, u) => s16((await read(u, "holding", 590, 1))[0]),
    selfConsumption: async (read, u) => {
      const [timer] = await read(u, "holding", 146, 1);
      if ((timer & 1) === 0) return true;
      const [limit] = await read(u, "holding", 142, 1);
      const flags = await read(u, "holding", 172, 6);
      return limit !== 0 && flags.every((f) => (f & 0x41) === 0);
    },
  },
};

/** brands.yaml as it is (the RS-485 bus on a pty, each network device on its own port), on free ports. */
export function brandsSite(): ScenarioInput {
  const sc = loadScenario(BRANDS_YAML);
  return {
    ...sc,
    control: { listen: "127.0.0.1:0" },
    ports: sc.ports.map((p) => (p.kind === "rtu" ? { ...p, path: "ttyB", peer: "ttyBGW" } : { ...p, listen: "127.0.0.1:0" })),
  };
}
