// Generates the typed c2 client from the committed openapi/openapi.json into src/c2/generated
// and copies the hand-written event-stream module of clients/typescript beside it, so the app
// talks to c2 only through these two (both gitignored here; clients/typescript owns them).
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createClient } from "@hey-api/openapi-ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const out = resolve(root, "src/c2");
mkdirSync(out, { recursive: true });
await createClient({
  input: resolve(root, "../openapi/openapi.json"),
  output: { path: resolve(out, "generated"), importFileExtension: ".js" },
  plugins: ["@hey-api/client-fetch", "@hey-api/typescript", "@hey-api/sdk"],
  logs: { level: "warn" },
});
copyFileSync(resolve(root, "../clients/typescript/src/events.ts"), resolve(out, "events.ts"));
