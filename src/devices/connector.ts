// Pairing and check writes through the Modbus engine (DESIGN B5): open the transport and
// read the profile's identity (PAIRING_FAILED when nothing answers), then write each
// mb_check_write with function 6 and read it back (REGISTRY_WRITE_FAILED on any failure).
import type { CheckWrite, DeviceConfig } from "../config/device-schema.js";
import { SitegateError, errorMessage } from "../errors.js";
import { PRIORITY } from "../modbus/bus.js";
import type { DeviceConnector, DeviceDescriptor } from "./types.js";
import type { DriverPool } from "./pool.js";

export class ModbusConnector implements DeviceConnector {
  constructor(private readonly pool: DriverPool) {}

  async pair(config: DeviceConfig): Promise<DeviceDescriptor> {
    let driver;
    try {
      driver = this.pool.candidate(config);
    } catch (e) {
      throw new SitegateError("PAIRING_FAILED", errorMessage(e), { cause: e });
    }
    try {
      const d = await driver.pair(PRIORITY.pairing);
      this.pool.adopt(config, driver);
      return d;
    } catch (e) {
      this.pool.reject(config, driver);
      throw new SitegateError("PAIRING_FAILED", `device did not respond as ${driver.profile.name}: ${errorMessage(e)}`, { cause: e });
    }
  }

  async checkWrites(config: DeviceConfig, writes: CheckWrite[]): Promise<void> {
    const driver = this.pool.driverFor(config);
    for (const w of writes) {
      const value = w.reg_value < 0 ? w.reg_value + 0x10000 : w.reg_value;
      const what = `check write ${w.reg_cmd_id} (register ${w.reg_reg} = ${w.reg_value})`;
      try {
        await driver.bus.writeRegisters(driver.unit, w.reg_reg, [value], { priority: PRIORITY.pairing, timeoutMs: driver.timeoutMs, fn: 6 });
      } catch (e) {
        throw new SitegateError("REGISTRY_WRITE_FAILED", `${what} failed: ${errorMessage(e)}`, { cause: e, details: [{ path: `reg_cmd_id:${w.reg_cmd_id}`, message: errorMessage(e) }] });
      }
      let back: number[];
      try {
        back = await driver.bus.read(driver.unit, "holding", w.reg_reg, 1, { priority: PRIORITY.pairing, timeoutMs: driver.timeoutMs });
      } catch (e) {
        throw new SitegateError("REGISTRY_WRITE_FAILED", `${what}: read-back failed: ${errorMessage(e)}`, { cause: e, details: [{ path: `reg_cmd_id:${w.reg_cmd_id}`, message: errorMessage(e) }] });
      }
      if (back[0] !== value) {
        throw new SitegateError("REGISTRY_WRITE_FAILED", `${what} did not stick: read back ${back[0]}`, { details: [{ path: `reg_cmd_id:${w.reg_cmd_id}`, message: `read back ${back[0]}` }] });
      }
    }
  }
}
