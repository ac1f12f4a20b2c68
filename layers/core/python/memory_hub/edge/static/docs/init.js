// Loads the API description from this same API (no other host) and shows it with Swagger UI.
"use strict";
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: "none",
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
});
