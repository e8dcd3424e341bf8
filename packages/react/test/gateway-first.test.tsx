// A page that loaded the gateway's /client.js and /card.js before the
// package: the package's copies define nothing, the gateway's elements stay,
// and the components work with them.
import { expect, test } from "vitest";
// @ts-expect-error: plain JavaScript without declarations
import { ToolgateClient as GatewayClient } from "../../../internal/web/client.js";
// @ts-expect-error: plain JavaScript without declarations
import { ToolgateCard as GatewayCard } from "../../../internal/web/card.js";

test("the gateway's elements first, then the package: one definition each, and it works", async () => {
  expect(customElements.get("toolgate-client")).toBe(GatewayClient);
  const pkg = await import("../dist/index.js"); // would throw if it defined them again
  const { ToolgateClient: PackageClient } = await import("../dist/elements/client.js" as string);
  expect(PackageClient).not.toBe(GatewayClient); // two modules were loaded...
  expect(customElements.get("toolgate-client")).toBe(GatewayClient); // ...and the first definition stays
  expect(customElements.get("toolgate-card")).toBe(GatewayCard);

  const { mount, call } = await import("./render.js");
  function Tool() {
    pkg.useToolgateTool("t", () => "answered");
    return null;
  }
  const r = mount(
    <pkg.ToolgateClient options={null}>
      <Tool />
    </pkg.ToolgateClient>,
  );
  expect(r.client()).toBeInstanceOf(GatewayClient);
  expect(await call(r.client(), "t")).toBe("answered");
  r.unmount();
});
