/** A labelled progress bar; without a fraction it is indeterminate (a stage with no measure). */
export function ProgressBar({ label, fraction, text }: { label: string; fraction: number | null; text: string }) {
  return (
    <div className="progress">
      <progress aria-label={label} max={1} value={fraction ?? undefined} />
      <span className="progress-text">{text}</span>
    </div>
  );
}
