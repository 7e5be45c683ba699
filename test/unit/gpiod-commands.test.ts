// The gpiod tools' command lines (libgpiod v1, as Debian bookworm ships them) and the
// parsing of their output; the chip found by label on a Pi 4 and a Pi 5.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  gpiogetArgs,
  gpiomonArgs,
  gpiosetArgs,
  parseGpiodetect,
  parseGpioget,
  parseGpiomonLine,
  resolveChip,
} from "../../src/gpio/gpiod-commands.js";
import { isSitegateError } from "../../src/errors.js";

const PI4 = "gpiochip0 [pinctrl-bcm2711] (58 lines)\ngpiochip1 [raspberrypi-exp-gpio] (8 lines)\n";
const PI5 =
  "gpiochip0 [gpio-brcmstb@107d508500] (32 lines)\ngpiochip1 [gpio-brcmstb@107d508520] (4 lines)\ngpiochip4 [pinctrl-rp1] (54 lines)\n";

test("gpiodetect output is parsed and a chip is found by name, path or label", () => {
  assert.deepEqual(parseGpiodetect(PI4), [
    { name: "gpiochip0", label: "pinctrl-bcm2711", lines: 58 },
    { name: "gpiochip1", label: "raspberrypi-exp-gpio", lines: 8 },
  ]);
  assert.equal(resolveChip("pinctrl-bcm2711", parseGpiodetect(PI4)), "gpiochip0");
  assert.equal(resolveChip("pinctrl-rp1", parseGpiodetect(PI5)), "gpiochip4");
  assert.equal(resolveChip("gpiochip1", parseGpiodetect(PI4)), "gpiochip1");
  assert.equal(resolveChip("/dev/gpiochip0", parseGpiodetect(PI4)), "/dev/gpiochip0");
  assert.throws(
    () => resolveChip("pinctrl-rp1", parseGpiodetect(PI4)),
    (e) => isSitegateError(e, "CONFIG_INVALID") && /gpiochip0 \[pinctrl-bcm2711\]/.test(e.message),
  );
});

test("gpioset holds the line until signalled; gpiomon prints offset and edge per line; gpioget reads levels", () => {
  assert.deepEqual(gpiosetArgs("gpiochip0", 27, 1), ["--mode=signal", "gpiochip0", "27=1"]);
  assert.deepEqual(gpiomonArgs("gpiochip4", [17, 22]), ["--line-buffered", "--format=%o %e", "gpiochip4", "17", "22"]);
  assert.deepEqual(gpiogetArgs("gpiochip0", [17, 22]), ["gpiochip0", "17", "22"]);
  assert.deepEqual(
    [...parseGpioget("0 1\n", [17, 22])],
    [
      [17, 0],
      [22, 1],
    ],
  );
  assert.throws(() => parseGpioget("0\n", [17, 22]));
  assert.deepEqual(parseGpiomonLine("17 1"), { line: 17, value: 1 });
  assert.deepEqual(parseGpiomonLine("22 0\n"), { line: 22, value: 0 });
  assert.equal(parseGpiomonLine("event: RISING EDGE offset: 17"), undefined);
});
