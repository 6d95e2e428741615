import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The manager serves the built dashboard at / and the API on the same origin,
// so in development we proxy the same paths to a locally running manager.
const manager = "http://127.0.0.1:8000";

export default defineConfig({
  base: "/",
  plugins: [react()],
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
  },
});
