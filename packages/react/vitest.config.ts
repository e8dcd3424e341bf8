import { defineConfig } from "vitest/config";

export default defineConfig({
  esbuild: { jsx: "automatic" },
  test: {
    environment: "jsdom",
    include: ["test/**/*.test.{ts,tsx}"],
    // The elements are the gateway's files as they are: Node loads them, not
    // Vite (which would look for the source map marked.js names and is not vendored).
    server: { deps: { external: [/\/dist\/elements\//, /\/internal\/web\//] } },
  },
});
