// launchChromium starts Debian's headless Chromium for the browser tests
// (CHROMIUM overrides its path). The flags keep it off the network: this
// machine has none, and Chromium's background connections would be
// refused many at a time.
import { chromium } from "playwright-core";

export function launchChromium() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
}
