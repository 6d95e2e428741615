/**
 * A page's, panel's or form's error, announced to screen readers; nothing when there is none.
 * With `onRetry`, a Retry button loads again (disabled while `retrying`).
 */
export function ErrorAlert({ message, onRetry, retrying = false }: { message: string | null; onRetry?: () => void; retrying?: boolean }) {
  if (message === null) return null;
  return (
    <p className={onRetry ? "alert alert-retry" : "alert"} role="alert">
      <span>{message}</span>
      {onRetry && (
        <button type="button" className="button plain small" disabled={retrying} onClick={onRetry}>
          {retrying ? "Retrying…" : "Retry"}
        </button>
      )}
    </p>
  );
}
