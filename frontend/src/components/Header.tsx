import type { ApiInfo } from "../api/types";
import { Link } from "./Link";

interface HeaderProps {
  path: string;
  signedIn: boolean;
  info: ApiInfo | null;
  onSignOut: () => void;
}

const NAV: ReadonlyArray<{ href: string; label: string; matches: (path: string) => boolean }> = [
  { href: "/cluster", label: "Cluster", matches: (p) => p === "/" || p === "/cluster" },
  { href: "/populations", label: "Populations", matches: (p) => p.startsWith("/populations") || p.startsWith("/agents") },
  { href: "/simulations", label: "Simulations", matches: (p) => p.startsWith("/simulations") },
  { href: "/sweeps", label: "Sweeps", matches: (p) => p.startsWith("/sweeps") },
  { href: "/api/docs", label: "API", matches: (p) => p === "/api/docs" },
];

export function Header({ path, signedIn, info, onSignOut }: HeaderProps) {
  return (
    <header className="app-header">
      <Link href="/cluster" className="brand">
        populace
      </Link>
      {signedIn && (
        <nav aria-label="Main">
          <ul>
            {NAV.map((item) => (
              <li key={item.href}>
                <Link href={item.href} aria-current={item.matches(path) ? "page" : undefined}>
                  {item.label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
      )}
      <div className="header-end">
        {info?.role === "viewer" && (
          <span className="role-badge" title="Signed in with the viewer token: you can look, not change anything">
            read-only
          </span>
        )}
        {info && (
          <span className="manager-info" title="Manager version and database">
            v{info.version} · {info.database}
          </span>
        )}
        {signedIn && (
          <button type="button" className="button secondary" onClick={onSignOut}>
            Sign out
          </button>
        )}
      </div>
    </header>
  );
}
