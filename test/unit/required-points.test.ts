// Every built-in profile marks `required: true` on the points its role cannot do without
// (DESIGN B9: a battery's power_w and soc_pct, PV's power_w, a meter's grid power; a
// switch's coil state), so that pairing checks them in the profile as written, not only
// through the driver's fallback. The SunSpec profile gives each role's minimum from some
// model of its own, marked required in every model that gives it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { ROLE_MINIMUM } from "../../src/modbus/device/unavailable.js";
import type { Role } from "../../src/model/roles.js";

/** What each role cannot do without, over and above the driver's minimum. */
const ROLE_NEEDS: Partial<Record<Role, readonly string[]>> = { ...ROLE_MINIMUM, switch: ["state"] };

test("each built-in fixed profile marks its role's points required", () => {
  const reg = builtinProfiles();
  const checked: string[] = [];
  for (const name of reg.names()) {
    const p = reg.get(name);
    if (p.kind !== "fixed") continue;
    const needs = ROLE_NEEDS[p.role];
    assert.ok(needs, `${name}: role ${p.role} has no list of required points here`);
    for (const metric of needs) {
      const pt: { required: boolean } | undefined = p.points.find((x) => x.metric === metric);
      assert.ok(pt, `${name} (${p.role}) has no ${metric} point`);
      assert.equal(pt.required, true, `${name} (${p.role}): ${metric} is not marked required: true`);
    }
    checked.push(`${p.role}:${name}`);
  }
  // Every built-in role is among them (a new role needs its line in ROLE_NEEDS).
  const roles = new Set(checked.map((c) => c.split(":")[0]));
  assert.deepEqual([...roles].sort(), ["battery", "meter", "switch"]);
  assert.ok(checked.length >= 14, checked.join(" "));
});

test("the SunSpec profile gives each of its roles' required points from some model it lists, marked required there", () => {
  const p = builtinProfiles().get("sunspec");
  assert.equal(p.kind, "sunspec");
  for (const rule of p.roles) {
    for (const metric of ROLE_MINIMUM[rule.role] ?? []) {
      const givers: [string, { metric: string; required: boolean }[]][] = Object.entries(p.models).filter(([, pts]) =>
        pts.some((pt) => pt.metric === metric),
      );
      assert.ok(givers.length > 0, `role ${rule.role} (models ${rule.models.join(", ")}): no model gives ${metric}`);
      for (const [id, pts] of givers)
        for (const pt of pts.filter((x) => x.metric === metric))
          assert.equal(pt.required, true, `sunspec model ${id}: ${metric} is not marked required: true`);
    }
  }
});
