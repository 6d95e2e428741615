/**
 * Previous / Next over a list the API pages by keyset. `cursors[i]` is the `after` of page i
 * (the last one is the page on screen); `next` is the cursor after it, undefined while loading.
 */
export function CursorPager({
  label,
  cursors,
  next,
  onCursors,
}: {
  label: string;
  cursors: ReadonlyArray<string | null>;
  next: string | null | undefined;
  onCursors: (cursors: Array<string | null>) => void;
}) {
  if (cursors.length <= 1 && !next) return null;
  return (
    <nav className="pager" aria-label={label}>
      <button type="button" className="button plain" disabled={cursors.length <= 1} onClick={() => onCursors(cursors.slice(0, -1))}>
        Previous page
      </button>
      <button type="button" className="button plain" disabled={!next} onClick={() => next && onCursors([...cursors, next])}>
        Next page
      </button>
    </nav>
  );
}
