import { useEffect, useRef, useState, type ReactNode } from "react";

/**
 * A table's frame that fits the page: when the table is wider than the frame it scrolls sideways,
 * a shadow on the overflowing edge says there is more, and the frame is a labelled, focusable
 * region so the keyboard can scroll it too. With `pinFirst` the first column (the row's name)
 * stays in view while the rest scrolls.
 */
export function TableScroll({
  label,
  pinFirst = false,
  className,
  children,
}: {
  /** Names the scrolling region for assistive technology, e.g. "Compared runs". */
  label: string;
  pinFirst?: boolean;
  className?: string;
  children: ReactNode;
}) {
  const ref = useRef<HTMLDivElement>(null);
  const [edges, setEdges] = useState({ left: false, right: false });

  useEffect(() => {
    const node = ref.current;
    if (!node) return;
    const measure = () => {
      const max = node.scrollWidth - node.clientWidth;
      const left = max > 1 && node.scrollLeft > 1;
      const right = max > 1 && node.scrollLeft < max - 1;
      setEdges((current) => (current.left === left && current.right === right ? current : { left, right }));
    };
    measure();
    node.addEventListener("scroll", measure, { passive: true });
    const observer = typeof ResizeObserver === "undefined" ? null : new ResizeObserver(measure);
    observer?.observe(node);
    const table = node.firstElementChild;
    if (table) observer?.observe(table);
    window.addEventListener("resize", measure);
    return () => {
      node.removeEventListener("scroll", measure);
      observer?.disconnect();
      window.removeEventListener("resize", measure);
    };
  }, []);

  const overflows = edges.left || edges.right;
  return (
    <div
      className={["table-scroll", pinFirst ? "pin-first" : "", className ?? ""].filter(Boolean).join(" ")}
      data-overflow-left={edges.left || undefined}
      data-overflow-right={edges.right || undefined}
    >
      <div
        ref={ref}
        className="table-wrap"
        role="region"
        aria-label={overflows ? `${label} (scrolls sideways)` : label}
        tabIndex={overflows ? 0 : undefined}
      >
        {children}
      </div>
    </div>
  );
}

/** A cell's text cut to one line with an ellipsis, the whole of it in a tooltip. */
export function Clip({ text, children, className }: { text: string; children?: ReactNode; className?: string }) {
  return (
    <span className={["cell-clip", className ?? ""].filter(Boolean).join(" ")} title={text}>
      {children ?? text}
    </span>
  );
}
