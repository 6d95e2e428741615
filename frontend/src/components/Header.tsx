import { type MouseEvent, useEffect, useState } from "react";
import type { ApiInfo } from "../api/types";
import { Link } from "./Link";
import { ThemeSwitch } from "./ThemeSwitch";

interface HeaderProps {
  path: string;
  signedIn: boolean;
  info: ApiInfo | null;
  onSignOut: () => void;
}

// The one dashboard page under /api: the manager serves the dashboard for exactly this path.
const API_DOCS = "/api/docs";

const NAV: ReadonlyArray<{ href: string; label: string; matches: (path: string) => boolean }> = [
  { href: "/cluster", label: "Cluster", matches: (p) => p === "/" || p === "/cluster" },
  { href: "/populations", label: "Populations", matches: (p) => p.startsWith("/populations") || p.startsWith("/agents") },
  { href: "/simulations", label: "Simulations", matches: (p) => p.startsWith("/simulations") },
  { href: "/sweeps", label: "Sweeps", matches: (p) => p.startsWith("/sweeps") },
  { href: API_DOCS, label: "API", matches: (p) => p === API_DOCS },
];

/** Moves focus to the page's <main>, past the header's links (WCAG 2.4.1). */
function skipToContent(event: MouseEvent<HTMLAnchorElement>) {
  const main = document.querySelector<HTMLElement>("main");
  if (!main) return;
  event.preventDefault();
  main.tabIndex = -1;
  main.focus();
}

/**
 * The top bar. On a phone (styles.css, up to 640 px) it is one slim row: the brand and a Menu
 * button that opens the links, the theme and sign-out below it; any navigation closes it.
 */
export function Header({ path, signedIn, info, onSignOut }: HeaderProps) {
  const [menuOpen, setMenuOpen] = useState(false);
  useEffect(() => setMenuOpen(false), [path]);

  return (
    <header className={`app-header${signedIn ? " collapsible" : ""}`} data-menu-open={menuOpen ? "true" : "false"}>
      <a className="skip-link" href="#main" onClick={skipToContent}>
        Skip to content
      </a>
      <Link href="/cluster" className="brand">
        populace
      </Link>
      {signedIn && (
        <button type="button" className="menu-toggle" aria-expanded={menuOpen} aria-controls="app-menu" onClick={() => setMenuOpen((open) => !open)}>
          Menu
        </button>
      )}
      <div id="app-menu" className="app-menu">
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
          <ThemeSwitch />
          {signedIn && (
            <button type="button" className="button secondary" onClick={onSignOut}>
              Sign out
            </button>
          )}
        </div>
      </div>
    </header>
  );
}
