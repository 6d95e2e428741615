// Swagger UI's self-contained browser bundle (its own React inside), which the API docs page
// loads as a chunk of its own; @types/swagger-ui-dist describes its API.
declare module "swagger-ui-dist/swagger-ui-bundle.js" {
  import type { SwaggerUIBundle } from "swagger-ui-dist";
  const bundle: SwaggerUIBundle;
  export default bundle;
}
