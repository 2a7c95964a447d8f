// The OpenAPI viewer: Swagger UI (from swagger-ui-dist, served locally) over the data API's
// /openapi.json and the broadcast API's document, switched by the top bar.
import { nav, loadConfig } from "./common.js";

nav("docs");
const ui = window.SwaggerUIBundle({
  urls: [
    { url: "/openapi.json", name: "Data API" },
    { url: "/docs/broadcast/openapi.json", name: "Broadcast API" },
  ],
  "urls.primaryName": new URLSearchParams(location.search).get("api") === "broadcast" ? "Broadcast API" : "Data API",
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [window.SwaggerUIBundle.presets.apis, window.SwaggerUIStandalonePreset],
  layout: "StandaloneLayout",
  // Swagger UI would otherwise ask an online validator about the document.
  validatorUrl: null,
});
window.ui = ui;
loadConfig().then((cfg) => {
  if (cfg.router) document.getElementById("router-url").innerHTML = `<code>${cfg.router}</code>`;
}).catch(() => {});
