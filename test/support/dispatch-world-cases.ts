// Worlds of the property test (dispatch-world.ts) that also run end to end, against the
// simulator on real sockets and the whole daemon with its HTTPS API and callbacks
// (test/integration/dispatch-world-e2e.test.ts); the unit property test runs them in
// process too, so both paths judge the same world. Short windows: the end-to-end runs take
// real time. No Zigbee (that needs a broker) and no load noise.
import type { WorldSpec } from "./dispatch-world.js";

const site = { seed: 11, base_load_w: 3000, load_noise_pct: 0 };

export const E2E_WORLDS: Array<{ name: string; world: WorldSpec }> = [
  {
    name: "two batteries at SF -2 and -1, two discharges stacked by priority, the second cancelled",
    world: {
      ...site,
      irradiance: 0.3,
      meter: true,
      batteries: [
        { max_power_w: 5000, capacity_wh: 20000, soc_pct: 60, control_sf: -2 },
        { max_power_w: 3000, capacity_wh: 20000, soc_pct: 60, control_sf: -1 },
      ],
      pvs: [{ max_power_w: 6000, control_sf: 0 }],
      relays: [{ load_per_coil_w: 500, rating: "total" }],
      plugs: [],
      thermostats: [],
      events: [
        { type: "discharge", quantity_kw: 3, submit_s: 1, start_s: 4, duration_s: 16, priority: 1, mandatory: false },
        { type: "discharge", quantity_kw: 6, submit_s: 1, start_s: 6, duration_s: 14, priority: 5, mandatory: false, cancel_s: 15 },
      ],
    },
  },
  {
    name: "a charge at SF 1 and, beside it, a shed a metered relay covers",
    world: {
      ...site,
      irradiance: 0.5,
      meter: true,
      batteries: [{ max_power_w: 4000, capacity_wh: 20000, soc_pct: 40, control_sf: 1 }],
      pvs: [{ max_power_w: 6000, control_sf: -2 }],
      relays: [{ load_per_coil_w: 500, rating: "per_coil" }],
      plugs: [],
      thermostats: [],
      events: [
        { type: "charge", quantity_kw: 2, submit_s: 1, start_s: 4, duration_s: 16, priority: 2, mandatory: false },
        { type: "shed", quantity_kw: 1.5, submit_s: 1, start_s: 6, duration_s: 14, priority: 3, mandatory: true },
      ],
    },
  },
  {
    name: "without a meter: a shed of a rated relay ended by a restore, a discharge beside them",
    world: {
      ...site,
      irradiance: 0,
      meter: false,
      batteries: [{ max_power_w: 5000, capacity_wh: 20000, soc_pct: 70, control_sf: 0 }],
      pvs: [],
      relays: [{ load_per_coil_w: 400, rating: "total" }],
      plugs: [],
      thermostats: [],
      events: [
        { type: "shed", quantity_kw: 1, submit_s: 1, start_s: 4, duration_s: 16, priority: 5, mandatory: false },
        { type: "restore", quantity_kw: 0, submit_s: 1, start_s: 12, duration_s: 6, priority: 5, mandatory: false },
        { type: "discharge", quantity_kw: 2, submit_s: 1, start_s: 4, duration_s: 12, priority: 5, mandatory: false },
      ],
    },
  },
];
