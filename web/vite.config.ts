// Builds the app into the Python package (api/web_dist), where api/routes/web.py serves it.
// Hashed asset names are cached for a year; nothing is inlined (the CSP allows no inline
// script or style), and no module-preload polyfill is emitted.
import { defineConfig } from "vite";

export default defineConfig({
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: {
    outDir: "../api/web_dist",
    emptyOutDir: true,
    assetsDir: "assets",
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    target: "es2022",
    reportCompressedSize: false,
  },
});
