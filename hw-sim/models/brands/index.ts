// The brand device models (DESIGN B9), each written from its manufacturer's register
// document: the hybrid inverters with their battery and the meters.
import type { BrandSpec } from "../../scenario.js";
import type { SiteModel } from "../../site-model.js";
import type { SimDevice } from "../device.js";
import { SungrowSh } from "./sungrow-sh.js";
import { HuaweiSun2000 } from "./huawei-sun2000.js";
import { SmaStorage } from "./sma-storage.js";
import { SolarEdgeStorEdge } from "./solaredge-storedge.js";
import { GoodweEt } from "./goodwe-et.js";
import { VictronGx } from "./victron-gx.js";
import { DeyeHybrid } from "./deye-hybrid.js";
import { Sdm120, Sdm72 } from "./eastron.js";
import { Em24 } from "./em24.js";

export function buildBrandDevices(spec: BrandSpec, site: SiteModel): SimDevice[] {
  switch (spec.model) {
    case "sungrow-sh":
      return [new SungrowSh(spec, site)];
    case "huawei-sun2000":
      return [new HuaweiSun2000(spec, site)];
    case "sma-storage":
      return [new SmaStorage(spec, site)];
    case "solaredge-storedge":
      return [new SolarEdgeStorEdge(spec, site)];
    case "goodwe-et":
      return [new GoodweEt(spec, site)];
    case "victron-gx": {
      const gx = new VictronGx(spec, site);
      return [gx, gx.vebus];
    }
    case "deye-hybrid":
      return [new DeyeHybrid(spec, site)];
    case "sdm72":
      return [new Sdm72(spec, site)];
    case "sdm120":
      return [new Sdm120(spec, site)];
    case "em24":
      return [new Em24(spec, site)];
  }
}
