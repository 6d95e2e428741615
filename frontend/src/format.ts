// Display formatting, kept pure for tests.

const KIB = 1024;
const MIB = KIB * 1024;
const GIB = MIB * 1024;

/** Resident memory in binary units; MiB for the usual worker sizes. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return "–";
  if (bytes >= 10 * GIB) return `${(bytes / GIB).toFixed(1)} GiB`;
  if (bytes >= MIB || bytes === 0) return `${(bytes / MIB).toFixed(1)} MiB`;
  return `${(bytes / KIB).toFixed(1)} KiB`;
}

/**
 * A file's size for people: the largest binary unit that keeps the number under 1024, one
 * decimal ("54.8 MiB", never "56,144.6 KiB"); whole bytes below 1 KiB.
 */
export function formatFileSize(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return "–";
  if (bytes < KIB) return `${Math.round(bytes)} B`;
  const units: ReadonlyArray<[number, string]> = [
    [KIB, "KiB"],
    [MIB, "MiB"],
    [GIB, "GiB"],
    [GIB * 1024, "TiB"],
  ];
  let index = 0;
  // Rounding to one decimal can make 1023.96 KiB read "1024.0 KiB": take the next unit then.
  while (index < units.length - 1 && Number((bytes / units[index]![0]).toFixed(1)) >= 1024) index += 1;
  const [size, unit] = units[index]!;
  return `${(bytes / size).toFixed(1)} ${unit}`;
}

export function formatPercent(value: number): string {
  if (!Number.isFinite(value)) return "–";
  return `${value.toFixed(1)} %`;
}

/**
 * Parses the manager's ISO-8601 timestamps. A timestamp without a zone is UTC
 * (the contract says so), whereas JavaScript would read it as local time.
 */
export function parseServerTime(iso: string): number {
  const hasZone = /(?:[zZ]|[+-]\d{2}:?\d{2})$/.test(iso);
  return Date.parse(hasZone ? iso : `${iso}Z`);
}

/** "2 s ago", "5 min ago", "3 h ago", "2 d ago"; clock skew into the future reads "0 s ago". */
export function formatAgo(iso: string, nowMs: number): string {
  const then = parseServerTime(iso);
  if (Number.isNaN(then)) return "never";
  const seconds = Math.max(0, Math.floor((nowMs - then) / 1000));
  if (seconds < 60) return `${seconds} s ago`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return `${hours} h ago`;
  return `${Math.floor(hours / 24)} d ago`;
}
