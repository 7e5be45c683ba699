// The words every layer shares, defined once: what a device can do (its capabilities, as
// device sync publishes them), the actions a profile writes, and the event types of
// dispatch. Config, profiles, dispatch and the front ends import them from here.

/** What device sync (B5) says a device can do. */
export const CAPABILITIES = ["telemetry", "charge", "discharge", "shed", "restore", "curtail"] as const;
export type Capability = (typeof CAPABILITIES)[number];

/** What a profile's actions are named: the capability that drives them, and `release` (back to the device's own control). */
export const ACTION_NAMES = ["charge", "discharge", "shed", "restore", "curtail", "release"] as const;
export type ActionName = (typeof ACTION_NAMES)[number];

/** The partner's event types (spec 2.3). */
export const EVENT_TYPES = ["charge", "discharge", "shed", "restore"] as const;
/** The partner's event types, and the local-only `pv_limit` (a GPIO input's `on_active`). */
export type EventType = (typeof EVENT_TYPES)[number] | "pv_limit";

/** The units an event's quantity may be given in, in W. */
export const UNITS = { w: 1, kW: 1000, MW: 1_000_000 } as const;
export type EventUnit = keyof typeof UNITS;
