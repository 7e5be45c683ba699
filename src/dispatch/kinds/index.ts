// Every event kind, by event_type. Adding a kind: its file in this folder and a line here.
import type { EventType } from "../../model/vocabulary.js";
import { chargeDischarge } from "./charge-discharge.js";
import type { EventKind } from "./kind.js";
import { pvLimit } from "./pv-limit.js";
import { restore } from "./restore.js";
import { shed } from "./shed.js";
import { SitegateError } from "../../errors.js";

const KINDS: readonly EventKind[] = [chargeDischarge, shed, restore, pvLimit];

const byType = new Map<EventType, EventKind>(KINDS.flatMap((k) => k.types.map((t) => [t, k] as const)));

export function kindOf(type: EventType): EventKind {
  const k = byType.get(type);
  if (!k) throw new SitegateError("INTERNAL", `no dispatch kind for event_type ${type}`);
  return k;
}
