// Generates the typed client (types, SDK functions, fetch client) from the committed document.
// C2_OPENAPI / C2_CLIENT_OUT let the test suite generate into a scratch folder.
export default {
  input: process.env.C2_OPENAPI ?? "../../openapi/openapi.json",
  output: {
    path: process.env.C2_CLIENT_OUT ?? "src/generated",
    importFileExtension: ".js",
  },
  plugins: ["@hey-api/client-fetch", "@hey-api/typescript", "@hey-api/sdk"],
};
