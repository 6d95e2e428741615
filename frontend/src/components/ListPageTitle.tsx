import type { ConnectionStatus } from "../api/events";
import { ConnectionIndicator } from "./ConnectionIndicator";
import { Link } from "./Link";

/** A list page's title: its heading, whether live updates flow, and (for operators) the
 * button that opens the page's "New …" form, or the link to the page that has it. */
export function ListPageTitle({
  title,
  status,
  create,
}: {
  title: string;
  status: ConnectionStatus;
  /** The toggle of the create form with id `controls`; absent for read-only viewers. */
  create?: { label: string; controls: string; open: boolean; onToggle: () => void } | { label: string; href: string } | false;
}) {
  return (
    <div className="page-title">
      <h1>{title}</h1>
      <ConnectionIndicator status={status} />
      {create && "href" in create && (
        <Link className="button primary push-right" href={create.href}>
          {create.label}
        </Link>
      )}
      {create && "onToggle" in create && (
        <button type="button" className="button primary push-right" aria-expanded={create.open} aria-controls={create.controls} onClick={create.onToggle}>
          {create.label}
        </button>
      )}
    </div>
  );
}
