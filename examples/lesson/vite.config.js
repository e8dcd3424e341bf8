// The lesson page, built to dist/ as static files. The example site serves
// that folder at /lesson/ (Caddyfile.example, examples/stack.mjs), beside
// the gateway at /toolgate/ and the bookmarks component at /app/.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/lesson/",
  build: { outDir: "dist", emptyOutDir: true },
});
