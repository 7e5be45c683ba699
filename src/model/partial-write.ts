// A device action of several writes that the device refused part-way (B4 "Closed loop":
// transactional device actions). The family that wrote it knows which steps went through;
// the error carries how to put exactly those back from the ledger's pre-event state, so
// dispatch can roll them back in the same tick without reading inside the opaque pre-state.
import { SitegateError, errorMessage, isSitegateError } from "../errors.js";
import type { PreState } from "./device.js";

export class PartialWriteError extends SitegateError {
  constructor(
    /** What was refused, e.g. "step 3 of 3 (holding 13051)". */
    readonly refused: string,
    /** How many steps the device took before it refused. */
    readonly written: number,
    /** Writes the steps already taken back to their values in `pre` (the ledger's pre-event state). */
    readonly rollback: (pre: PreState) => Promise<void>,
    cause: unknown,
  ) {
    super(
      isSitegateError(cause) ? cause.code : "MODBUS_EXCEPTION",
      `${refused} refused after ${written} step(s) were written: ${errorMessage(cause)}`,
      { cause, transient: isSitegateError(cause) && cause.transient },
    );
  }
}
