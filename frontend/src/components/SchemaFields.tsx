import { Check, Field } from "./FormField";
import { fieldHint, inputBounds, type SchemaField } from "../state/schemaForm";

/** The id of a schema field's control, for labels and the error summary's links. */
export function schemaFieldId(prefix: string, key: string): string {
  return `${prefix}-${key.replace(/[^A-Za-z0-9_-]/g, "-")}`;
}

/**
 * Controls drawn from a JSON Schema's fields (state/schemaForm.ts): the title as label, the
 * default as value, the range on the input and in the hint, an enum as a select, the
 * description as help text; nested models in a fieldset of their own.
 */
export function SchemaFields({
  idPrefix,
  fields,
  values,
  errors,
  onChange,
}: {
  idPrefix: string;
  fields: readonly SchemaField[];
  values: Record<string, string>;
  errors: Readonly<Record<string, readonly string[] | undefined>>;
  onChange: (key: string, value: string) => void;
}) {
  const groups: { title: string | null; fields: SchemaField[] }[] = [];
  for (const field of fields) {
    const last = groups[groups.length - 1];
    if (last && last.title === field.group) last.fields.push(field);
    else groups.push({ title: field.group, fields: [field] });
  }
  const control = (field: SchemaField) => {
    const id = schemaFieldId(idPrefix, field.key);
    const value = values[field.key] ?? "";
    const set = (next: string) => onChange(field.key, next);
    const hint = fieldHint(field);
    if (field.kind === "boolean") {
      return <Check key={field.key} id={id} label={field.label} checked={value === "true"} errors={errors[field.key]} hint={hint} onChange={(v) => set(v ? "true" : "false")} />;
    }
    return (
      <Field key={field.key} id={id} label={field.label} errors={errors[field.key]} hint={hint}>
        {(props) =>
          field.kind === "choice" ? (
            <select {...props} value={value} onChange={(e) => set(e.target.value)}>
              {field.initial === "" && <option value="">default</option>}
              {(field.choices ?? []).map((choice) => (
                <option key={String(choice)} value={String(choice)}>
                  {String(choice)}
                </option>
              ))}
            </select>
          ) : field.kind === "text" ? (
            <input {...props} value={value} onChange={(e) => set(e.target.value)} />
          ) : (
            <input {...props} type="number" inputMode={field.kind === "integer" ? "numeric" : "decimal"} {...inputBounds(field)} value={value} onChange={(e) => set(e.target.value)} />
          )
        }
      </Field>
    );
  };
  return (
    <>
      {groups.map((group, i) =>
        group.title === null ? (
          group.fields.map(control)
        ) : (
          <fieldset key={`${group.title}-${i}`} className="form-grid wide">
            <legend>{group.title}</legend>
            {group.fields.map(control)}
          </fieldset>
        ),
      )}
    </>
  );
}
