import type { ReactNode } from "react";

/** A labelled control with its hint and the manager's messages for it right below, tied by aria-describedby. */
export function Field({
  id,
  label,
  errors,
  hint,
  children,
}: {
  id: string;
  label: string;
  errors: readonly string[] | undefined;
  hint?: string | undefined;
  children: (props: { id: string; "aria-invalid": boolean; "aria-describedby": string | undefined }) => ReactNode;
}) {
  const described = [hint ? `${id}-hint` : null, errors?.length ? `${id}-error` : null].filter(Boolean).join(" ") || undefined;
  return (
    <div className={errors?.length ? "field has-error" : "field"}>
      <label htmlFor={id}>{label}</label>
      {children({ id, "aria-invalid": !!errors?.length, "aria-describedby": described })}
      {hint && (
        <p id={`${id}-hint`} className="field-hint">
          {hint}
        </p>
      )}
      {errors?.length ? (
        <p id={`${id}-error`} className="field-error">
          {errors.join("; ")}
        </p>
      ) : null}
    </div>
  );
}

/** A checkbox with its hint and the manager's messages. */
export function Check({
  id,
  label,
  checked,
  errors,
  hint,
  onChange,
}: {
  id: string;
  label: string;
  checked: boolean;
  errors: readonly string[] | undefined;
  hint?: string | undefined;
  onChange: (value: boolean) => void;
}) {
  const described = [hint ? `${id}-hint` : null, errors?.length ? `${id}-error` : null].filter(Boolean).join(" ") || undefined;
  return (
    <div className={errors?.length ? "field has-error" : "field"}>
      <label className="checkbox">
        <input id={id} type="checkbox" checked={checked} aria-invalid={!!errors?.length} aria-describedby={described} onChange={(e) => onChange(e.target.checked)} />
        {label}
      </label>
      {hint && (
        <p id={`${id}-hint`} className="field-hint">
          {hint}
        </p>
      )}
      {errors?.length ? (
        <p id={`${id}-error`} className="field-error">
          {errors.join("; ")}
        </p>
      ) : null}
    </div>
  );
}
