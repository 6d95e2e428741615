/** A page's or form's error, announced to screen readers; nothing when there is none. */
export function ErrorAlert({ message }: { message: string | null }) {
  if (message === null) return null;
  return (
    <p className="alert" role="alert">
      {message}
    </p>
  );
}
