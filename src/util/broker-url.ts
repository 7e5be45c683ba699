// The `url` of a broker block (fleet, zigbee): mqtts:// anywhere, plain mqtt:// only to a
// loopback host, and nothing in the URL that MQTT.js could read differently.
import { z } from "zod";
import { brokerUrlProblem } from "./loopback.js";

export const brokerUrl = z.string({ error: "must be a URL" }).superRefine((u, ctx) => {
  const problem = brokerUrlProblem(u);
  if (problem) ctx.addIssue({ code: "custom", message: problem });
});
