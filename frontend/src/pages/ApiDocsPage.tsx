import { useEffect, useRef, useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import { fetchOpenApiDocument } from "../hooks/useOpenApi";

interface ApiDocsPageProps {
  client: ApiClient;
  token: string;
  onUnauthorized: (err: ApiError) => void;
}

/**
 * The manager's interactive API docs (Swagger UI) at /api/docs. The schema is fetched with the
 * token like any API call, and every "Try it out" request carries it too, so the docs need no
 * open /openapi.json. Swagger UI is bundled (no CDN) and loaded with this page only.
 */
export function ApiDocsPage({ client, token, onUnauthorized }: ApiDocsPageProps) {
  const container = useRef<HTMLDivElement>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);

  useEffect(() => {
    const controller = new AbortController();
    const load = async () => {
      const [schema, bundle] = await Promise.all([
        fetchOpenApiDocument(client, controller.signal),
        import("swagger-ui-dist/swagger-ui-bundle.js"),
        import("swagger-ui-dist/swagger-ui.css"),
      ]);
      if (controller.signal.aborted || !container.current) return;
      bundle.default({
        domNode: container.current,
        spec: schema,
        deepLinking: false,
        // The token goes in a header, never in a URL Swagger UI shows or keeps.
        requestInterceptor: (request) => {
          request.headers = { ...request.headers, Authorization: `Bearer ${token}` };
          return request;
        },
      });
      setLoading(false);
    };
    load().catch((err: unknown) => {
      if (controller.signal.aborted) return;
      if (isUnauthorized(err)) onUnauthorized(err);
      else setError(errorMessage(err));
      setLoading(false);
    });
    return () => controller.abort();
  }, [client, token, onUnauthorized]);

  useSwaggerDarkMode();

  return (
    <main className="page api-docs">
      <h1>API</h1>
      <p>
        Every route of the manager's REST API. Requests made here send your API token in the{" "}
        <code>Authorization</code> header; the schema itself is <code>GET /api/openapi.json</code>.
      </p>
      {loading && <p className="empty">Loading…</p>}
      {error && (
        <p className="error" role="alert">
          Could not load the API schema: {error}
        </p>
      )}
      <div ref={container} className="swagger-panel" data-testid="swagger-ui" />
    </main>
  );
}

/**
 * Swagger UI keeps its own dark palette under html.dark-mode: on while this page shows the dark
 * theme (styles.css deepens the colours it keeps in either theme to AA contrast).
 */
function useSwaggerDarkMode() {
  useEffect(() => {
    const root = document.documentElement;
    const follow = () => root.classList.toggle("dark-mode", root.dataset.theme === "dark");
    follow();
    const observer = new MutationObserver(follow);
    observer.observe(root, { attributes: true, attributeFilter: ["data-theme"] });
    return () => {
      observer.disconnect();
      root.classList.remove("dark-mode");
    };
  }, []);
}
