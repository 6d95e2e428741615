import { useEffect, useRef } from "react";

/** One problem of the summary: a link to the field it concerns (or a "line N" button in a file). */
export interface SummaryItem {
  text: string;
  /** The id of the control to focus; null when the problem is not at a field of the form. */
  targetId?: string | null;
  /** Instead of a link: a button with this label that selects the place (a line in an editor). */
  select?: { label: string; onSelect: () => void };
}

/** Brings a form control into view and focuses it (a summary's link). */
export function focusControl(id: string): void {
  const target = document.getElementById(id);
  if (!target) return;
  target.scrollIntoView({ block: "center" });
  target.focus({ preventScroll: true });
}

/**
 * The problems of a refused submit at the top of the form, each linking to its field. It takes
 * the focus on each new refusal (`attempt` changes), so a keyboard or screen-reader user, or a
 * phone's screen far below the first field, lands on it, and scrolls into view with it.
 */
export function ErrorSummary({ title, items, attempt, className }: { title: string; items: readonly SummaryItem[]; attempt: number; className?: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (attempt > 0 && items.length > 0 && box.current) {
      box.current.scrollIntoView({ block: "start" });
      box.current.focus({ preventScroll: true });
    }
    // Focus moves once per refusal, not on every edit that changes the items.
  }, [attempt]);
  if (items.length === 0) return null;
  return (
    <div ref={box} className={`alert error-summary${className ? ` ${className}` : ""}`} role="alert" tabIndex={-1} data-testid="error-summary">
      <p className="error-summary-title">{title}</p>
      <ul>
        {items.map((item, i) => (
          <li key={i}>
            {item.select ? (
              <>
                <button type="button" className="link-button" onClick={item.select.onSelect}>
                  {item.select.label}
                </button>
                : {item.text}
              </>
            ) : item.targetId ? (
              <a
                href={`#${item.targetId}`}
                onClick={(event) => {
                  event.preventDefault();
                  focusControl(item.targetId as string);
                }}
              >
                {item.text}
              </a>
            ) : (
              item.text
            )}
          </li>
        ))}
      </ul>
    </div>
  );
}
