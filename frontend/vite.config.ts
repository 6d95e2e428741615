import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { brotliCompress, constants, gzip } from "node:zlib";
import { defineConfig, type Plugin } from "vite";
import react from "@vitejs/plugin-react";

// The manager serves the built dashboard at / and the API on the same origin,
// so in development we proxy the same paths to a locally running manager.
const manager = "http://127.0.0.1:8000";

const brotli = promisify(brotliCompress);
const gzipped = promisify(gzip);
// Text assets worth compressing; fonts and images are compressed already.
const COMPRESSIBLE = /\.(js|mjs|css|svg|json|txt|wasm)$/;

/**
 * Writes each text asset's Brotli (best quality) and gzip copies beside it: assets/x.js.br and
 * assets/x.js.gz. The manager sends the copy a browser takes (backend/dashboard.py), so no
 * request pays for compressing, and Brotli needs no Python package. Only copies smaller than
 * the file are kept; index.html is gzipped by the manager as it goes (it is small, and never
 * cached).
 */
function precompress(): Plugin {
  return {
    name: "populace-precompress",
    apply: "build",
    async writeBundle(options, bundle) {
      const dir = options.dir ?? "dist";
      const names = Object.keys(bundle).filter((name) => name.startsWith("assets/") && COMPRESSIBLE.test(name));
      await Promise.all(
        names.map(async (name) => {
          const path = join(dir, name);
          const data = await readFile(path);
          if (data.length < 1024) return;
          const [br, gz] = await Promise.all([
            brotli(data, { params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: data.length } }),
            gzipped(data, { level: 9 }),
          ]);
          if (br.length < data.length) await writeFile(`${path}.br`, br);
          if (gz.length < data.length) await writeFile(`${path}.gz`, gz);
        }),
      );
    },
  };
}

export default defineConfig({
  base: "/",
  plugins: [react(), precompress()],
  server: {
    proxy: {
      "/api": { target: manager, changeOrigin: true },
      "/healthz": { target: manager, changeOrigin: true },
      "/ws": { target: manager, changeOrigin: true, ws: true },
    },
  },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // Swagger UI (the API docs page's own chunk, loaded there only) is 1.5 MB by itself.
    chunkSizeWarningLimit: 1600,
  },
});
