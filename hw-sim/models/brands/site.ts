// The brands site (DESIGN B9), built from the brand table (./index.ts): every brand device
// where its row places it. The ones with RS-485 share one 9600-baud 8N1 bus (a socat pty
// pair, line timing on), as the full-site bench polls them; the network devices (SMA, the
// Victron GX, the EM24 Ethernet) speak Modbus over the network, each on its own TCP port,
// as an identification reads one endpoint at a time. Each battery's own self-consumption
// covers about a seventh of the site's load, so that the seven of them together cover it.
// Unit 20 is a device no profile describes (it answers any register with its own data):
// identification must name nothing there.
// Start it with:
//   node dist/hw-sim/cli.js --scenario brands
import type { ScenarioInput } from "../../scenario.js";
import { BRANDS, type Placement } from "./index.js";

type DeviceInput = NonNullable<ScenarioInput["ports"]>[number]["devices"][number];

/** A placement of the table as a scenario device of its model. */
function device(model: string, p: Placement): DeviceInput {
  const { bus: _bus, shared_unit: _shared, profile: _profile, ...keys } = p;
  return { ...keys, model } as DeviceInput;
}

/** Every device the brands site has, with its model and placement. */
export function brandPlacements(): Array<{ model: string; kind: "battery" | "meter"; placement: Placement; device: DeviceInput }> {
  return BRANDS.flatMap((r) =>
    r.site.map((placement) => ({ model: r.model, kind: r.kind, placement, device: device(r.model, placement) })),
  );
}

export const BRANDS_SCENARIO = "brands";

export function brandsScenario(): ScenarioInput {
  const all = brandPlacements();
  return {
    seed: 3,
    control: { listen: "127.0.0.1:15082" },
    site: { base_load_w: 3500, load_noise_pct: 2, pv_irradiance: 0.4 },
    ports: [
      {
        kind: "rtu",
        path: "./var/ttyBRANDS", // the simulator's end of the pty pair
        peer: "./var/ttyBRANDSGW", // the end the gateway opens (rtu_ports in its config)
        baud: 9600,
        parity: "none",
        stop_bits: 1,
        turnaround_ms: 5,
        devices: [
          ...all.filter((d) => d.placement.bus === "rtu").map((d) => d.device),
          { unit: 20, model: "unknown", name: "stranger" }, // answers everything, matches no profile
        ],
      },
      ...all
        .filter((d) => d.placement.bus === "tcp")
        .map((d, i) => ({ kind: "tcp" as const, listen: `127.0.0.1:${15022 + i}`, devices: [d.device] })),
    ],
  };
}
