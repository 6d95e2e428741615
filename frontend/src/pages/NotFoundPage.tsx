import { Link } from "../components/Link";

export function NotFoundPage() {
  return (
    <main className="page">
      <h1>Page not found</h1>
      <p>
        Nothing lives at <code>{window.location.pathname}</code>. Go to the <Link href="/cluster">cluster</Link>.
      </p>
    </main>
  );
}
